// gRPC adapters of clfd: decode, check the caller (auth.h), hop to an executor,
// call MetaOps, encode. No logic here.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "clf/v1/admin.grpc.pb.h"
#include "clf/v1/data.grpc.pb.h"
#include "clf/v1/meta.grpc.pb.h"
#include "clf/v1/peer.grpc.pb.h"
#include "common/credentials.h"
#include "common/executor.h"
#include "server/data/data_bytes.h"
#include "server/data/read_gate.h"
#include "server/ops/admin_ops.h"
#include "server/ops/client_mode_ops.h"
#include "server/ops/lock_ops.h"
#include "server/ops/data_ops.h"
#include "server/ops/dir_leases.h"
#include "server/ops/meta_ops.h"
#include "server/ops/peers.h"
#include "server/ops/replica_state.h"
#include "server/ops/replication.h"
#include "server/ops/resync.h"
#include "server/service/auth.h"

namespace clf::server {

struct ServiceContext {
  MetaOps* ops = nullptr;
  ClientModeOps* client_mode = nullptr;  // metadata_mode = "client" (the Baseline service)
  LockOps* locks = nullptr;  // lock counts for Admin.Status (may be null)
  DirLeases* leases = nullptr;  // directory leases (null: off)
  DataOps* data = nullptr;
  ReplicaStateOps* replica_state = nullptr;  // replicated files' copies, on M (may be null)
  Replication* replication = nullptr;        // replicated files' copies held here (may be null)
  const Resyncer* resyncer = nullptr;        // their resync (may be null)
  DataBytes* data_bytes = nullptr;  // payload counts of every data path (may be null)
  const ReadGate* reads = nullptr;  // the data channel's read schedule (null: no data channel)
  ObjectStore* objects = nullptr;
  RocksMetaStore* store = nullptr;
  Executor* io = nullptr;    // client-facing requests (may wait on other servers)
  Executor* peer = nullptr;  // server-to-server requests (never wait on a client-facing executor)
  AuthConfig auth;           // who may call what (auth.h)
  std::string address;
  std::string transport = "grpc";  // bulk data paths offered: "tcp" while the data channel serves
  std::string data_address;        // the data channel's address (empty: none)
  ServerId id = 0;
  std::chrono::steady_clock::time_point started;
  std::atomic<uint64_t> requests{0};
};

class MetaService final : public v1::Meta::CallbackService {
 public:
  explicit MetaService(ServiceContext* c) : c_(c) {}
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext*, const v1::LookupRequest*, v1::AttrReply*) override;
  grpc::ServerUnaryReactor* GetAttr(grpc::CallbackServerContext*, const v1::GetAttrRequest*, v1::AttrReply*) override;
  grpc::ServerUnaryReactor* SetAttr(grpc::CallbackServerContext*, const v1::SetAttrRequest*, v1::AttrReply*) override;
  grpc::ServerUnaryReactor* Create(grpc::CallbackServerContext*, const v1::CreateRequest*, v1::AttrReply*) override;
  grpc::ServerUnaryReactor* Link(grpc::CallbackServerContext*, const v1::LinkRequest*, v1::AttrReply*) override;
  grpc::ServerUnaryReactor* Remove(grpc::CallbackServerContext*, const v1::RemoveRequest*, v1::RemoveReply*) override;
  grpc::ServerUnaryReactor* Rename(grpc::CallbackServerContext*, const v1::RenameRequest*, v1::RenameReply*) override;
  grpc::ServerUnaryReactor* ReadDir(grpc::CallbackServerContext*, const v1::ReadDirRequest*, v1::ReadDirReply*) override;
  grpc::ServerUnaryReactor* Readlink(grpc::CallbackServerContext*, const v1::GetAttrRequest*, v1::ReadlinkReply*) override;
  grpc::ServerUnaryReactor* GetXattr(grpc::CallbackServerContext*, const v1::XattrRequest*, v1::XattrReply*) override;
  grpc::ServerUnaryReactor* SetXattr(grpc::CallbackServerContext*, const v1::XattrRequest*, v1::XattrReply*) override;
  grpc::ServerUnaryReactor* ListXattr(grpc::CallbackServerContext*, const v1::XattrRequest*, v1::XattrReply*) override;
  grpc::ServerUnaryReactor* RemoveXattr(grpc::CallbackServerContext*, const v1::XattrRequest*, v1::XattrReply*) override;
  grpc::ServerUnaryReactor* Destroy(grpc::CallbackServerContext*, const v1::DestroyRequest*, v1::DestroyReply*) override;
  grpc::ServerUnaryReactor* ReportWrite(grpc::CallbackServerContext*, const v1::ReportWriteRequest*, v1::AttrReply*) override;
  grpc::ServerUnaryReactor* DirLease(grpc::CallbackServerContext*, const v1::DirLeaseRequest*, v1::DirLeaseReply*) override;
  grpc::ServerUnaryReactor* LeaseEvents(grpc::CallbackServerContext*, const v1::LeaseEventsRequest*, v1::LeaseEventsReply*) override;
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext*, const v1::CommitRequest*, v1::CommitReply*) override;

 private:
  ServiceContext* c_;
};

class DataService final : public v1::Data::CallbackService {
 public:
  explicit DataService(ServiceContext* c) : c_(c) {}
  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext*, const v1::WriteRequest*, v1::WriteReply*) override;
  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext*, const v1::ReadRequest*, v1::ReadReply*) override;
  grpc::ServerUnaryReactor* Sync(grpc::CallbackServerContext*, const v1::SyncRequest*, v1::SyncReply*) override;

 private:
  ServiceContext* c_;
};

