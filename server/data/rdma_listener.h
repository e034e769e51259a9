// The RDMA data path's server end (wire format in common/transport/rdma_protocol.h).
// A libfabric passive endpoint accepts FI_EP_MSG connections; each connection
// has its own thread, which authenticates the peer (challenge-response over the
// cluster secret), then serves requests: it pulls write data from the client's
// registered buffers with RDMA READ into a registered per-connection buffer,
// or pushes read data into them with RDMA WRITE, and replies with a small
// message. The server registers only local-access memory: a peer can never
// read or write the server's memory, only name its own.
// Every request is validated here (counts, lengths, the buffers' total against
// the extents); a malformed one gets an error reply and the endpoint is closed.
// No libfabric type appears in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/transport/transport.h"

namespace clf::server {

class RdmaDataListener final : public transport::DataListener {
 public:
  // provider: "auto" (verbs, then tcp), "tcp" or "verbs". Requests must
  // complete within frame_timeout_ms (an unauthenticated endpoint gets that
  // long to authenticate); an idle authenticated endpoint is kept.
  RdmaDataListener(std::string address, std::string provider, std::string secret,
                   transport::DataHandler* handler, uint32_t frame_timeout_ms,
                   size_t max_connections = 256);
  ~RdmaDataListener() override;
  RdmaDataListener(const RdmaDataListener&) = delete;
  RdmaDataListener& operator=(const RdmaDataListener&) = delete;

  TransportKind kind() const override { return TransportKind::kRdma; }
  Status Start() override;
  void Stop() override;
  std::string address() const override;
  // The libfabric provider serving ("tcp", "verbs"); empty before Start.
  std::string provider() const;
  size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace clf::server
