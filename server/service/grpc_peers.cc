// GrpcPeers: the Peers interface of ops/ over gRPC stubs.
#include "server/service/services.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <charconv>
#include <future>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/status_grpc.h"
#include "common/tsan.h"
#include "common/version.h"
#include "server/ops/lease_commit.h"
#include "server/service/validate.h"

#include "server/service/serve.h"

namespace clf::server {

using namespace service_detail;  // NOLINT: the shared request boundary (serve.h)

GrpcPeers::GrpcPeers(const ClusterConfig& cluster, Credentials cred)
    : cred_(std::move(cred)), timeout_ms_(cluster.rpc_timeout_ms) {
  std::shared_ptr<grpc::ChannelCredentials> creds = ChannelCredentialsFor(cred_);
  for (const ServerConfig& s : cluster.servers) {
    auto ch = grpc::CreateCustomChannel(s.address, creds, ClfChannelArgs());
    stubs_.push_back(v1::Peer::NewStub(ch));
    // The start-up announcement waits for servers that are not up yet: on
    // connections of its own (a local subchannel pool), so the channels
    // the other calls use are not left backing off from its refused dials.
    grpc::ChannelArguments args = ClfChannelArgs();
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    announce_stubs_.push_back(
        v1::Peer::NewStub(grpc::CreateCustomChannel(s.address, creds, args)));
  }
}

void GrpcPeers::Prepare(grpc::ClientContext* ctx) const {
  AddCallCredentials(ctx, cred_);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_));
}

v1::Peer::Stub* GrpcPeers::Stub(ServerId to) const {
  return to < stubs_.size() ? stubs_[to].get() : nullptr;
}

namespace {
clf::Status NoSuchServer(ServerId to) {
  return clf::Status(Code::kStale, "server " + std::to_string(to) + " is not in the cluster");
}
}  // namespace

void GrpcPeers::Collective(ServerId to, const v1::CollectiveRequest& req,
                           std::function<void(clf::Status, v1::CollectiveReply)> cb) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return cb(NoSuchServer(to), {});
  struct Call {
    grpc::ClientContext ctx;
    v1::CollectiveRequest req;
    v1::CollectiveReply resp;
  };
  auto call = std::make_shared<Call>();
  call->req = req;
  Prepare(&call->ctx);
  if (req.budget_ms() > 0) {
    auto dl = std::chrono::system_clock::now() + std::chrono::milliseconds(req.budget_ms());
    if (dl < call->ctx.deadline()) call->ctx.set_deadline(dl);
  }
  // The hand-off to gRPC's completion thread (common/tsan.h).
  stub->async()->Collective(&call->ctx, &call->req, &call->resp,
                            tsan::Handoff(call.get(), [call, cb = std::move(cb)](grpc::Status s) {
                              // On a gRPC thread: nothing may unwind into it.
                              auto fn = [&] {
                                cb(FromGrpc(s), std::move(call->resp));
                                return clf::Status::Ok();
                              };
                              Guarded("collective completion", fn).IgnoreError();
                            }));
}

Result<v1::Attr> GrpcPeers::MakeDir(ServerId to, const v1::MakeDirRequest& req) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::AttrOnly resp;
  clf::Status s = FromGrpc(stub->MakeDir(&ctx, req, &resp));
  if (!s.ok()) return s.WithContext("make directory on server " + std::to_string(to));
  return resp.attr();
}

clf::Status GrpcPeers::RemoveDir(ServerId to, Handle h) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::RemoveDirRequest req;
  req.set_handle(h);
  v1::AttrOnly resp;
  return FromGrpc(stub->RemoveDir(&ctx, req, &resp));
}

Result<v1::AdjustLinkReply> GrpcPeers::AdjustLink(ServerId to, const v1::AdjustLinkRequest& req) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::AdjustLinkReply resp;
  clf::Status s = FromGrpc(stub->AdjustLink(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

Result<std::vector<v1::Attr>> GrpcPeers::GetAttrs(ServerId to, const std::vector<Handle>& hs) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::GetAttrsRequest req;
  for (Handle h : hs) req.add_handles(h);
  v1::GetAttrsReply resp;
  clf::Status s = FromGrpc(stub->GetAttrs(&ctx, req, &resp));
  if (!s.ok()) return s;
  return std::vector<v1::Attr>(resp.attrs().begin(), resp.attrs().end());
}

void GrpcPeers::GetAttrsAsync(ServerId to, const std::vector<Handle>& hs,
                              std::function<void(Result<std::vector<v1::Attr>>)> cb) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return cb(NoSuchServer(to));
  struct Call {
    grpc::ClientContext ctx;
    v1::GetAttrsRequest req;
    v1::GetAttrsReply resp;
  };
  auto call = std::make_shared<Call>();
  Prepare(&call->ctx);
  for (Handle h : hs) call->req.add_handles(h);
  stub->async()->GetAttrs(
      &call->ctx, &call->req, &call->resp,
      tsan::Handoff(call.get(), [call, cb = std::move(cb)](grpc::Status s) {
        // On a gRPC thread: nothing may unwind into it.
        auto fn = [&] {
          clf::Status st = FromGrpc(s);
          if (!st.ok()) {
            cb(st);
          } else {
            cb(std::vector<v1::Attr>(call->resp.attrs().begin(), call->resp.attrs().end()));
          }
          return clf::Status::Ok();
        };
        Guarded("getattrs completion", fn).IgnoreError();
      }));
}

