#include "client/data_paths.h"

#include "common/log.h"
#include "common/status_grpc.h"

namespace clf::client {

DataPaths::DataPaths(const ClusterConfig& cluster, const Credentials& cred, SslCtxPtr data_tls,
                     TransportKind transport, uint32_t timeout_ms)
    : cluster_(cluster), transport_(transport) {
  grpc::ChannelArguments args = ClfChannelArgs();
  args.SetString("clf.channel", "data");  // distinct args: not the metadata channel's connection
  std::shared_ptr<grpc::ChannelCredentials> creds = ChannelCredentialsFor(cred);
  transport::DataChannelAuth data_auth;
  data_auth.secret = cred.secret;
  data_auth.tls = std::move(data_tls);
  for (const ServerConfig& s : cluster_.servers) {
    auto path = std::make_unique<Path>();
    // Metadata and data on separate channels, so bulk transfers do not queue small calls.
    path->grpc = std::make_unique<transport::GrpcTransport>(
        grpc::CreateCustomChannel(s.address, creds, args), cred.secret, timeout_ms);
    if (!cred.tls && (transport_ == TransportKind::kRdma ||
                      (transport_ == TransportKind::kAuto && transport::HardwareRdmaAvailable()))) {
      Result<std::string> raddr = RdmaAddressOf(s);
      if (raddr.ok()) {
        path->rdma = std::make_unique<transport::RdmaTransport>(
            *raddr, cluster_.rdma_provider, cred.secret, timeout_ms, kConnectionsPerServer);
      }
    }
    if (transport_ != TransportKind::kGrpc) {
      Result<std::string> addr = DataAddressOf(s);
      if (addr.ok()) {
        path->tcp = std::make_unique<transport::TcpTransport>(*addr, data_auth, timeout_ms,
                                                              kConnectionsPerServer);
      } else {
        path->no_tcp = addr.status();
      }
    }
    paths_.push_back(std::move(path));
  }
}

std::string DataPaths::TransportOf(ServerId s) {
  if (s >= paths_.size()) return "";
  Path& p = *paths_[s];
  std::lock_guard<std::mutex> l(p.mu);
  if (p.chosen == TransportKind::kRdma) return "rdma(" + p.rdma->provider() + ")";
  return p.chosen == TransportKind::kAuto ? "" : std::string(TransportName(p.chosen));
}

Result<transport::DataTransport*> DataPaths::Choose(ServerId s) {
  Path& p = *paths_[s];
  std::lock_guard<std::mutex> l(p.mu);
  const auto now = std::chrono::steady_clock::now();
  if (p.chosen == TransportKind::kRdma) return p.rdma.get();
  if (p.chosen == TransportKind::kTcp) return p.tcp.get();
  if (p.chosen == TransportKind::kGrpc && (!p.tcp || now < p.retry_at)) return p.grpc.get();
  const std::string addr = cluster_.servers[s].address;
  if (p.rdma) {
    // transport = rdma: RDMA or an error. auto (hardware found): RDMA, else
    // on to the TCP rule below when the server offers no RDMA.
    Status rs = p.rdma->Probe();
    if (rs.ok()) {
      CLF_LOG_INFO("data to server {} ({}): rdma ({} provider) {}", s, addr, p.rdma->provider(),
                   p.rdma->address());
      p.chosen = TransportKind::kRdma;
      return p.rdma.get();
    }
    if (rs.code() != Code::kUnavailable || transport_ == TransportKind::kRdma) {
      Status e = rs.WithContext("rdma data path of server " + std::to_string(s));
      // Asked for by this client only: with transport auto/tcp/grpc the
      // servers listen for RDMA only on hosts with an RDMA device.
      if (cluster_.transport != TransportKind::kRdma) {
        e = Status(e.code(),
                   e.message() +
                       " (the cluster's transport is not \"rdma\": its servers listen for RDMA "
                       "only on hosts with an RDMA device; set transport = \"rdma\" in the "
                       "cluster file, e.g. `clf up --set 'transport=\"rdma\"'`, to run the "
                       "RDMA path on libfabric's tcp provider)");
      }
      return e;
    }
    CLF_LOG_WARN("data to server {} ({}): rdma {} unreachable ({}); trying tcp", s, addr,
                 p.rdma->address(), rs.message());
    p.rdma.reset();
  }
  if (!p.tcp) {
    if (transport_ == TransportKind::kGrpc) {
      CLF_LOG_INFO("data to server {} ({}): inline grpc (transport = grpc)", s, addr);
    } else {
      CLF_LOG_WARN("data to server {} ({}): inline grpc: no data channel address ({})", s, addr,
                   p.no_tcp.ToString());
    }
    p.chosen = TransportKind::kGrpc;
    return p.grpc.get();
  }
  Status st = p.tcp->Probe();
  if (st.ok()) {
    CLF_LOG_INFO("data to server {} ({}): tcp data channel {}", s, addr, p.tcp->address());
    p.chosen = TransportKind::kTcp;
    return p.tcp.get();
  }
  if (st.code() != Code::kUnavailable || transport_ == TransportKind::kTcp) {
    return st.WithContext("data channel of server " + std::to_string(s));
  }
  if (p.chosen != TransportKind::kGrpc) {
    CLF_LOG_WARN(
        "data to server {} ({}): data port {} unreachable ({}); falling back to inline "
        "grpc (retried every {} s)",
        s, addr, p.tcp->address(), st.message(), kFallbackRetry.count());
  }
  p.chosen = TransportKind::kGrpc;
  p.retry_at = now + kFallbackRetry;
  return p.grpc.get();
}

}  // namespace clf::client
