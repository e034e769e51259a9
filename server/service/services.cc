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

namespace clf::server {

namespace {

// A client's own request (the Meta and Data services but the lease-event
// long poll): the purge throttle yields to these (MetaOps::NoteForeground).
bool IsForeground(std::string_view what) {
  return (what.starts_with("Meta.") && what != "Meta.LeaseEvents") || what.starts_with("Data.");
}

// Counts the call and checks that the caller may call `what` (auth.h); false
// after finishing the call as unauthenticated or permission denied.
bool Begin(ServiceContext* c, grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
           const char* what) {
  c->requests.fetch_add(1, std::memory_order_relaxed);
  if (c->ops != nullptr && IsForeground(what)) c->ops->NoteForeground();
  clf::Status st = CheckCaller(*ctx, c->auth, what);
  if (st.ok()) return true;
  reactor->Finish(ToGrpc(st));
  return false;
}

ClusterView View(const ServiceContext* c) { return ClusterView{c->ops->cluster().size(), c->id}; }

// Begin, then the request's validation (validate.h); false after finishing the
// call with the validation error.
bool Admit(ServiceContext* c, grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
           const char* what, const clf::Status& valid) {
  if (!Begin(c, ctx, reactor, what)) return false;
  if (valid.ok()) return true;
  reactor->Finish(ToGrpc(valid));
  return false;
}

// The exception boundary: nothing thrown below a handler unwinds into an
// executor thread or a gRPC reaction. Logged once here, answered kInternal.
clf::Status Escaped(const char* what, const char* detail) {
  CLF_LOG_ERROR("{}: exception escaped the handler: {}", what, detail);
  return Internal(std::string(what) + ": internal error");
}

template <typename Fn>
clf::Status Guarded(const char* what, Fn& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Escaped(what, e.what());
  } catch (...) {
    return Escaped(what, "unknown exception");
  }
}

// Runs `fn` (returning clf::Status) on `ex` and finishes the call with its status.
template <typename Fn>
grpc::ServerUnaryReactor* Serve(ServiceContext* c, Executor* ex, grpc::CallbackServerContext* ctx,
                                const char* what, const clf::Status& valid, Fn fn) {
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c, ctx, reactor, what, valid)) return reactor;
  ex->Submit([reactor, what, fn = std::move(fn)]() mutable {
    reactor->Finish(ToGrpc(Guarded(what, fn)));
  });
  return reactor;
}

// Runs `fn` (returning clf::Status) right here on the reactor: only for calls
// that take no lock and only read or write local RocksDB keys (microseconds;
// a thread hop costs more than the work). Anything that takes a directory or
// inode lock goes to an executor: such a lock may be held across a collective
// whose completion needs the reactor threads.
template <typename Fn>
grpc::ServerUnaryReactor* ServeInline(ServiceContext* c, grpc::CallbackServerContext* ctx,
                                      const char* what, const clf::Status& valid, Fn fn) {
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c, ctx, reactor, what, valid)) return reactor;
  reactor->Finish(ToGrpc(Guarded(what, fn)));
  return reactor;
}

// The caller's session (directory leases), 0 when it names none.
uint64_t SessionOf(grpc::CallbackServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(kSessionHeader);
  if (it == md.end()) return 0;
  uint64_t v = 0;
  std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return v;
}

// Serve for requests naming directories of this server: a request of another
// session than the one holding a lease on one of `dirs` waits (parked, no
// thread) until the holder committed and gave it back (DirLeases). mutation:
// the request changes the directories (no lease is granted meanwhile).
template <typename Fn>
grpc::ServerUnaryReactor* ServeGated(ServiceContext* c, Executor* ex,
                                     grpc::CallbackServerContext* ctx, const char* what,
                                     const clf::Status& valid, std::vector<Handle> dirs,
                                     bool mutation, Fn fn) {
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c, ctx, reactor, what, valid)) return reactor;
  if (c->leases == nullptr) {
    ex->Submit([reactor, what, fn = std::move(fn)]() mutable {
      reactor->Finish(ToGrpc(Guarded(what, fn)));
    });
    return reactor;
  }
  DirLeases* leases = c->leases;
  std::vector<Handle> done_dirs = mutation ? dirs : std::vector<Handle>{};
  leases->Admit(SessionOf(ctx), std::move(dirs), mutation,
                [reactor, what, ex, leases, done_dirs, fn = std::move(fn)]() mutable {
                  ex->Submit([reactor, what, leases, done_dirs, fn = std::move(fn)]() mutable {
                    clf::Status s = Guarded(what, fn);
                    if (!done_dirs.empty()) leases->Done(done_dirs);
                    reactor->Finish(ToGrpc(s));
                  });
                });
  return reactor;
}

