// libclf over gRPC: GrpcClient puts together the parts of the client, each
// in its own file, and forwards each Client call to the one that serves it:
//   rpc_channel     the metadata channels, session, credentials, deadlines
//   namespace_client  the namespace calls, directory leases and commits
//   dir_attr_cache  directory attributes seen (ClientOptions::dir_attr_cache_ms)
//   baseline_path   metadata_mode = "client"'s create, remove and stat
//   data_paths      the bulk-data transport to each server
//   io_planner      requests cut and ordered into schedule blocks (paper 000)
//   data_client     write, read, list I/O and sync over those two
//   admin_client    server status, statfs, the object listings fsck uses
#include "clf/client.h"

#include <future>

#include "client/admin_client.h"
#include "client/baseline_path.h"
#include "client/data_client.h"
#include "client/data_paths.h"
#include "client/dir_attr_cache.h"
#include "client/io_planner.h"
#include "client/namespace_client.h"
#include "client/rpc_channel.h"
#include "client/sync_call.h"
#include "common/log.h"

namespace clf::client {
namespace {

class GrpcClient final : public Client {
 public:
  GrpcClient(const ClusterConfig& cluster, const Credentials& cred, SslCtxPtr data_tls,
             const ClientOptions& opts, TransportKind transport)
      : rpc_(cluster, cred, opts.rpc_timeout_ms ? opts.rpc_timeout_ms : cluster.rpc_timeout_ms),
        dirs_(opts.dir_attr_cache_ms),
        baseline_(cluster.metadata_mode == MetadataMode::kClient
                      ? std::make_unique<BaselinePath>(rpc_)
                      : nullptr),
        ns_(rpc_, dirs_, baseline_.get()),
        admin_(rpc_),
        paths_(cluster, cred, std::move(data_tls), transport, rpc_.timeout_ms()),
        planner_(cluster, opts),
        data_(cluster.size(), paths_, planner_) {}

  ~GrpcClient() override {
    // Every call has a deadline (a lease poll: its wait on top), so this ends.
    if (!rpc_.WaitIdle(std::chrono::milliseconds(rpc_.timeout_ms() + 11000))) {
      CLF_LOG_WARN("client closed with calls still in flight");
    }
  }

  const ClusterConfig& cluster() const override { return rpc_.cluster(); }
  std::string DataTransportOf(ServerId s) override { return paths_.TransportOf(s); }
  uint64_t session() const override { return rpc_.session(); }

