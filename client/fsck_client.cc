#include "clf/fsck_client.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "clf/v1/admin.grpc.pb.h"
#include "clf/v1/peer.grpc.pb.h"
#include "common/credentials.h"
#include "common/layout_proto.h"
#include "common/object_ref.h"
#include "common/status_grpc.h"
#include "common/transport/grpc_transport.h"

namespace clf::client {
namespace {

constexpr uint32_t kScanTimeoutMs = 60000;

class GrpcFsckClient final : public FsckClient {
 public:
  GrpcFsckClient(const ClusterConfig& cluster, Credentials cred)
      : cred_(std::move(cred)), timeout_ms_(cluster.rpc_timeout_ms) {
    auto creds = ChannelCredentialsFor(cred_);
    for (const ServerConfig& s : cluster.servers) {
      auto channel = grpc::CreateCustomChannel(s.address, creds, ClfChannelArgs());
      stubs_.push_back(v1::Admin::NewStub(channel));
      peers_.push_back(v1::Peer::NewStub(channel));
      // Copies are compared through the Data service: any credential, no data channel setup.
      data_.push_back(std::make_unique<transport::GrpcTransport>(channel, cred_.secret, timeout_ms_));
    }
  }

  uint32_t servers() const override { return static_cast<uint32_t>(stubs_.size()); }
  void set_page_size(uint32_t n) override { page_ = n; }

  Result<std::vector<FsckEntry>> Entries(ServerId s) override {
    std::vector<FsckEntry> out;
    CLF_RETURN_IF_ERROR(ScanAll(s, v1::FSCK_SCAN_ENTRIES, [&](const v1::FsckScanReply& r) {
      for (const v1::FsckEntry& e : r.entries()) {
        out.push_back(FsckEntry{e.parent(), e.name(), e.handle(), static_cast<FileType>(e.type())});
      }
    }));
    return out;
  }

  Result<std::vector<FsckInode>> Inodes(ServerId s) override {
    std::vector<FsckInode> out;
    CLF_RETURN_IF_ERROR(ScanAll(s, v1::FSCK_SCAN_INODES, [&](const v1::FsckScanReply& r) {
      for (const v1::Attr& a : r.inodes()) {
        FsckInode i;
        i.handle = a.handle();
        i.type = static_cast<FileType>(a.type());
        i.nlink = a.nlink();
        i.size = a.size();
        i.blocks = a.blocks();
        i.writers = a.writers();
        i.layout = clf::FromProto(a.layout());
        for (const v1::ReplicaRef& c : a.stale_replicas()) i.stale.emplace_back(c.primary(), c.slot());
        out.push_back(i);
      }
    }));
    return out;
  }

  Result<std::vector<Handle>> Orphans(ServerId s) override { return Handles(s, v1::FSCK_SCAN_ORPHANS); }
  Result<std::vector<Handle>> Garbage(ServerId s) override { return Handles(s, v1::FSCK_SCAN_GARBAGE); }
  Result<std::vector<Handle>> DataObjects(ServerId s) override { return Handles(s, v1::FSCK_SCAN_DATA); }
  Result<std::vector<FsckRename>> Renames(ServerId s) override {
    std::vector<FsckRename> out;
    CLF_RETURN_IF_ERROR(ScanAll(s, v1::FSCK_SCAN_RENAMES, [&](const v1::FsckScanReply& r) {
      for (const v1::FsckRename& f : r.renames()) {
        FsckRename o;
        o.id = f.id();
        o.link_drop = f.link_drop();
        o.handle = f.handle();
        o.type = static_cast<FileType>(f.type());
        o.src_parent = f.src_parent();
        o.src_name = f.src_name();
        o.dst_parent = f.dst_parent();
        o.dst_name = f.dst_name();
        o.in_flight = f.in_flight();
        out.push_back(std::move(o));
      }
    }));
    return out;
  }