// Runs `body` once no other session's lease covers `dir` (read-only requests).
void AfterLeases(ServiceContext* c, grpc::CallbackServerContext* ctx, Handle dir,
                 std::function<void()> body) {
  if (c->leases == nullptr) return body();
  c->leases->Admit(SessionOf(ctx), {dir}, false, std::move(body));
}

// For the handlers that finish asynchronously (Lookup, GetAttr, Collective):
// finishes the call at most once, so the exception boundary can answer when
// the handler threw before handing the call on.
class FinishOnce {
 public:
  explicit FinishOnce(grpc::ServerUnaryReactor* r) : reactor_(r) {}
  void Finish(const clf::Status& s) {
    if (!done_.exchange(true)) reactor_->Finish(ToGrpc(s));
  }
  void FinishOk() {
    if (!done_.exchange(true)) reactor_->Finish(grpc::Status::OK);
  }

 private:
  grpc::ServerUnaryReactor* reactor_;
  std::atomic<bool> done_{false};
};

template <typename Fn>
void GuardedAsync(const char* what, const std::shared_ptr<FinishOnce>& once, Fn fn) noexcept {
  clf::Status s = Guarded(what, fn);
  if (!s.ok()) once->Finish(s);
}

// root_squash (cluster file): a client's root (uid 0, and gid 0) is nobody
// (65534) on the servers. Applied to client-facing requests before validation;
// the result stays valid for the whole call (the lambdas capture it).
template <typename Req>
std::shared_ptr<const Req> Squash(const ServiceContext* c, const Req* in) {
  constexpr uint32_t kNobody = 65534;
  const v1::Caller& c0 = in->caller();
  const bool has_root = c0.uid() == 0 || c0.gid() == 0 ||
                        std::find(c0.groups().begin(), c0.groups().end(), 0u) != c0.groups().end();
  if (!c->ops->cluster().root_squash || !has_root) {
    return std::shared_ptr<const Req>(std::shared_ptr<const Req>(), in);  // not owned
  }
  auto q = std::make_shared<Req>(*in);
  v1::Caller* caller = q->mutable_caller();
  if (caller->uid() == 0) caller->set_uid(kNobody);
  if (caller->gid() == 0) caller->set_gid(kNobody);
  for (int i = 0; i < caller->groups_size(); ++i) {
    if (caller->groups(i) == 0) caller->set_groups(i, kNobody);
  }
  return q;
}

void CopyAttrOut(Result<v1::Attr>& r, v1::Attr* out) {
  if (r.ok()) *out = std::move(*r);
}

}  // namespace

// ---------------------------------------------------------------- Meta

