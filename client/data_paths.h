// The bulk-data path to each server, picked on first use: RDMA (libfabric)
// when asked for or when this host has an RDMA device and the server answers
// on it, else the server's TCP data channel, else (transport auto, data port
// unreachable) inline gRPC on a channel of its own, retried every 30 s. Each
// change is logged once. Internal to client/.
// Thread safety: thread safe (one mutex per server, held while probing).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/credentials.h"
#include "common/status.h"
#include "common/transport/grpc_transport.h"
#include "common/transport/rdma_transport.h"
#include "common/transport/tcp_transport.h"

namespace clf::client {

class DataPaths {
 public:
  // transport: this client's choice (ClientOptions::transport or the cluster
  // file's); data_tls: the data channel's TLS context with [tls], else null.
  DataPaths(const ClusterConfig& cluster, const Credentials& cred, SslCtxPtr data_tls,
            TransportKind transport, uint32_t timeout_ms);

  // The data path to server s (s < the cluster's size). Blocks while it dials
  // (only callers of that server wait).
  Result<transport::DataTransport*> Choose(ServerId s);
  // "rdma(provider)", "tcp", "grpc", or "" before the first use.
  std::string TransportOf(ServerId s);

 private:
  // One server's data path (see Choose).
  struct Path {
    std::mutex mu;  // guards chosen and retry_at; held while probing
    std::unique_ptr<transport::RdmaTransport> rdma;  // null: RDMA not asked for (or unreachable)
    std::unique_ptr<transport::TcpTransport> tcp;    // null: transport = grpc or no data address
    std::unique_ptr<transport::GrpcTransport> grpc;
    Status no_tcp;                                // why tcp is null
    TransportKind chosen = TransportKind::kAuto;  // kAuto: not picked yet
    std::chrono::steady_clock::time_point retry_at;
  };
  static constexpr size_t kConnectionsPerServer = 4;
  static constexpr std::chrono::seconds kFallbackRetry{30};

  const ClusterConfig cluster_;
  const TransportKind transport_;
  std::vector<std::unique_ptr<Path>> paths_;
};

}  // namespace clf::client
