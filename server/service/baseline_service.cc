#include "server/service/baseline_service.h"

#include "server/service/serve.h"

namespace clf::server {

using namespace service_detail;  // NOLINT: the shared request boundary (serve.h)

grpc::ServerUnaryReactor* BaselineService::Reserve(grpc::CallbackServerContext* ctx,
                                                   const v1::ReserveRequest* in,
                                                   v1::ReserveReply* resp) {
  auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Baseline.Reserve", Validate(*req, View(c_)), [this, req, resp] {
    Result<v1::ReserveReply> r = c_->client_mode->Reserve(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* BaselineService::Create(grpc::CallbackServerContext* ctx,
                                                  const v1::CreateRequest* in,
                                                  v1::AttrReply* resp) {
  auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Baseline.Create", ValidateBaselineCreate(*req, View(c_)),
             [this, req, resp] {
               Result<v1::Attr> r = c_->client_mode->Create(*req, resp->mutable_parent());
               if (r.ok()) *resp->mutable_attr() = std::move(*r);
               return r.status();
             });
}

grpc::ServerUnaryReactor* BaselineService::Unlink(grpc::CallbackServerContext* ctx,
                                                  const v1::RemoveRequest* in,
                                                  v1::UnlinkReply* resp) {
  auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Baseline.Unlink", Validate(*req, View(c_)), [this, req, resp] {
    Result<v1::UnlinkReply> r = c_->client_mode->Unlink(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* BaselineService::CreateObject(grpc::CallbackServerContext* ctx,
                                                        const v1::ObjectRequest* req,
                                                        v1::ObjectReply*) {
  return Serve(c_, c_->io, ctx, "Baseline.CreateObject", Validate(*req, View(c_)),
             [this, req] { return c_->client_mode->Object(*req, v1::CAP_CREATE); });
}

grpc::ServerUnaryReactor* BaselineService::RemoveObject(grpc::CallbackServerContext* ctx,
                                                        const v1::ObjectRequest* req,
                                                        v1::ObjectReply*) {
  return Serve(c_, c_->io, ctx, "Baseline.RemoveObject", Validate(*req, View(c_)),
             [this, req] { return c_->client_mode->Object(*req, v1::CAP_REMOVE); });
}

grpc::ServerUnaryReactor* BaselineService::StatObject(grpc::CallbackServerContext* ctx,
                                                      const v1::StatObjectRequest* req,
                                                      v1::ObjectReply* resp) {
  return Serve(c_, c_->io, ctx, "Baseline.StatObject", Validate(*req, View(c_)),
             [this, req, resp] {
               Result<v1::ObjectReply> r = c_->client_mode->StatObject(req->handle());
               if (r.ok()) *resp = std::move(*r);
               return r.status();
             });
}

}  // namespace clf::server