grpc::ServerUnaryReactor* MetaService::Lookup(grpc::CallbackServerContext* ctx,
                                              const v1::LookupRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c_, ctx, reactor, "Meta.Lookup", Validate(*req, View(c_)))) return reactor;
  auto once = std::make_shared<FinishOnce>(reactor);
  AfterLeases(c_, ctx, req->parent(), [this, req, resp, once] {
  GuardedAsync("Meta.Lookup", once, [this, req, resp, once] {
    // Inline: RocksDB reads, then the stat collective asynchronously. Only an
    // entry whose metadata lives on another server takes the executor.
    Result<bool> local = c_->ops->LookupLocal(*req, resp->mutable_attr());
    if (!local.ok()) {
      once->Finish(local.status());
    } else if (!*local) {
      c_->io->Submit([this, req, resp, once] {
        auto fn = [this, req, resp] {
          Result<v1::Attr> r = c_->ops->Lookup(*req);
          CopyAttrOut(r, resp->mutable_attr());
          return r.status();
        };
        once->Finish(Guarded("Meta.Lookup", fn));
      });
    } else {
      c_->ops->FillSizesAsync({resp->mutable_attr()}, [once](clf::Status s) { once->Finish(s); });
    }
    return clf::Status::Ok();
  });
  });
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::GetAttr(grpc::CallbackServerContext* ctx,
                                               const v1::GetAttrRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c_, ctx, reactor, "Meta.GetAttr", Validate(*req, View(c_)))) return reactor;
  auto once = std::make_shared<FinishOnce>(reactor);
  AfterLeases(c_, ctx, req->handle(), [this, req, resp, once] {
  GuardedAsync("Meta.GetAttr", once, [this, req, resp, once] {
    Result<v1::Attr> a = c_->ops->GetAttrLocal(req->handle());
    if (!a.ok()) {
      once->Finish(a.status());
      return clf::Status::Ok();
    }
    *resp->mutable_attr() = std::move(*a);
    c_->ops->FillSizesAsync({resp->mutable_attr()}, [once](clf::Status s) { once->Finish(s); });
    return clf::Status::Ok();
  });
  });
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::SetAttr(grpc::CallbackServerContext* ctx,
                                               const v1::SetAttrRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.SetAttr", Validate(*req, View(c_)), {req->handle()}, true, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->SetAttr(*req);
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Create(grpc::CallbackServerContext* ctx,
                                              const v1::CreateRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.Create", Validate(*req, View(c_)), {req->parent()}, true, [this, req, resp] {
    bool existed = false;
    Result<v1::Attr> r = c_->ops->Create(*req, resp->mutable_parent(), &existed);
    CopyAttrOut(r, resp->mutable_attr());
    resp->set_existed(existed);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Link(grpc::CallbackServerContext* ctx,
                                            const v1::LinkRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.Link", Validate(*req, View(c_)), {req->new_parent()}, true, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->Link(*req, resp->mutable_parent());
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Remove(grpc::CallbackServerContext* ctx,
                                              const v1::RemoveRequest* in, v1::RemoveReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.Remove", Validate(*req, View(c_)), {req->parent()}, true, [this, req, resp] {
    Result<v1::RemoveReply> r = c_->ops->Remove(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Rename(grpc::CallbackServerContext* ctx,
                                              const v1::RenameRequest* in, v1::RenameReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.Rename", Validate(*req, View(c_)), {req->src_parent(), req->dst_parent()}, true, [this, req, resp] {
    Result<v1::RenameReply> r = c_->ops->Rename(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::ReadDir(grpc::CallbackServerContext* ctx,
                                               const v1::ReadDirRequest* in,
                                               v1::ReadDirReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.ReadDir", Validate(*req, View(c_)), {req->handle()}, false, [this, req, resp] {
    Result<v1::ReadDirReply> r = c_->ops->ReadDir(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Readlink(grpc::CallbackServerContext* ctx,
                                                const v1::GetAttrRequest* in,
                                                v1::ReadlinkReply* resp) {
  const auto req = Squash(c_, in);
  return ServeInline(c_, ctx, "Meta.Readlink", Validate(*req, View(c_)), [this, req, resp] {
    Result<std::string> r = c_->ops->Readlink(req->handle());
    if (r.ok()) resp->set_target(std::move(*r));
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::GetXattr(grpc::CallbackServerContext* ctx,
                                                const v1::XattrRequest* in, v1::XattrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeInline(c_, ctx, "Meta.GetXattr", Validate(*req, XattrCall::kGet, View(c_)),
                     [this, req, resp] {
                       Result<std::string> r = c_->ops->GetXattr(*req);
                       if (r.ok()) resp->set_value(std::move(*r));
                       return r.status();
                     });
}

grpc::ServerUnaryReactor* MetaService::SetXattr(grpc::CallbackServerContext* ctx,
                                                const v1::XattrRequest* in, v1::XattrReply*) {
  const auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Meta.SetXattr", Validate(*req, XattrCall::kSet, View(c_)),
               [this, req] { return c_->ops->SetXattr(*req); });
}

grpc::ServerUnaryReactor* MetaService::ListXattr(grpc::CallbackServerContext* ctx,
                                                 const v1::XattrRequest* in, v1::XattrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeInline(c_, ctx, "Meta.ListXattr", Validate(*req, XattrCall::kList, View(c_)),
                     [this, req, resp] {
                       Result<std::vector<std::string>> r = c_->ops->ListXattr(*req);
                       if (r.ok()) {
                         for (std::string& n : *r) resp->add_names(std::move(n));
                       }
                       return r.status();
                     });
}

grpc::ServerUnaryReactor* MetaService::RemoveXattr(grpc::CallbackServerContext* ctx,
                                                   const v1::XattrRequest* in, v1::XattrReply*) {
  const auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Meta.RemoveXattr", Validate(*req, XattrCall::kRemove, View(c_)),
               [this, req] { return c_->ops->RemoveXattr(*req); });
}

grpc::ServerUnaryReactor* MetaService::Destroy(grpc::CallbackServerContext* ctx,
                                               const v1::DestroyRequest* req, v1::DestroyReply*) {
  return Serve(c_, c_->io, ctx, "Meta.Destroy", Validate(*req, View(c_)),
               [this, req] { return c_->ops->Destroy(req->handle()); });
}

grpc::ServerUnaryReactor* MetaService::ReportWrite(grpc::CallbackServerContext* ctx,
                                                   const v1::ReportWriteRequest* in,
                                                   v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Meta.ReportWrite", Validate(*req, View(c_)), [this, req, resp] {
    Result<v1::Attr> r = c_->ops->ReportWrite(*req);
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::DirLease(grpc::CallbackServerContext* ctx,
                                                const v1::DirLeaseRequest* req,
                                                v1::DirLeaseReply* resp) {
  const uint64_t session = SessionOf(ctx);
  return Serve(c_, c_->io, ctx, "Meta.DirLease", Validate(*req, View(c_)), [this, req, resp, session] {
    DirLeases* leases = c_->leases;
    if (leases == nullptr) {
      resp->set_refused("directory leases are off (dir_lease_ms = 0)");
      return clf::Status::Ok();
    }
    if (req->op() == v1::DirLeaseRequest::RELEASE) {
      leases->Release(session, req->dir());
      return clf::Status::Ok();
    }
    if (req->op() == v1::DirLeaseRequest::END_SESSION) {
      leases->EndSession(session);
      return clf::Status::Ok();
    }
    if (session == 0) {
      resp->set_refused("no session");
      return clf::Status::Ok();
    }
    // Squashed callers and per-file collectives change what a create does on
    // the server: the client could not answer for it.
    if (c_->ops->cluster().root_squash) {
      resp->set_refused("root_squash is on");
      return clf::Status::Ok();
    }
    if (c_->ops->cluster().metadata_mode != MetadataMode::kOneHop) {
      resp->set_refused("metadata_mode is not onehop");
      return clf::Status::Ok();
    }
    if (!leases->Acquire(session, req->dir())) {
      resp->set_refused("another client holds or is changing the directory");
      return clf::Status::Ok();
    }
    Result<v1::DirLeaseReply> r = c_->ops->LeaseListing(req->dir(), req->caller(), kMaxLeaseEntries,
                                                                 req->with_attrs());
    if (!r.ok()) {
      leases->Release(session, req->dir());
      if (r.status().code() == Code::kNoSpace || r.status().code() == Code::kPermission) {
        resp->set_refused(r.status().message());
        return clf::Status::Ok();
      }
      return r.status();
    }
    *resp = std::move(*r);
    resp->set_granted(true);
    resp->set_lease_ms(leases->lease_ms());
    if (req->handles_wanted() > 0) {
      resp->set_handle_first(c_->ops->ReserveHandles(req->handles_wanted()));
      resp->set_handle_count(req->handles_wanted());
    }
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* MetaService::LeaseEvents(grpc::CallbackServerContext* ctx,
                                                   const v1::LeaseEventsRequest* req,
                                                   v1::LeaseEventsReply* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Begin(c_, ctx, reactor, "Meta.LeaseEvents")) return reactor;
  const uint64_t session = SessionOf(ctx);
  if (session == 0 || c_->leases == nullptr) {
    reactor->Finish(ToGrpc(Invalid("lease events: no session, or leases are off")));
    return reactor;
  }
  const uint32_t wait_ms = std::min<uint32_t>(req->wait_ms(), 60000);
  c_->leases->WaitEvents(session, wait_ms, [reactor, resp](std::vector<Handle> recalled) {
    for (Handle h : recalled) resp->add_recall(h);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::Commit(grpc::CallbackServerContext* ctx,
                                              const v1::CommitRequest* req, v1::CommitReply* resp) {
  const uint64_t session = SessionOf(ctx);
  return Serve(c_, c_->io, ctx, "Meta.Commit", Validate(*req, View(c_)), [this, req, resp, session] {
    return RunCommit(c_->ops, c_->leases, session, *req, resp);
  });
}

// ---------------------------------------------------------------- Data

grpc::ServerUnaryReactor* DataService::Write(grpc::CallbackServerContext* ctx,
                                             const v1::WriteRequest* req, v1::WriteReply* resp) {
  return Serve(c_, c_->io, ctx, "Data.Write", Validate(*req, View(c_)), [this, req, resp] {
    if (c_->data_bytes != nullptr) c_->data_bytes->AddIn(DataBytes::kGrpc, req->payload().size());
    clf::Status s = c_->data->Write(*req);
    if (s.ok()) resp->set_written(req->payload().size());
    return s;
  });
}

grpc::ServerUnaryReactor* DataService::Read(grpc::CallbackServerContext* ctx,
                                            const v1::ReadRequest* req, v1::ReadReply* resp) {
  return Serve(c_, c_->io, ctx, "Data.Read", Validate(*req, View(c_)), [this, req, resp] {
    Result<std::string> r = c_->data->Read(*req);
    if (r.ok()) {
      if (c_->data_bytes != nullptr) c_->data_bytes->AddOut(DataBytes::kGrpc, r->size());
      resp->set_payload(std::move(*r));
    }
    return r.status();
  });
}

grpc::ServerUnaryReactor* DataService::Sync(grpc::CallbackServerContext* ctx,
                                            const v1::SyncRequest* req, v1::SyncReply*) {
  return Serve(c_, c_->io, ctx, "Data.Sync", Validate(*req, View(c_)),
               [this, req] { return c_->data->Sync(req->handle()); });
}

// ---------------------------------------------------------------- Peer

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
  return ServeGated(c_, c_->peer, ctx, "Peer.InsertEntry", Validate(*req, View(c_)), {req->parent()}, true, [this, req, resp] {
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

// ---------------------------------------------------------------- Admin

grpc::ServerUnaryReactor* AdminService::Status(grpc::CallbackServerContext* ctx,
                                               const v1::StatusRequest* req,
                                               v1::StatusReply* resp) {
  return Serve(c_, c_->peer, ctx, "Admin.Status", Validate(*req, View(c_)), [this, resp] {
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
    resp->set_version(kVersion);
    resp->set_garbage(c_->store->Garbage().size());
    resp->set_wall_time_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
    if (c_->locks != nullptr) {
      LockOps::Counts lc = c_->locks->counts();
      resp->set_lock_sessions(lc.sessions);
      resp->set_locks_granted(lc.granted);
      resp->set_locks_waiting(lc.waiting);
    }
    resp->set_transport(c_->transport);
    resp->set_data_address(c_->data_address);
    resp->set_rename_intents(c_->ops->rename_intent_count());
    resp->set_rename_outcomes(c_->ops->rename_outcome_count());
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* AdminService::ListObjects(grpc::CallbackServerContext* ctx,
                                                    const v1::ListObjectsRequest* req,
                                                    v1::ListObjectsReply* resp) {
  return Serve(c_, c_->peer, ctx, "Admin.ListObjects", Validate(*req, View(c_)), [this, resp] {
    for (Handle h : c_->objects->List()) resp->add_data_objects(h);
    for (Handle h : c_->store->AllAttrHandles()) resp->add_meta_objects(h);
    for (Handle h : c_->store->Orphans()) resp->add_orphans(h);
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* AdminService::RemoveObject(grpc::CallbackServerContext* ctx,
                                                     const v1::RemoveObjectRequest* req,
                                                     v1::RemoveObjectReply*) {
  return Serve(c_, c_->peer, ctx, "Admin.RemoveObject", Validate(*req, View(c_)),
               [this, req] { return c_->objects->Remove(req->handle()); });
}

// ---------------------------------------------------------------- GrpcPeers

GrpcPeers::GrpcPeers(const ClusterConfig& cluster, Credentials cred)
    : cred_(std::move(cred)), timeout_ms_(cluster.rpc_timeout_ms) {
  std::shared_ptr<grpc::ChannelCredentials> creds = ChannelCredentialsFor(cred_);
  for (const ServerConfig& s : cluster.servers) {
    auto ch = grpc::CreateCustomChannel(s.address, creds, ClfChannelArgs());
    stubs_.push_back(v1::Peer::NewStub(ch));
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

}  // namespace clf::server