  // ---- namespace (NamespaceClient)
  void Lookup(Handle parent, std::string name, Caller caller, Callback<Attr> cb) override {
    ns_.Lookup(parent, std::move(name), std::move(caller), std::move(cb));
  }
  void GetAttr(Handle h, Caller caller, Callback<Attr> cb) override {
    ns_.GetAttr(h, std::move(caller), std::move(cb));
  }
  void SetAttr(Handle h, SetAttrArgs a, Caller caller, Callback<Attr> cb) override {
    ns_.SetAttr(h, std::move(a), std::move(caller), std::move(cb));
  }
  void Create(Handle parent, std::string name, CreateArgs a, Caller caller,
              Callback<Attr> cb) override {
    ns_.Create(parent, std::move(name), std::move(a), std::move(caller), std::move(cb));
  }
  void ReportWrite(Handle h, ReportWriteArgs a, Caller caller, Callback<Attr> cb) override {
    ns_.ReportWrite(h, a, std::move(caller), std::move(cb));
  }
  void Link(Handle h, Handle new_parent, std::string new_name, Caller caller,
            Callback<Attr> cb) override {
    ns_.Link(h, new_parent, std::move(new_name), std::move(caller), std::move(cb));
  }
  void Remove(Handle parent, std::string name, bool directory, bool keep_orphan, Caller caller,
              Callback<RemoveResult> cb) override {
    ns_.Remove(parent, std::move(name), directory, keep_orphan, std::move(caller), std::move(cb));
  }
  void Rename(Handle sp, std::string sn, Handle dp, std::string dn, uint32_t flags,
              bool keep_orphan, Caller caller, Callback<RemoveResult> cb) override {
    ns_.Rename(sp, std::move(sn), dp, std::move(dn), flags, keep_orphan, std::move(caller),
               std::move(cb));
  }
  void ReadDir(Handle dir, std::string after, uint32_t max_entries, bool plus, Caller caller,
               Callback<DirPage> cb) override {
    ns_.ReadDir(dir, std::move(after), max_entries, plus, std::move(caller), std::move(cb));
  }
  void Readlink(Handle h, Caller caller, Callback<std::string> cb) override {
    ns_.Readlink(h, std::move(caller), std::move(cb));
  }
  void GetXattr(Handle h, std::string name, Caller caller, Callback<std::string> cb) override {
    ns_.GetXattr(h, std::move(name), std::move(caller), std::move(cb));
  }
  void SetXattr(Handle h, std::string name, std::string value, uint32_t flags, Caller caller,
                StatusCallback cb) override {
    ns_.SetXattr(h, std::move(name), std::move(value), flags, std::move(caller), std::move(cb));
  }
  void ListXattr(Handle h, Caller caller, Callback<std::vector<std::string>> cb) override {
    ns_.ListXattr(h, std::move(caller), std::move(cb));
  }
  void RemoveXattr(Handle h, std::string name, Caller caller, StatusCallback cb) override {
    ns_.RemoveXattr(h, std::move(name), std::move(caller), std::move(cb));
  }
  void Destroy(Handle h, StatusCallback cb) override { ns_.Destroy(h, std::move(cb)); }
  void AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs, Caller caller,
                       Callback<DirLeaseGrant> cb) override {
    ns_.AcquireDirLease(dir, handles_wanted, with_attrs, std::move(caller), std::move(cb));
  }
  void ReleaseDirLease(Handle dir, StatusCallback cb) override {
    ns_.ReleaseDirLease(dir, std::move(cb));
  }
  void EndLeaseSession(ServerId s, StatusCallback cb) override {
    ns_.EndLeaseSession(s, std::move(cb));
  }
  void LeaseEvents(ServerId s, uint32_t wait_ms, Callback<std::vector<Handle>> cb) override {
    ns_.LeaseEvents(s, wait_ms, std::move(cb));
  }
  void Commit(ServerId s, std::vector<CommitOp> ops, Callback<std::vector<Status>> cb) override {
    ns_.Commit(s, std::move(ops), std::move(cb));
  }

  // ---- data (DataClient)
  void Write(Handle h, const Layout& layout, uint64_t offset, std::string data,
             Callback<uint64_t> cb) override {
    data_.Write(h, layout, offset, std::move(data), std::move(cb));
  }
  void Read(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
            Callback<std::string> cb) override {
    data_.Read(h, layout, offset, length, std::move(cb));
  }
  void ReadInto(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                std::string buffer, Callback<std::string> cb) override {
    data_.ReadInto(h, layout, offset, length, std::move(buffer), std::move(cb));
  }
  void ReadToPipe(Handle h, const Layout& layout, uint64_t offset, uint64_t length, int pipe_w,
                  int pipe_r, std::string buffer, Callback<PipedRead> cb) override {
    data_.ReadToPipe(h, layout, offset, length, pipe_w, pipe_r, std::move(buffer), std::move(cb));
  }
  void WriteList(Handle h, const Layout& layout, std::vector<FileExtent> extents, std::string data,
                 Callback<uint64_t> cb) override {
    data_.WriteList(h, layout, std::move(extents), std::move(data), std::move(cb));
  }
  void ReadList(Handle h, const Layout& layout, std::vector<FileExtent> extents,
                Callback<std::string> cb) override {
    data_.ReadList(h, layout, std::move(extents), std::move(cb));
  }
  void Sync(Handle h, const Layout& layout, StatusCallback cb) override {
    data_.Sync(h, layout, std::move(cb));
  }

