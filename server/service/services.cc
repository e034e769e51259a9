#include "server/service/services.h"

#include <sys/statvfs.h>

#include <future>

#include "common/status_grpc.h"

namespace clf::server {

bool Authorized(grpc::CallbackServerContext* ctx, const std::string& secret) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(kSecretHeader);
  if (it == md.end()) return false;
  return std::string_view(it->second.data(), it->second.size()) == secret;
}

namespace {

// Checks the secret, then runs `fn` (returning clf::Status) on `ex` and finishes
// the call with its status.
// Counts the call and checks the secret; false after finishing the call as
// unauthenticated.
bool Begin(ServiceContext* c, grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor) {
  c->requests.fetch_add(1, std::memory_order_relaxed);
  if (Authorized(ctx, c->secret)) return true;
  reactor->Finish(ToGrpc(clf::Status(Code::kUnauthenticated, "wrong or missing cluster secret")));
  return false;
}

template <typename Fn>
grpc::ServerUnaryReactor* Serve(ServiceContext* c, Executor* ex, grpc::CallbackServerContext* ctx,
                                Fn fn) {
  auto* reactor = ctx->DefaultReactor();
  if (!Begin(c, ctx, reactor)) return reactor;
  ex->Submit([reactor, fn = std::move(fn)]() mutable { reactor->Finish(ToGrpc(fn())); });
  return reactor;
}

// Runs `fn` (returning clf::Status) right here on the reactor: only for calls
// that take no lock and only read or write local RocksDB keys (microseconds;
// a thread hop costs more than the work). Anything that takes a directory or
// inode lock goes to an executor: such a lock may be held across a collective
// whose completion needs the reactor threads.
template <typename Fn>
grpc::ServerUnaryReactor* ServeInline(ServiceContext* c, grpc::CallbackServerContext* ctx, Fn fn) {
  auto* reactor = ctx->DefaultReactor();
  if (!Begin(c, ctx, reactor)) return reactor;
  reactor->Finish(ToGrpc(fn()));
  return reactor;
}

void CopyAttrOut(Result<v1::Attr>& r, v1::Attr* out) {
  if (r.ok()) *out = std::move(*r);
}

}  // namespace

// ---------------------------------------------------------------- Meta

