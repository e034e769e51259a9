// gRPC adapter of the Baseline service (baseline.proto): metadata_mode =
// "client", paper 004's client-driven baseline. Decode, check the caller and
// the request (validate.h), hop to the io executor, call MetaOps (client_mode.cc).
#pragma once

#include "clf/v1/baseline.grpc.pb.h"
#include "server/service/services.h"

namespace clf::server {

class BaselineService final : public v1::Baseline::CallbackService {
 public:
  explicit BaselineService(ServiceContext* c) : c_(c) {}
  grpc::ServerUnaryReactor* Reserve(grpc::CallbackServerContext*, const v1::ReserveRequest*, v1::ReserveReply*) override;
  grpc::ServerUnaryReactor* Create(grpc::CallbackServerContext*, const v1::CreateRequest*, v1::AttrReply*) override;
  grpc::ServerUnaryReactor* Unlink(grpc::CallbackServerContext*, const v1::RemoveRequest*, v1::UnlinkReply*) override;
  grpc::ServerUnaryReactor* CreateObject(grpc::CallbackServerContext*, const v1::ObjectRequest*, v1::ObjectReply*) override;
  grpc::ServerUnaryReactor* RemoveObject(grpc::CallbackServerContext*, const v1::ObjectRequest*, v1::ObjectReply*) override;
  grpc::ServerUnaryReactor* StatObject(grpc::CallbackServerContext*, const v1::StatObjectRequest*, v1::ObjectReply*) override;

 private:
  ServiceContext* c_;
};

}  // namespace clf::server