  // ---- cluster (AdminClient)
  void StatFs(Callback<struct StatFs> cb) override { admin_.StatFs(std::move(cb)); }
  std::vector<ServerStatus> ServerStatuses() override { return admin_.ServerStatuses(); }
  Result<ObjectListing> ListObjects(ServerId server) override { return admin_.ListObjects(server); }
  Status RemoveDataObject(ServerId server, Handle h) override {
    return admin_.RemoveDataObject(server, h);
  }

 private:
  // Destroyed bottom-up: the data threads finish queued requests first, while
  // the data paths, the channels and everything they use still live.
  RpcChannel rpc_;
  DirAttrCache dirs_;
  std::unique_ptr<BaselinePath> baseline_;  // metadata_mode = "client" only
  NamespaceClient ns_;
  AdminClient admin_;
  DataPaths paths_;
  IoPlanner planner_;
  DataClient data_;
};


}  // namespace

Result<std::unique_ptr<Client>> Client::Open(const std::string& cluster_file, ClientOptions opts) {
  CLF_ASSIGN_OR_RETURN(ClusterConfig c, LoadClusterConfig(cluster_file));
  return Open(c, opts);
}

Status Client::CheckCredentials(const ClusterConfig& cluster, const ClientOptions& opts) {
  return LoadClientCredentials(cluster, opts.tls_cert, opts.tls_key, opts.secret_file).status();
}

Result<std::unique_ptr<Client>> Client::Open(const ClusterConfig& cluster, ClientOptions opts) {
  CLF_RETURN_IF_ERROR(cluster.Validate());
  CLF_ASSIGN_OR_RETURN(Credentials cred, LoadClientCredentials(cluster, opts.tls_cert, opts.tls_key,
                                                               opts.secret_file));
  SslCtxPtr data_tls;
  if (cred.tls) {
    CLF_ASSIGN_OR_RETURN(data_tls, MakeDataTlsContext(cred, /*server=*/false));
  }
  TransportKind transport = cluster.transport;
  if (!opts.transport.empty()) {
    CLF_ASSIGN_OR_RETURN(transport, ParseTransport(opts.transport));
  }
  CLF_RETURN_IF_ERROR(CheckTransport(transport));
  if (!opts.sched.empty()) CLF_RETURN_IF_ERROR(ParseOrderPolicy(opts.sched).status());
  if (opts.sched_block != 0) CLF_RETURN_IF_ERROR(ValidateSchedBlock(opts.sched_block));
  if (!opts.read_sched.empty()) CLF_RETURN_IF_ERROR(ParseReadSched(opts.read_sched).status());
  if (opts.sched_window > kMaxSchedWindow) return Invalid("sched_window larger than 1024");
  return std::unique_ptr<Client>(
      new GrpcClient(cluster, std::move(cred), std::move(data_tls), opts, transport));
}