  Status RemoveEntry(Handle parent, const std::string& name, Handle handle) override {
    v1::FsckRepairRequest r;
    r.set_op(v1::FSCK_REPAIR_REMOVE_ENTRY);
    r.set_parent(parent);
    r.set_name(name);
    r.set_handle(handle);
    return Repair(ServerOf(parent), r);
  }
  Status AddEntry(Handle parent, const std::string& name, Handle handle, FileType t) override {
    v1::FsckRepairRequest r;
    r.set_op(v1::FSCK_REPAIR_ADD_ENTRY);
    r.set_parent(parent);
    r.set_name(name);
    r.set_handle(handle);
    r.set_type(static_cast<v1::FileType>(t));
    return Repair(ServerOf(parent), r);
  }
  Status SetNlink(Handle h, uint32_t nlink, uint32_t expect_nlink) override {
    v1::FsckRepairRequest r;
    r.set_op(v1::FSCK_REPAIR_SET_NLINK);
    r.set_handle(h);
    r.set_nlink(nlink);
    r.set_expect_nlink(expect_nlink);
    return Repair(ServerOf(h), r);
  }
  Status DropOrphan(Handle h) override {
    v1::FsckRepairRequest r;
    r.set_op(v1::FSCK_REPAIR_DROP_ORPHAN);
    r.set_handle(h);
    return Repair(ServerOf(h), r);
  }
  Status ClearBlocks(Handle h, uint64_t expect_blocks) override {
    v1::FsckRepairRequest r;
    r.set_op(v1::FSCK_REPAIR_CLEAR_BLOCKS);
    r.set_handle(h);
    r.set_expect_blocks(expect_blocks);
    return Repair(ServerOf(h), r);
  }
  Status SettleRename(ServerId s, uint64_t id) override {
    v1::FsckRepairRequest r;
    r.set_op(v1::FSCK_REPAIR_SETTLE_RENAME);
    r.set_handle(id);
    return Repair(s, r);
  }
  Status ReadCopy(Handle h, uint32_t replicas, ServerId primary, uint32_t slot, uint64_t offset,
                  uint64_t length, std::string* out) override {
    const uint32_t n = servers();
    if (primary >= n || slot >= replicas || replicas > n) return Invalid("no such copy");
    out->assign(length, '\0');
    return data_[ReplicaServer(primary, slot, n)]->Read(
        ObjectRef(h, slot, replicas), {Extent{offset, length}}, {iovec{out->data(), out->size()}});
  }
  Status MarkCopyStale(Handle h, ServerId primary, uint32_t slot) override {
    const ServerId m = ServerOf(h);
    if (m >= servers()) return Invalid("no such server");
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_ms_);
    v1::ReplicasRequest r;
    r.set_handle(h);
    r.set_op(v1::REPLICAS_MARK_STALE);
    r.mutable_copy()->set_primary(primary);
    r.mutable_copy()->set_slot(slot);
    v1::ReplicasReply rep;
    return FromGrpc(peers_[m]->Replicas(&ctx, r, &rep));
  }
  Status RemoveDataObject(ServerId s, Handle h) override {
    if (s >= servers()) return Invalid("no such server");
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_ms_);
    v1::RemoveObjectRequest r;
    r.set_handle(h);
    v1::RemoveObjectReply rep;
    return FromGrpc(stubs_[s]->RemoveObject(&ctx, r, &rep));
  }

 private:
  void Prepare(grpc::ClientContext* ctx, uint32_t ms) const {
    AddCallCredentials(ctx, cred_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
  }

  template <typename Fn>
  Status ScanAll(ServerId s, v1::FsckScanKind kind, Fn on_page) {
    if (s >= servers()) return Invalid("no such server");
    v1::FsckScanRequest req;
    req.set_kind(kind);
    req.set_max(page_);
    for (;;) {
      grpc::ClientContext ctx;
      Prepare(&ctx, kScanTimeoutMs);
      v1::FsckScanReply rep;
      CLF_RETURN_IF_ERROR(FromGrpc(stubs_[s]->FsckScan(&ctx, req, &rep)));
      on_page(rep);
      if (rep.done()) return Status::Ok();
      *req.mutable_after() = rep.next();
    }
  }

  Result<std::vector<Handle>> Handles(ServerId s, v1::FsckScanKind kind) {
    std::vector<Handle> out;
    CLF_RETURN_IF_ERROR(ScanAll(s, kind, [&](const v1::FsckScanReply& r) {
      out.insert(out.end(), r.handles().begin(), r.handles().end());
    }));
    return out;
  }

  Status Repair(ServerId s, const v1::FsckRepairRequest& r) {
    if (s >= servers()) return Invalid("no such server");
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_ms_);
    v1::FsckRepairReply rep;
    return FromGrpc(stubs_[s]->FsckRepair(&ctx, r, &rep));
  }

  Credentials cred_;
  uint32_t timeout_ms_;
  uint32_t page_ = 4096;
  std::vector<std::unique_ptr<v1::Admin::Stub>> stubs_;
  std::vector<std::unique_ptr<v1::Peer::Stub>> peers_;
  std::vector<std::unique_ptr<transport::GrpcTransport>> data_;
};

}  // namespace

Result<std::unique_ptr<FsckClient>> FsckClient::Open(const ClusterConfig& cluster,
                                                     const ClientOptions& opts) {
  CLF_RETURN_IF_ERROR(cluster.Validate());
  CLF_ASSIGN_OR_RETURN(Credentials cred, LoadClientCredentials(cluster, opts.tls_cert, opts.tls_key,
                                                               opts.secret_file));
  return std::unique_ptr<FsckClient>(new GrpcFsckClient(cluster, std::move(cred)));
}

}  // namespace clf::client