class PeerService final : public v1::Peer::CallbackService {
 public:
  explicit PeerService(ServiceContext* c) : c_(c) {}
  grpc::ServerUnaryReactor* Collective(grpc::CallbackServerContext*, const v1::CollectiveRequest*, v1::CollectiveReply*) override;
  grpc::ServerUnaryReactor* MakeDir(grpc::CallbackServerContext*, const v1::MakeDirRequest*, v1::AttrOnly*) override;
  grpc::ServerUnaryReactor* RemoveDir(grpc::CallbackServerContext*, const v1::RemoveDirRequest*, v1::AttrOnly*) override;
  grpc::ServerUnaryReactor* AdjustLink(grpc::CallbackServerContext*, const v1::AdjustLinkRequest*, v1::AdjustLinkReply*) override;
  grpc::ServerUnaryReactor* GetAttrs(grpc::CallbackServerContext*, const v1::GetAttrsRequest*, v1::GetAttrsReply*) override;
  grpc::ServerUnaryReactor* InsertEntry(grpc::CallbackServerContext*, const v1::InsertEntryRequest*, v1::InsertEntryReply*) override;
  grpc::ServerUnaryReactor* ResolveRename(grpc::CallbackServerContext*, const v1::ResolveRenameRequest*, v1::ResolveRenameReply*) override;
  grpc::ServerUnaryReactor* ForgetRenames(grpc::CallbackServerContext*, const v1::ForgetRenamesRequest*, v1::ForgetRenamesReply*) override;
  grpc::ServerUnaryReactor* Replicas(grpc::CallbackServerContext*, const v1::ReplicasRequest*, v1::ReplicasReply*) override;
  grpc::ServerUnaryReactor* ReplicasChanged(grpc::CallbackServerContext*, const v1::ReplicasChangedRequest*, v1::ReplicasChangedReply*) override;
  grpc::ServerUnaryReactor* AnnounceStore(grpc::CallbackServerContext*, const v1::AnnounceStoreRequest*, v1::AnnounceStoreReply*) override;

 private:
  ServiceContext* c_;
};

class AdminService final : public v1::Admin::CallbackService {
 public:
  explicit AdminService(ServiceContext* c)
      : c_(c), admin_(c->ops, c->store, c->objects, c->locks) {}
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext*, const v1::StatusRequest*, v1::StatusReply*) override;
  grpc::ServerUnaryReactor* ListObjects(grpc::CallbackServerContext*, const v1::ListObjectsRequest*, v1::ListObjectsReply*) override;
  grpc::ServerUnaryReactor* RemoveObject(grpc::CallbackServerContext*, const v1::RemoveObjectRequest*, v1::RemoveObjectReply*) override;
  // fsck (admin_fsck.cc).
  grpc::ServerUnaryReactor* FsckScan(grpc::CallbackServerContext*, const v1::FsckScanRequest*, v1::FsckScanReply*) override;
  grpc::ServerUnaryReactor* FsckRepair(grpc::CallbackServerContext*, const v1::FsckRepairRequest*, v1::FsckRepairReply*) override;

 private:
  ServiceContext* c_;
  AdminOps admin_;  // what Status, ListObjects and RemoveObject report and do
};

// Peers over gRPC: one channel per server with this server's credential (its
// certificate, or the peer secret on every call), a deadline per hop.
class GrpcPeers final : public Peers {
 public:
  GrpcPeers(const ClusterConfig& cluster, Credentials cred);
  void Collective(ServerId to, const v1::CollectiveRequest& req,
                  std::function<void(clf::Status, v1::CollectiveReply)> cb) override;
  Result<v1::Attr> MakeDir(ServerId to, const v1::MakeDirRequest& req) override;
  clf::Status RemoveDir(ServerId to, Handle h) override;
  Result<v1::AdjustLinkReply> AdjustLink(ServerId to, const v1::AdjustLinkRequest& req) override;
  Result<std::vector<v1::Attr>> GetAttrs(ServerId to, const std::vector<Handle>& hs) override;
  void GetAttrsAsync(ServerId to, const std::vector<Handle>& hs,
                     std::function<void(Result<std::vector<v1::Attr>>)> cb) override;
  // Half the hop's deadline: the source server keeps the other half to settle
  // an unanswered insert with ResolveRename before its own caller gives up.
  Result<v1::InsertEntryReply> InsertEntry(ServerId to, const v1::InsertEntryRequest& req) override;
  Result<v1::ResolveRenameReply> ResolveRename(ServerId to,
                                               const v1::ResolveRenameRequest& req) override;
  Result<v1::ForgetRenamesReply> ForgetRenames(ServerId to,
                                               const v1::ForgetRenamesRequest& req) override;
  Result<v1::ReplicasReply> Replicas(ServerId to, const v1::ReplicasRequest& req) override;
  // Within a quarter of the RPC timeout.
  void ReplicasChanged(ServerId to, Handle h, std::function<void(clf::Status)> cb) override;
  // Waits for a server not up yet, for the RPC timeout times 4 (M may scan
  // its files); CancelAnnouncements ends the calls in flight (stopping).
  Result<v1::AnnounceStoreReply> AnnounceStore(ServerId to, const v1::AnnounceStoreRequest& req) override;
  void CancelAnnouncements();

 private:
  void Prepare(grpc::ClientContext* ctx) const;
  v1::Peer::Stub* Stub(ServerId to) const;  // nullptr for an id outside the cluster
  std::vector<std::unique_ptr<v1::Peer::Stub>> stubs_;
  std::vector<std::unique_ptr<v1::Peer::Stub>> announce_stubs_;  // AnnounceStore's own channels
  std::mutex announce_mu_;  // guards announcing_, announce_cancelled_
  std::set<grpc::ClientContext*> announcing_;
  bool announce_cancelled_ = false;
  Credentials cred_;
  uint32_t timeout_ms_;
};

}  // namespace clf::server