Result<Attr> Client::LookupSync(Handle parent, const std::string& name, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { Lookup(parent, name, c, std::move(cb)); });
}
Result<Attr> Client::GetAttrSync(Handle h, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { GetAttr(h, c, std::move(cb)); });
}
Result<Attr> Client::SetAttrSync(Handle h, const SetAttrArgs& a, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { SetAttr(h, a, c, std::move(cb)); });
}
Result<Attr> Client::CreateSync(Handle parent, const std::string& name, const CreateArgs& a,
                                const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { Create(parent, name, a, c, std::move(cb)); });
}
Result<Attr> Client::LinkSync(Handle h, Handle np, const std::string& name, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { Link(h, np, name, c, std::move(cb)); });
}
Result<RemoveResult> Client::RemoveSync(Handle parent, const std::string& name, bool directory,
                                        const Caller& c) {
  return Wait<RemoveResult>(
      [&](Callback<RemoveResult> cb) { Remove(parent, name, directory, false, c, std::move(cb)); });
}
Result<RemoveResult> Client::RenameSync(Handle sp, const std::string& sn, Handle dp,
                                        const std::string& dn, uint32_t flags, const Caller& c) {
  return Wait<RemoveResult>(
      [&](Callback<RemoveResult> cb) { Rename(sp, sn, dp, dn, flags, false, c, std::move(cb)); });
}
Result<DirPage> Client::ReadDirSync(Handle dir, const std::string& after, uint32_t max, bool plus,
                                    const Caller& c) {
  return Wait<DirPage>(
      [&](Callback<DirPage> cb) { ReadDir(dir, after, max, plus, c, std::move(cb)); });
}
Result<std::string> Client::ReadlinkSync(Handle h, const Caller& c) {
  return Wait<std::string>([&](Callback<std::string> cb) { Readlink(h, c, std::move(cb)); });
}
Result<uint64_t> Client::WriteSync(Handle h, const Layout& l, uint64_t off, std::string data) {
  Result<uint64_t> n = Wait<uint64_t>(
      [&](Callback<uint64_t> cb) { Write(h, l, off, std::move(data), std::move(cb)); });
  if (!n.ok() || *n == 0) return n;
  ReportWriteArgs a;
  a.wrote = true;
  a.size = off + *n;
  a.refresh = true;
  CLF_RETURN_IF_ERROR(ReportWriteSync(h, a).status());
  return n;
}
Result<uint64_t> Client::WriteListSync(Handle h, const Layout& l, std::vector<FileExtent> extents,
                                       std::string data) {
  return Wait<uint64_t>([&](Callback<uint64_t> cb) {
    WriteList(h, l, std::move(extents), std::move(data), std::move(cb));
  });
}
Result<std::string> Client::ReadListSync(Handle h, const Layout& l,
                                         std::vector<FileExtent> extents) {
  return Wait<std::string>(
      [&](Callback<std::string> cb) { ReadList(h, l, std::move(extents), std::move(cb)); });
}
Result<Attr> Client::ReportWriteSync(Handle h, const ReportWriteArgs& a, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { ReportWrite(h, a, c, std::move(cb)); });
}
Result<std::string> Client::ReadSync(Handle h, const Layout& l, uint64_t off, uint64_t len) {
  return Wait<std::string>([&](Callback<std::string> cb) { Read(h, l, off, len, std::move(cb)); });
}
Status Client::SyncSync(Handle h, const Layout& l) {
  return WaitStatus([&](StatusCallback cb) { Sync(h, l, std::move(cb)); });
}
Result<StatFs> Client::StatFsSync() {
  return Wait<struct StatFs>([&](Callback<struct StatFs> cb) { StatFs(std::move(cb)); });
}
Status Client::SetXattrSync(Handle h, const std::string& n, const std::string& v, uint32_t flags,
                            const Caller& c) {
  return WaitStatus([&](StatusCallback cb) { SetXattr(h, n, v, flags, c, std::move(cb)); });
}
Result<std::string> Client::GetXattrSync(Handle h, const std::string& n, const Caller& c) {
  return Wait<std::string>([&](Callback<std::string> cb) { GetXattr(h, n, c, std::move(cb)); });
}
Result<std::vector<std::string>> Client::ListXattrSync(Handle h, const Caller& c) {
  return Wait<std::vector<std::string>>(
      [&](Callback<std::vector<std::string>> cb) { ListXattr(h, c, std::move(cb)); });
}
Status Client::RemoveXattrSync(Handle h, const std::string& n, const Caller& c) {
  return WaitStatus([&](StatusCallback cb) { RemoveXattr(h, n, c, std::move(cb)); });
}

Result<Attr> Client::ResolvePath(const std::string& path, const Caller& c) {
  if (path.empty() || path[0] != '/')
    return Invalid("path must be absolute inside the file system");
  CLF_ASSIGN_OR_RETURN(Attr cur, GetAttrSync(root(), c));
  size_t pos = 1;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    std::string comp = path.substr(pos, next - pos);
    pos = next + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") return Invalid("'..' is not supported in paths given to libclf");
    if (cur.type != FileType::kDirectory) return Status(Code::kNotDir, "not a directory: " + comp);
    CLF_ASSIGN_OR_RETURN(cur, LookupSync(cur.handle, comp, c));
  }
  return cur;
}

}  // namespace clf::client
