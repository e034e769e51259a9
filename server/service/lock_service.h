// LockService: the thin gRPC adapter of the lock service (proto/clf/v1/lock.proto)
// over LockOps. Every call is in-memory work of microseconds, so it runs on the
// reactor; a blocking acquire parks no thread: its reactor is finished from
// LockOps' completion (grant, timeout, lease expiry), and a client that goes
// away (disconnect, deadline) cancels its waiting request through OnCancel.
#pragma once

#include <grpcpp/grpcpp.h>

#include "clf/v1/lock.grpc.pb.h"
#include "server/ops/lock_ops.h"
#include "server/service/services.h"

namespace clf::server {

class LockService final : public v1::Lock::CallbackService {
 public:
  LockService(ServiceContext* c, LockOps* ops) : c_(c), ops_(ops) {}
  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext*, const v1::OpenSessionRequest*, v1::OpenSessionReply*) override;
  grpc::ServerUnaryReactor* RenewSession(grpc::CallbackServerContext*, const v1::SessionRequest*, v1::SessionReply*) override;
  grpc::ServerUnaryReactor* ReclaimComplete(grpc::CallbackServerContext*, const v1::ReclaimCompleteRequest*, v1::ReclaimCompleteReply*) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext*, const v1::SessionRequest*, v1::SessionReply*) override;
  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext*, const v1::AcquireRequest*, v1::AcquireReply*) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext*, const v1::ReleaseRequest*, v1::ReleaseReply*) override;
  grpc::ServerUnaryReactor* Test(grpc::CallbackServerContext*, const v1::AcquireRequest*, v1::TestReply*) override;
  grpc::ServerUnaryReactor* PosixLock(grpc::CallbackServerContext*, const v1::PosixLockRequest*, v1::PosixLockReply*) override;
  grpc::ServerUnaryReactor* PosixTest(grpc::CallbackServerContext*, const v1::PosixLockRequest*, v1::TestReply*) override;
  grpc::ServerUnaryReactor* PosixRelease(grpc::CallbackServerContext*, const v1::PosixReleaseRequest*, v1::PosixReleaseReply*) override;
  grpc::ServerUnaryReactor* ListLocks(grpc::CallbackServerContext*, const v1::ListLocksRequest*, v1::ListLocksReply*) override;

 private:
  ServiceContext* c_;
  LockOps* ops_;
};

}  // namespace clf::server
