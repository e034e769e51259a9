#include "server/service/baseline_service.h"

#include <algorithm>
#include <memory>

#include "common/log.h"
#include "common/status_grpc.h"
#include "server/service/validate.h"

namespace clf::server {
namespace {

ClusterView ViewOf(const ServiceContext* c) {
  return ClusterView{c->ops->cluster().size(), c->id};
}

// Runs `fn` (returning clf::Status) on `ex` after the caller's role and the
// request's validation; an exception below is logged and answered kInternal.
template <typename Fn>
grpc::ServerUnaryReactor* Run(ServiceContext* c, Executor* ex, grpc::CallbackServerContext* ctx,
                              const char* what, const clf::Status& valid, Fn fn) {
  auto* reactor = ctx->DefaultReactor();
  c->requests.fetch_add(1, std::memory_order_relaxed);
  clf::Status st = CheckCaller(*ctx, c->auth, what);
  if (st.ok()) st = valid;
  if (!st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  ex->Submit([reactor, what, fn = std::move(fn)]() mutable {
    clf::Status s;
    try {
      s = fn();
    } catch (const std::exception& e) {
      CLF_LOG_ERROR("{}: exception escaped the handler: {}", what, e.what());
      s = Internal(std::string(what) + ": internal error");
    } catch (...) {
      CLF_LOG_ERROR("{}: exception escaped the handler", what);
      s = Internal(std::string(what) + ": internal error");
    }
    reactor->Finish(ToGrpc(s));
  });
  return reactor;
}

// root_squash as for Meta requests (services.cc).
template <typename Req>
std::shared_ptr<const Req> Squashed(const ServiceContext* c, const Req* in) {
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

}  // namespace

grpc::ServerUnaryReactor* BaselineService::Reserve(grpc::CallbackServerContext* ctx,
                                                   const v1::ReserveRequest* in,
                                                   v1::ReserveReply* resp) {
  auto req = Squashed(c_, in);
  return Run(c_, c_->io, ctx, "Baseline.Reserve", Validate(*req, ViewOf(c_)), [this, req, resp] {
    Result<v1::ReserveReply> r = c_->ops->ClientReserve(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* BaselineService::Create(grpc::CallbackServerContext* ctx,
                                                  const v1::CreateRequest* in,
                                                  v1::AttrReply* resp) {
  auto req = Squashed(c_, in);
  return Run(c_, c_->io, ctx, "Baseline.Create", ValidateBaselineCreate(*req, ViewOf(c_)),
             [this, req, resp] {
               Result<v1::Attr> r = c_->ops->ClientCreate(*req, resp->mutable_parent());
               if (r.ok()) *resp->mutable_attr() = std::move(*r);
               return r.status();
             });
}

grpc::ServerUnaryReactor* BaselineService::Unlink(grpc::CallbackServerContext* ctx,
                                                  const v1::RemoveRequest* in,
                                                  v1::UnlinkReply* resp) {
  auto req = Squashed(c_, in);
  return Run(c_, c_->io, ctx, "Baseline.Unlink", Validate(*req, ViewOf(c_)), [this, req, resp] {
    Result<v1::UnlinkReply> r = c_->ops->ClientUnlink(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* BaselineService::CreateObject(grpc::CallbackServerContext* ctx,
                                                        const v1::ObjectRequest* req,
                                                        v1::ObjectReply*) {
  return Run(c_, c_->io, ctx, "Baseline.CreateObject", Validate(*req, ViewOf(c_)),
             [this, req] { return c_->ops->ClientObject(*req, v1::CAP_CREATE); });
}

grpc::ServerUnaryReactor* BaselineService::RemoveObject(grpc::CallbackServerContext* ctx,
                                                        const v1::ObjectRequest* req,
                                                        v1::ObjectReply*) {
  return Run(c_, c_->io, ctx, "Baseline.RemoveObject", Validate(*req, ViewOf(c_)),
             [this, req] { return c_->ops->ClientObject(*req, v1::CAP_REMOVE); });
}

grpc::ServerUnaryReactor* BaselineService::StatObject(grpc::CallbackServerContext* ctx,
                                                      const v1::StatObjectRequest* req,
                                                      v1::ObjectReply* resp) {
  return Run(c_, c_->io, ctx, "Baseline.StatObject", Validate(*req, ViewOf(c_)),
             [this, req, resp] {
               Result<v1::ObjectReply> r = c_->ops->ClientStatObject(req->handle());
               if (r.ok()) *resp = std::move(*r);
               return r.status();
             });
}

}  // namespace clf::server
