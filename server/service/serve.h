// The request boundary every service file shares (meta_service.cc,
// data_service.cc, peer_service.cc, admin_service.cc): counting, caller
// checks and validation (Begin, Admit), the exception boundary (Guarded,
// GuardedAsync), and the ways a handler runs: on an executor (Serve),
// inline on the reactor (ServeInline), or after the directory leases of
// other sessions are given back (ServeGated, AfterLeases). Internal to
// server/service/.
#pragma once

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/status_grpc.h"
#include "server/service/auth.h"
#include "server/service/services.h"
#include "server/service/validate.h"

namespace clf::server::service_detail {

// A client's own request (the Meta and Data services but the lease-event
// long poll): the purge throttle yields to these (MetaOps::NoteForeground).
inline bool IsForeground(std::string_view what) {
  return (what.starts_with("Meta.") && what != "Meta.LeaseEvents") || what.starts_with("Data.");
}

// Counts the call and checks that the caller may call `what` (auth.h); false
// after finishing the call as unauthenticated or permission denied.
inline bool Begin(ServiceContext* c, grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
           const char* what) {
  c->requests.fetch_add(1, std::memory_order_relaxed);
  if (c->ops != nullptr && IsForeground(what)) c->ops->NoteForeground();
  clf::Status st = CheckCaller(*ctx, c->auth, what);
  if (st.ok()) return true;
  reactor->Finish(ToGrpc(st));
  return false;
}

inline ClusterView View(const ServiceContext* c) { return ClusterView{c->ops->cluster().size(), c->id}; }

// Begin, then the request's validation (validate.h); false after finishing the
// call with the validation error.
inline bool Admit(ServiceContext* c, grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
           const char* what, const clf::Status& valid) {
  if (!Begin(c, ctx, reactor, what)) return false;
  if (valid.ok()) return true;
  reactor->Finish(ToGrpc(valid));
  return false;
}

// The exception boundary: nothing thrown below a handler unwinds into an
// executor thread or a gRPC reaction. Logged once here, answered kInternal.
inline clf::Status Escaped(const char* what, const char* detail) {
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
inline uint64_t SessionOf(grpc::CallbackServerContext* ctx) {
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
// ServeGatedAs: the same for `session` (a peer server's request made for a
// client's: Peer.InsertEntry of that client's rename).
template <typename Fn>
grpc::ServerUnaryReactor* ServeGatedAs(ServiceContext* c, Executor* ex,
                                       grpc::CallbackServerContext* ctx, const char* what,
                                       const clf::Status& valid, uint64_t session,
                                       std::vector<Handle> dirs, bool mutation, Fn fn) {
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
  leases->Admit(session, std::move(dirs), mutation,
                [reactor, what, ex, leases, done_dirs, fn = std::move(fn)]() mutable {
                  ex->Submit([reactor, what, leases, done_dirs, fn = std::move(fn)]() mutable {
                    clf::Status s = Guarded(what, fn);
                    if (!done_dirs.empty()) leases->Done(done_dirs);
                    reactor->Finish(ToGrpc(s));
                  });
                });
  return reactor;
}

template <typename Fn>
grpc::ServerUnaryReactor* ServeGated(ServiceContext* c, Executor* ex,
                                     grpc::CallbackServerContext* ctx, const char* what,
                                     const clf::Status& valid, std::vector<Handle> dirs,
                                     bool mutation, Fn fn) {
  return ServeGatedAs(c, ex, ctx, what, valid, SessionOf(ctx), std::move(dirs), mutation,
                      std::move(fn));
}

// Runs `body` once no other session's lease covers `dir` (read-only requests).
inline void AfterLeases(ServiceContext* c, grpc::CallbackServerContext* ctx, Handle dir,
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

inline void CopyAttrOut(Result<v1::Attr>& r, v1::Attr* out) {
  if (r.ok()) *out = std::move(*r);
}


}  // namespace clf::server::service_detail