grpc::ServerUnaryReactor* MetaService::Lookup(grpc::CallbackServerContext* ctx,
                                              const v1::LookupRequest* req, v1::AttrReply* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Begin(c_, ctx, reactor)) return reactor;
  // Inline: RocksDB reads, then the stat collective asynchronously. Only an
  // entry whose metadata lives on another server takes the executor.
  Result<bool> local = c_->ops->LookupLocal(*req, resp->mutable_attr());
  if (!local.ok()) {
    reactor->Finish(ToGrpc(local.status()));
  } else if (!*local) {
    c_->io->Submit([this, req, resp, reactor] {
      Result<v1::Attr> r = c_->ops->Lookup(*req);
      CopyAttrOut(r, resp->mutable_attr());
      reactor->Finish(ToGrpc(r.status()));
    });
  } else {
    c_->ops->FillSizesAsync({resp->mutable_attr()},
                            [reactor](clf::Status s) { reactor->Finish(ToGrpc(s)); });
  }
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::GetAttr(grpc::CallbackServerContext* ctx,
                                               const v1::GetAttrRequest* req, v1::AttrReply* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Begin(c_, ctx, reactor)) return reactor;
  Result<v1::Attr> a = c_->ops->GetAttrLocal(req->handle());
  if (!a.ok()) {
    reactor->Finish(ToGrpc(a.status()));
    return reactor;
  }
  *resp->mutable_attr() = std::move(*a);
  c_->ops->FillSizesAsync({resp->mutable_attr()},
                          [reactor](clf::Status s) { reactor->Finish(ToGrpc(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::SetAttr(grpc::CallbackServerContext* ctx,
                                               const v1::SetAttrRequest* req, v1::AttrReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->SetAttr(*req);
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Create(grpc::CallbackServerContext* ctx,
                                              const v1::CreateRequest* req, v1::AttrReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->Create(*req, resp->mutable_parent());
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Link(grpc::CallbackServerContext* ctx,
                                            const v1::LinkRequest* req, v1::AttrReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->Link(*req, resp->mutable_parent());
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Remove(grpc::CallbackServerContext* ctx,
                                              const v1::RemoveRequest* req, v1::RemoveReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    Result<v1::RemoveReply> r = c_->ops->Remove(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Rename(grpc::CallbackServerContext* ctx,
                                              const v1::RenameRequest* req, v1::RenameReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    Result<v1::RenameReply> r = c_->ops->Rename(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::ReadDir(grpc::CallbackServerContext* ctx,
                                               const v1::ReadDirRequest* req, v1::ReadDirReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    Result<v1::ReadDirReply> r = c_->ops->ReadDir(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Readlink(grpc::CallbackServerContext* ctx,
                                                const v1::GetAttrRequest* req, v1::ReadlinkReply* resp) {
  return ServeInline(c_, ctx, [this, req, resp] {
    Result<std::string> r = c_->ops->Readlink(req->handle());
    if (r.ok()) resp->set_target(std::move(*r));
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::GetXattr(grpc::CallbackServerContext* ctx,
                                                const v1::XattrRequest* req, v1::XattrReply* resp) {
  return ServeInline(c_, ctx, [this, req, resp] {
    Result<std::string> r = c_->ops->GetXattr(*req);
    if (r.ok()) resp->set_value(std::move(*r));
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::SetXattr(grpc::CallbackServerContext* ctx,
                                                const v1::XattrRequest* req, v1::XattrReply*) {
  return Serve(c_, c_->io, ctx, [this, req] { return c_->ops->SetXattr(*req); });
}

grpc::ServerUnaryReactor* MetaService::ListXattr(grpc::CallbackServerContext* ctx,
                                                 const v1::XattrRequest* req, v1::XattrReply* resp) {
  return ServeInline(c_, ctx, [this, req, resp] {
    Result<std::vector<std::string>> r = c_->ops->ListXattr(*req);
    if (r.ok()) {
      for (std::string& n : *r) resp->add_names(std::move(n));
    }
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::RemoveXattr(grpc::CallbackServerContext* ctx,
                                                   const v1::XattrRequest* req, v1::XattrReply*) {
  return Serve(c_, c_->io, ctx, [this, req] { return c_->ops->RemoveXattr(*req); });
}

grpc::ServerUnaryReactor* MetaService::Destroy(grpc::CallbackServerContext* ctx,
                                               const v1::DestroyRequest* req, v1::DestroyReply*) {
  return Serve(c_, c_->io, ctx, [this, req] { return c_->ops->Destroy(req->handle()); });
}

// ---------------------------------------------------------------- Data

grpc::ServerUnaryReactor* DataService::Write(grpc::CallbackServerContext* ctx,
                                             const v1::WriteRequest* req, v1::WriteReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    clf::Status s = c_->data->Write(*req);
    if (s.ok()) resp->set_written(req->payload().size());
    return s;
  });
}

grpc::ServerUnaryReactor* DataService::Read(grpc::CallbackServerContext* ctx,
                                            const v1::ReadRequest* req, v1::ReadReply* resp) {
  return Serve(c_, c_->io, ctx, [this, req, resp] {
    Result<std::string> r = c_->data->Read(*req);
    if (r.ok()) resp->set_payload(std::move(*r));
    return r.status();
  });
}

grpc::ServerUnaryReactor* DataService::Sync(grpc::CallbackServerContext* ctx,
                                            const v1::SyncRequest* req, v1::SyncReply*) {
  return Serve(c_, c_->io, ctx, [this, req] { return c_->data->Sync(req->handle()); });
}

// ---------------------------------------------------------------- Peer

grpc::ServerUnaryReactor* PeerService::Collective(grpc::CallbackServerContext* ctx,
                                                  const v1::CollectiveRequest* req,
                                                  v1::CollectiveReply* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Begin(c_, ctx, reactor)) return reactor;
  if (req->targets_size() == 0 || req->targets(0) != c_->id ||
      req->server_count() != c_->ops->cluster().size()) {
    reactor->Finish(ToGrpc(Invalid("collective sent to the wrong server or cluster")));
    return reactor;
  }
  // Inline on the reactor: the local part is a few short syscalls per file
  // (open/unlink/stat/ftruncate of local objects) and forwarding is async, so
  // this never waits on another server; skipping the executor hop saves a
  // thread handoff per tree level.
  c_->ops->RunCollective(*req, [resp, reactor](v1::CollectiveReply rep) {
    *resp = std::move(rep);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* PeerService::MakeDir(grpc::CallbackServerContext* ctx,
                                               const v1::MakeDirRequest* req, v1::AttrOnly* resp) {
  return ServeInline(c_, ctx, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->PeerMakeDir(*req);
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::RemoveDir(grpc::CallbackServerContext* ctx,
                                                 const v1::RemoveDirRequest* req, v1::AttrOnly*) {
  return Serve(c_, c_->peer, ctx, [this, req] { return c_->ops->PeerRemoveDir(req->handle()); });
}

grpc::ServerUnaryReactor* PeerService::AdjustLink(grpc::CallbackServerContext* ctx,
                                                  const v1::AdjustLinkRequest* req,
                                                  v1::AdjustLinkReply* resp) {
  return Serve(c_, c_->peer, ctx, [this, req, resp] {
    Result<v1::AdjustLinkReply> r = c_->ops->PeerAdjustLink(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* PeerService::GetAttrs(grpc::CallbackServerContext* ctx,
                                                const v1::GetAttrsRequest* req,
                                                v1::GetAttrsReply* resp) {
  return ServeInline(c_, ctx, [this, req, resp] {
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
  return Serve(c_, c_->peer, ctx, [this, req, resp] {
    Result<v1::InsertEntryReply> r = c_->ops->PeerInsertEntry(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

// ---------------------------------------------------------------- Admin

grpc::ServerUnaryReactor* AdminService::Status(grpc::CallbackServerContext* ctx,
                                               const v1::StatusRequest*, v1::StatusReply* resp) {
  return Serve(c_, c_->peer, ctx, [this, resp] {
    resp->set_id(c_->id);
    resp->set_address(c_->address);
    resp->set_uptime_s(std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - c_->started)
                           .count());
    resp->set_objects(c_->objects->Count());
    resp->set_bytes_used(c_->objects->BytesUsed());
    struct statvfs sv;
    if (::statvfs(c_->objects->dir().c_str(), &sv) == 0) {
      resp->set_bytes_free(static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize);
      resp->set_bytes_total(static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize);
      resp->set_files_free(sv.f_favail);
    }
    resp->set_rocksdb_bytes(c_->store->ApproximateBytes());
    resp->set_requests(c_->requests.load());
    resp->set_inodes(c_->ops->inode_count());
    resp->set_version("0.1.0");
    resp->set_transport(c_->transport);
    resp->set_data_address(c_->data_address);
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* AdminService::ListObjects(grpc::CallbackServerContext* ctx,
                                                    const v1::ListObjectsRequest*,
                                                    v1::ListObjectsReply* resp) {
  return Serve(c_, c_->peer, ctx, [this, resp] {
    for (Handle h : c_->objects->List()) resp->add_data_objects(h);
    for (Handle h : c_->store->AllAttrHandles()) resp->add_meta_objects(h);
    for (Handle h : c_->store->Orphans()) resp->add_orphans(h);
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* AdminService::RemoveObject(grpc::CallbackServerContext* ctx,
                                                     const v1::RemoveObjectRequest* req,
                                                     v1::RemoveObjectReply*) {
  return Serve(c_, c_->peer, ctx, [this, req] { return c_->objects->Remove(req->handle()); });
}

// ---------------------------------------------------------------- GrpcPeers

GrpcPeers::GrpcPeers(const ClusterConfig& cluster, std::string secret)
    : secret_(std::move(secret)), timeout_ms_(cluster.rpc_timeout_ms) {
  for (const ServerConfig& s : cluster.servers) {
    auto ch = grpc::CreateCustomChannel(s.address, grpc::InsecureChannelCredentials(), ClfChannelArgs());
    stubs_.push_back(v1::Peer::NewStub(ch));
  }
}

void GrpcPeers::Prepare(grpc::ClientContext* ctx) const {
  ctx->AddMetadata(kSecretHeader, secret_);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_));
}

void GrpcPeers::Collective(ServerId to, const v1::CollectiveRequest& req,
                           std::function<void(clf::Status, v1::CollectiveReply)> cb) {
  struct Call {
    grpc::ClientContext ctx;
    v1::CollectiveRequest req;
    v1::CollectiveReply resp;
  };
  auto call = std::make_shared<Call>();
  call->req = req;
  Prepare(&call->ctx);
  if (req.deadline_ms() > 0) {
    auto dl = std::chrono::system_clock::time_point(std::chrono::milliseconds(req.deadline_ms()));
    if (dl < call->ctx.deadline()) call->ctx.set_deadline(dl);
  }
  stubs_.at(to)->async()->Collective(&call->ctx, &call->req, &call->resp,
                                     [call, cb = std::move(cb)](grpc::Status s) {
                                       cb(FromGrpc(s), std::move(call->resp));
                                     });
}

Result<v1::Attr> GrpcPeers::MakeDir(ServerId to, const v1::MakeDirRequest& req) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::AttrOnly resp;
  clf::Status s = FromGrpc(stubs_.at(to)->MakeDir(&ctx, req, &resp));
  if (!s.ok()) return s.WithContext("make directory on server " + std::to_string(to));
  return resp.attr();
}

clf::Status GrpcPeers::RemoveDir(ServerId to, Handle h) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::RemoveDirRequest req;
  req.set_handle(h);
  v1::AttrOnly resp;
  return FromGrpc(stubs_.at(to)->RemoveDir(&ctx, req, &resp));
}

Result<v1::AdjustLinkReply> GrpcPeers::AdjustLink(ServerId to, const v1::AdjustLinkRequest& req) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::AdjustLinkReply resp;
  clf::Status s = FromGrpc(stubs_.at(to)->AdjustLink(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

Result<std::vector<v1::Attr>> GrpcPeers::GetAttrs(ServerId to, const std::vector<Handle>& hs) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::GetAttrsRequest req;
  for (Handle h : hs) req.add_handles(h);
  v1::GetAttrsReply resp;
  clf::Status s = FromGrpc(stubs_.at(to)->GetAttrs(&ctx, req, &resp));
  if (!s.ok()) return s;
  return std::vector<v1::Attr>(resp.attrs().begin(), resp.attrs().end());
}

Result<v1::InsertEntryReply> GrpcPeers::InsertEntry(ServerId to, const v1::InsertEntryRequest& req) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::InsertEntryReply resp;
  clf::Status s = FromGrpc(stubs_.at(to)->InsertEntry(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

}  // namespace clf::server
