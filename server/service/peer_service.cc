// The Peer service: what one clfd asks of another (collectives, remote directories, links, attributes, rename intents).
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

grpc::ServerUnaryReactor* PeerService::Collective(grpc::CallbackServerContext* ctx,
                                                  const v1::CollectiveRequest* req,
                                                  v1::CollectiveReply* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c_, ctx, reactor, "Peer.Collective", Validate(*req, View(c_)))) return reactor;
  // Inline on the reactor: the local part is a few short syscalls per file
  // (open/unlink/stat/ftruncate of local objects) and forwarding is async, so
  // this never waits on another server; skipping the executor hop saves a
  // thread handoff per tree level.
  auto once = std::make_shared<FinishOnce>(reactor);
  GuardedAsync("Peer.Collective", once, [this, req, resp, once] {
    c_->ops->RunCollective(*req, [resp, once](v1::CollectiveReply rep) {
      *resp = std::move(rep);
      once->FinishOk();
    });
    return clf::Status::Ok();
  });
  return reactor;
}

grpc::ServerUnaryReactor* PeerService::MakeDir(grpc::CallbackServerContext* ctx,
                                               const v1::MakeDirRequest* req, v1::AttrOnly* resp) {
  return ServeInline(c_, ctx, "Peer.MakeDir", Validate(*req, View(c_)), [this, req, resp] {
    Result<v1::Attr> r = c_->ops->PeerMakeDir(*req);
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::RemoveDir(grpc::CallbackServerContext* ctx,
                                                 const v1::RemoveDirRequest* req, v1::AttrOnly*) {
  return Serve(c_, c_->peer, ctx, "Peer.RemoveDir", Validate(*req, View(c_)),
               [this, req] { return c_->ops->PeerRemoveDir(req->handle()); });
}

grpc::ServerUnaryReactor* PeerService::AdjustLink(grpc::CallbackServerContext* ctx,
                                                  const v1::AdjustLinkRequest* req,
                                                  v1::AdjustLinkReply* resp) {
  return Serve(c_, c_->peer, ctx, "Peer.AdjustLink", Validate(*req, View(c_)), [this, req, resp] {
    Result<v1::AdjustLinkReply> r = c_->ops->PeerAdjustLink(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::GetAttrs(grpc::CallbackServerContext* ctx,
                                                const v1::GetAttrsRequest* req,
                                                v1::GetAttrsReply* resp) {
  return ServeInline(c_, ctx, "Peer.GetAttrs", Validate(*req, View(c_)), [this, req, resp] {
    std::vector<Handle> hs(req->handles().begin(), req->handles().end());
    Result<std::vector<v1::Attr>> r = c_->ops->PeerGetAttrs(hs);
    if (r.ok()) {
      for (v1::Attr& a : *r) *resp->add_attrs() = std::move(a);
    }
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::InsertEntry(grpc::CallbackServerContext* ctx,
                                                   const v1::InsertEntryRequest* req,
                                                   v1::InsertEntryReply* resp) {
  // Held back by a lease of any session but the renaming client's own.
  return ServeGatedAs(c_, c_->peer, ctx, "Peer.InsertEntry", Validate(*req, View(c_)), req->session(), {req->parent()}, true, [this, req, resp] {
    Result<v1::InsertEntryReply> r = c_->ops->PeerInsertEntry(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::ResolveRename(grpc::CallbackServerContext* ctx,
                                                     const v1::ResolveRenameRequest* req,
                                                     v1::ResolveRenameReply* resp) {
  // Inline: takes no directory lock (only the intent's short lock) and must be
  // answered while InsertEntry calls wait on directory locks (opposite renames).
  return ServeInline(c_, ctx, "Peer.ResolveRename", Validate(*req, View(c_)), [this, req, resp] {
    Result<v1::ResolveRenameReply> r = c_->ops->PeerResolveRename(req->intent_id());
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::ForgetRenames(grpc::CallbackServerContext* ctx,
                                                     const v1::ForgetRenamesRequest* req,
                                                     v1::ForgetRenamesReply* resp) {
  return Serve(c_, c_->peer, ctx, "Peer.ForgetRenames", Validate(*req, View(c_)), [this, req, resp] {
    Result<uint32_t> r = c_->ops->PeerForgetRenames(req->settled_below());
    if (r.ok()) resp->set_pruned(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::Replicas(grpc::CallbackServerContext* ctx,
                                                const v1::ReplicasRequest* req,
                                                v1::ReplicasReply* resp) {
  // On the peer executor: a change waits for the holders to be told.
  return Serve(c_, c_->peer, ctx, "Peer.Replicas", Validate(*req, View(c_)), [this, req, resp] {
    if (c_->replica_state == nullptr) {
      return clf::Status(Code::kNotSupported, "this server keeps no replica state");
    }
    Result<v1::ReplicasReply> r = c_->replica_state->Serve(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::ReplicasChanged(grpc::CallbackServerContext* ctx,
                                                       const v1::ReplicasChangedRequest* req,
                                                       v1::ReplicasChangedReply*) {
  return ServeInline(c_, ctx, "Peer.ReplicasChanged", Validate(*req, View(c_)), [this, req] {
    if (c_->replication != nullptr) c_->replication->Changed(req->handle());
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* PeerService::AnnounceStore(grpc::CallbackServerContext* ctx,
                                                  const v1::AnnounceStoreRequest* req,
                                                  v1::AnnounceStoreReply* resp) {
  return Serve(c_, c_->peer, ctx, "Peer.AnnounceStore", Validate(*req, View(c_)), [this, req, resp] {
    if (c_->replica_state == nullptr) {
      return clf::Status(Code::kNotSupported, "this server keeps no replica state");
    }
    Result<uint64_t> r = c_->replica_state->AnnounceStore(req->server(), req->fresh());
    if (r.ok()) resp->set_marked(*r);
    return r.status();
  });
}

}  // namespace clf::server
