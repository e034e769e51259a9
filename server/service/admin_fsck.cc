// Admin.FsckScan and Admin.FsckRepair: the gRPC adapters of FsckOps (`clf fsck`).
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status_grpc.h"
#include "server/ops/fsck_ops.h"
#include "server/service/services.h"
#include "server/service/validate.h"

namespace clf::server {
namespace {

// Counts the call, checks the caller's role (auth.h) and the request
// (validate.h); false after finishing the call with the refusal.
bool AdmitFsck(ServiceContext* c, grpc::CallbackServerContext* ctx,
               grpc::ServerUnaryReactor* reactor, const char* what, const clf::Status& valid) {
  c->requests.fetch_add(1, std::memory_order_relaxed);
  clf::Status st = CheckCaller(*ctx, c->auth, what);
  if (st.ok()) st = valid;
  if (st.ok()) return true;
  reactor->Finish(ToGrpc(st));
  return false;
}

// The exception boundary of these handlers: logged once, answered kInternal.
template <typename Fn>
clf::Status GuardedFsck(const char* what, Fn& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    CLF_LOG_ERROR("{}: exception escaped the handler: {}", what, e.what());
  } catch (...) {
    CLF_LOG_ERROR("{}: exception escaped the handler", what);
  }
  return Internal(std::string(what) + ": internal error");
}

ClusterView ViewOf(const ServiceContext* c) {
  return ClusterView{c->ops->cluster().size(), c->id};
}

}  // namespace

grpc::ServerUnaryReactor* AdminService::FsckScan(grpc::CallbackServerContext* ctx,
                                                 const v1::FsckScanRequest* req,
                                                 v1::FsckScanReply* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!AdmitFsck(c_, ctx, reactor, "Admin.FsckScan", Validate(*req, ViewOf(c_)))) return reactor;
  c_->peer->Submit([this, reactor, req, resp] {
    auto fn = [&]() -> clf::Status {
      FsckOps ops(c_->ops, c_->store, c_->objects);
      CLF_ASSIGN_OR_RETURN(*resp, ops.Scan(*req));
      return clf::Status::Ok();
    };
    reactor->Finish(ToGrpc(GuardedFsck("Admin.FsckScan", fn)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::FsckRepair(grpc::CallbackServerContext* ctx,
                                                   const v1::FsckRepairRequest* req,
                                                   v1::FsckRepairReply*) {
  auto* reactor = ctx->DefaultReactor();
  if (!AdmitFsck(c_, ctx, reactor, "Admin.FsckRepair", Validate(*req, ViewOf(c_)))) return reactor;
  // A change of a directory waits for (recalls) another client's lease on it,
  // as any namespace change does, so the holder's listing stays true.
  std::vector<Handle> dirs;
  if (req->op() == v1::FSCK_REPAIR_REMOVE_ENTRY || req->op() == v1::FSCK_REPAIR_ADD_ENTRY) {
    dirs.push_back(req->parent());
  } else if (req->op() == v1::FSCK_REPAIR_SET_NLINK) {
    dirs.push_back(req->handle());
  }
  auto run = [this, reactor, req, dirs] {
    c_->peer->Submit([this, reactor, req, dirs] {
      auto fn = [&]() -> clf::Status {
        FsckOps ops(c_->ops, c_->store, c_->objects);
        clf::Status s = ops.Repair(*req);
        if (s.ok()) {
          CLF_LOG_WARN("fsck repair: op {} parent {:x} name '{}' handle {:x} nlink {}",
                       static_cast<int>(req->op()), req->parent(), req->name(), req->handle(),
                       req->nlink());
        }
        return s;
      };
      clf::Status s = GuardedFsck("Admin.FsckRepair", fn);
      if (c_->leases != nullptr && !dirs.empty()) c_->leases->Done(dirs);
      reactor->Finish(ToGrpc(s));
    });
  };
  if (c_->leases == nullptr || dirs.empty()) {
    run();
  } else {
    c_->leases->Admit(0, dirs, true, std::move(run));
  }
  return reactor;
}

}  // namespace clf::server
