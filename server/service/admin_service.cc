// The Admin service: status, object listings and removals (fsck is in admin_fsck.cc).
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

grpc::ServerUnaryReactor* AdminService::Status(grpc::CallbackServerContext* ctx,
                                               const v1::StatusRequest* req,
                                               v1::StatusReply* resp) {
  return Serve(c_, c_->peer, ctx, "Admin.Status", Validate(*req, View(c_)), [this, resp] {
    resp->set_id(c_->id);
    resp->set_address(c_->address);
    resp->set_uptime_s(std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - c_->started)
                           .count());
    resp->set_requests(c_->requests.load());
    resp->set_version(kVersion);
    resp->set_wall_time_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
    resp->set_transport(c_->transport);
    resp->set_data_address(c_->data_address);
    admin_.FillStatus(resp);
    if (c_->replica_state != nullptr) resp->set_stale_copies(c_->replica_state->stale_copies());
    if (c_->resyncer != nullptr) {
      resp->set_resync_bytes(c_->resyncer->bytes());
      resp->set_resynced_copies(c_->resyncer->resynced());
      resp->set_resync_running(c_->resyncer->busy());
    }
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* AdminService::ListObjects(grpc::CallbackServerContext* ctx,
                                                    const v1::ListObjectsRequest* req,
                                                    v1::ListObjectsReply* resp) {
  return Serve(c_, c_->peer, ctx, "Admin.ListObjects", Validate(*req, View(c_)), [this, resp] {
    admin_.ListObjects(resp);
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* AdminService::RemoveObject(grpc::CallbackServerContext* ctx,
                                                     const v1::RemoveObjectRequest* req,
                                                     v1::RemoveObjectReply*) {
  return Serve(c_, c_->peer, ctx, "Admin.RemoveObject", Validate(*req, View(c_)),
               [this, req] { return admin_.RemoveObject(req->handle()); });
}

}  // namespace clf::server
