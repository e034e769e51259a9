// The Data service: inline reads, writes and syncs (the last fallback of the data path).
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

namespace {

// A forwarded copy's request (the acting primary's forwarded write or sync)
// comes from a server: a client's would bypass the copy's order.
clf::Status FromServerIfForwarded(const clf::Status& valid, const grpc::CallbackServerContext& ctx,
                                  const AuthConfig& auth, const v1::ObjectCopy& copy) {
  if (!valid.ok() || !copy.forwarded() || CallerRole(ctx, auth) == Role::kServer) return valid;
  return Status(Code::kPermission, "a forwarded copy's request is for servers only; the caller is a client");
}

}  // namespace

grpc::ServerUnaryReactor* DataService::Write(grpc::CallbackServerContext* ctx,
                                             const v1::WriteRequest* req, v1::WriteReply* resp) {
  return Serve(c_, c_->io, ctx, "Data.Write",
               FromServerIfForwarded(Validate(*req, View(c_)), *ctx, c_->auth, req->copy()), [this, req, resp] {
    if (c_->data_bytes != nullptr) c_->data_bytes->AddIn(DataBytes::kGrpc, req->payload().size());
    clf::Status s = c_->data->Write(*req);
    if (s.ok()) resp->set_written(req->payload().size());
    return s;
  });
}

grpc::ServerUnaryReactor* DataService::Read(grpc::CallbackServerContext* ctx,
                                            const v1::ReadRequest* req, v1::ReadReply* resp) {
  return Serve(c_, c_->io, ctx, "Data.Read",
               FromServerIfForwarded(Validate(*req, View(c_)), *ctx, c_->auth, req->copy()), [this, req, resp] {
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
  return Serve(c_, c_->io, ctx, "Data.Sync",
               FromServerIfForwarded(Validate(*req, View(c_)), *ctx, c_->auth, req->copy()),
               [this, req] {
                 ObjectRef obj(req->handle());
                 CLF_RETURN_IF_ERROR(DataOps::ObjectOf(req->handle(), req->copy(), &obj));
                 return c_->data->Sync(obj);
               });
}

}  // namespace clf::server
