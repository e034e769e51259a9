#include "server/service/lock_service.h"

#include <mutex>

#include "common/log.h"
#include "common/status_grpc.h"

namespace clf::server {
namespace {

// Counts the call, checks the caller (auth.h), runs `fn` (returning clf::Status) on the
// reactor thread and finishes the call. No exception leaves a handler.
template <typename Fn>
grpc::ServerUnaryReactor* Inline(ServiceContext* c, grpc::CallbackServerContext* ctx, Fn fn) {
  auto* reactor = ctx->DefaultReactor();
  c->requests.fetch_add(1, std::memory_order_relaxed);
  if (Status auth = CheckCaller(*ctx, c->auth, "Lock"); !auth.ok()) {
    reactor->Finish(ToGrpc(auth));
    return reactor;
  }
  Status s;
  try {
    s = fn();
  } catch (const std::exception& e) {
    CLF_LOG_ERROR("lock service: {}", e.what());
    s = Internal(std::string("lock service: ") + e.what());
  }
  reactor->Finish(ToGrpc(s));
  return reactor;
}

// A call that may wait for a lock. LockOps completes it exactly once (Finish);
// OnCancel (client gone, deadline) withdraws the waiting request. gRPC calls
// OnDone after Finish and after OnCancel returned, so the reactor deletes
// itself there.
class WaitReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit WaitReactor(LockOps* ops) : ops_(ops) {}

  // Records the wait token LockOps returned (0: already completed).
  void SetToken(uint64_t token) {
    bool cancel;
    {
      std::lock_guard<std::mutex> l(mu_);
      token_ = token;
      cancel = cancelled_ && token != 0;
    }
    if (cancel) ops_->CancelWait(token);
  }

  void OnCancel() override {
    uint64_t token;
    {
      std::lock_guard<std::mutex> l(mu_);
      cancelled_ = true;
      token = token_;
    }
    if (token != 0) ops_->CancelWait(token);
  }

  void OnDone() override { delete this; }

 private:
  LockOps* ops_;
  std::mutex mu_;
  uint64_t token_ = 0;
  bool cancelled_ = false;
};

template <typename Start>
grpc::ServerUnaryReactor* Waiting(ServiceContext* c, LockOps* ops, grpc::CallbackServerContext* ctx,
                                  Start start) {
  auto* reactor = new WaitReactor(ops);
  c->requests.fetch_add(1, std::memory_order_relaxed);
  if (Status auth = CheckCaller(*ctx, c->auth, "Lock"); !auth.ok()) {
    reactor->Finish(ToGrpc(auth));
    return reactor;
  }
  try {
    reactor->SetToken(start(reactor));
  } catch (const std::exception& e) {
    // Thrown before LockOps took the request (allocation): nothing was queued.
    CLF_LOG_ERROR("lock service: {}", e.what());
    reactor->Finish(ToGrpc(Internal(std::string("lock service: ") + e.what())));
  }
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* LockService::OpenSession(grpc::CallbackServerContext* ctx,
                                                   const v1::OpenSessionRequest* req,
                                                   v1::OpenSessionReply* resp) {
  return Inline(c_, ctx, [&] {
    Result<v1::OpenSessionReply> r = ops_->OpenSession(*req, ctx->peer());
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* LockService::RenewSession(grpc::CallbackServerContext* ctx,
                                                    const v1::SessionRequest* req,
                                                    v1::SessionReply* resp) {
  return Inline(c_, ctx, [&] {
    Result<uint32_t> r = ops_->RenewSession(req->session());
    if (r.ok()) resp->set_lease_ms(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* LockService::ReclaimComplete(grpc::CallbackServerContext* ctx,
                                                       const v1::ReclaimCompleteRequest* req,
                                                       v1::ReclaimCompleteReply* resp) {
  return Inline(c_, ctx, [&] {
    Result<v1::ReclaimCompleteReply> r = ops_->ReclaimComplete(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* LockService::CloseSession(grpc::CallbackServerContext* ctx,
                                                    const v1::SessionRequest* req,
                                                    v1::SessionReply*) {
  return Inline(c_, ctx, [&] { return ops_->CloseSession(req->session()); });
}

grpc::ServerUnaryReactor* LockService::Acquire(grpc::CallbackServerContext* ctx,
                                               const v1::AcquireRequest* req,
                                               v1::AcquireReply* resp) {
  return Waiting(c_, ops_, ctx, [&](WaitReactor* reactor) {
    return ops_->Acquire(*req, [reactor, resp](Result<uint64_t> id) {
      if (id.ok()) resp->set_lock_id(*id);
      reactor->Finish(ToGrpc(id.status()));
    });
  });
}

grpc::ServerUnaryReactor* LockService::Release(grpc::CallbackServerContext* ctx,
                                               const v1::ReleaseRequest* req, v1::ReleaseReply*) {
  return Inline(c_, ctx, [&] { return ops_->Release(*req); });
}

grpc::ServerUnaryReactor* LockService::Test(grpc::CallbackServerContext* ctx,
                                            const v1::AcquireRequest* req, v1::TestReply* resp) {
  return Inline(c_, ctx, [&] {
    Result<v1::TestReply> r = ops_->Test(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* LockService::PosixLock(grpc::CallbackServerContext* ctx,
                                                 const v1::PosixLockRequest* req,
                                                 v1::PosixLockReply*) {
  return Waiting(c_, ops_, ctx, [&](WaitReactor* reactor) {
    return ops_->PosixLock(*req, [reactor](Status s) { reactor->Finish(ToGrpc(s)); });
  });
}

grpc::ServerUnaryReactor* LockService::PosixTest(grpc::CallbackServerContext* ctx,
                                                 const v1::PosixLockRequest* req,
                                                 v1::TestReply* resp) {
  return Inline(c_, ctx, [&] {
    Result<v1::TestReply> r = ops_->PosixTest(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* LockService::PosixRelease(grpc::CallbackServerContext* ctx,
                                                    const v1::PosixReleaseRequest* req,
                                                    v1::PosixReleaseReply*) {
  return Inline(c_, ctx, [&] { return ops_->PosixRelease(*req); });
}

grpc::ServerUnaryReactor* LockService::ListLocks(grpc::CallbackServerContext* ctx,
                                                 const v1::ListLocksRequest* req,
                                                 v1::ListLocksReply* resp) {
  return Inline(c_, ctx, [&] {
    *resp = ops_->ListLocks(req->handle());
    return Status::Ok();
  });
}

}  // namespace clf::server