Result<v1::InsertEntryReply> GrpcPeers::InsertEntry(ServerId to, const v1::InsertEntryRequest& req) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  AddCallCredentials(&ctx, cred_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_ / 2));
  v1::InsertEntryReply resp;
  clf::Status s = FromGrpc(stub->InsertEntry(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

Result<v1::ResolveRenameReply> GrpcPeers::ResolveRename(ServerId to,
                                                        const v1::ResolveRenameRequest& req) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  AddCallCredentials(&ctx, cred_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_ / 4));
  v1::ResolveRenameReply resp;
  clf::Status s = FromGrpc(stub->ResolveRename(&ctx, req, &resp));
  if (!s.ok()) return s.WithContext("resolve rename on server " + std::to_string(to));
  return resp;
}

Result<v1::ForgetRenamesReply> GrpcPeers::ForgetRenames(ServerId to,
                                                        const v1::ForgetRenamesRequest& req) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  AddCallCredentials(&ctx, cred_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_ / 4));
  v1::ForgetRenamesReply resp;
  clf::Status s = FromGrpc(stub->ForgetRenames(&ctx, req, &resp));
  if (!s.ok()) return s.WithContext("forget renames on server " + std::to_string(to));
  return resp;
}

Result<v1::ReplicasReply> GrpcPeers::Replicas(ServerId to, const v1::ReplicasRequest& req) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return NoSuchServer(to);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::ReplicasReply resp;
  clf::Status s = FromGrpc(stub->Replicas(&ctx, req, &resp));
  if (!s.ok()) return s.WithContext("replica state on server " + std::to_string(to));
  return resp;
}

void GrpcPeers::ReplicasChanged(ServerId to, Handle h, std::function<void(clf::Status)> cb) {
  v1::Peer::Stub* stub = Stub(to);
  if (stub == nullptr) return cb(NoSuchServer(to));
  struct Call {
    grpc::ClientContext ctx;
    v1::ReplicasChangedRequest req;
    v1::ReplicasChangedReply resp;
  };
  auto call = std::make_shared<Call>();
  call->req.set_handle(h);
  AddCallCredentials(&call->ctx, cred_);
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(timeout_ms_ / 4));
  stub->async()->ReplicasChanged(
      &call->ctx, &call->req, &call->resp,
      tsan::Handoff(call.get(), [call, cb = std::move(cb)](grpc::Status s) {
        auto fn = [&] {
          cb(FromGrpc(s));
          return clf::Status::Ok();
        };
        Guarded("replicas-changed completion", fn).IgnoreError();
      }));
}

Result<v1::AnnounceStoreReply> GrpcPeers::AnnounceStore(ServerId to, const v1::AnnounceStoreRequest& req) {
  if (to >= announce_stubs_.size()) return NoSuchServer(to);
  v1::Peer::Stub* stub = announce_stubs_[to].get();
  grpc::ClientContext ctx;
  AddCallCredentials(&ctx, cred_);
  ctx.set_wait_for_ready(true);  // a server not up yet: wait for it (within the deadline)
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(4 * timeout_ms_));
  {
    std::lock_guard<std::mutex> l(announce_mu_);
    if (announce_cancelled_) return clf::Status(Code::kCancelled, "stopping");
    announcing_.insert(&ctx);
  }
  v1::AnnounceStoreReply resp;
  clf::Status s = FromGrpc(stub->AnnounceStore(&ctx, req, &resp));
  {
    std::lock_guard<std::mutex> l(announce_mu_);
    announcing_.erase(&ctx);
  }
  if (!s.ok()) return s.WithContext("store announcement to server " + std::to_string(to));
  return resp;
}

void GrpcPeers::CancelAnnouncements() {
  std::lock_guard<std::mutex> l(announce_mu_);
  announce_cancelled_ = true;
  for (grpc::ClientContext* c : announcing_) c->TryCancel();
}

}  // namespace clf::server
