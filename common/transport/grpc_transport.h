// The inline gRPC data path (bytes in protobuf messages on the Data service),
// kept as the last fallback: used when transport = "grpc" or when a server's
// data port cannot be reached.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "clf/v1/data.grpc.pb.h"
#include "common/transport/transport.h"

namespace clf::transport {

// Thread safety: as DataTransport. Each call is one blocking unary RPC with
// the cluster secret (none with TLS: the channel carries the certificate) and a deadline of
// timeout_ms.
class GrpcTransport final : public DataTransport {
 public:
  GrpcTransport(std::shared_ptr<grpc::Channel> channel, std::string secret, uint32_t timeout_ms);
  TransportKind kind() const override { return TransportKind::kGrpc; }
  Status Write(const ObjectRef& obj, const std::vector<Extent>& extents, const std::vector<iovec>& payload,
               bool sync) override;
  Status Read(const ObjectRef& obj, const std::vector<Extent>& extents,
              const std::vector<iovec>& dest) override;
  Status Sync(const ObjectRef& obj) override;

 private:
  void Prepare(grpc::ClientContext* ctx) const;
  std::unique_ptr<v1::Data::Stub> stub_;
  const std::string secret_;
  const uint32_t timeout_ms_;
};

}  // namespace clf::transport
