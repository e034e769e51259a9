// The RDMA data path's client end (wire format in rdma_protocol.h): libfabric
// FI_EP_MSG endpoints with one-sided RMA. The caller's buffers are registered
// through a registration cache and named in the request; the server pulls
// write data with RDMA READ and pushes read data with RDMA WRITE, then replies.
// Runs on any libfabric provider with FI_EP_MSG + FI_RMA: "verbs" on
// InfiniBand/RoCE, "tcp" over plain sockets (tests, machines without RDMA).
// No libfabric type appears in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/transport/transport.h"

namespace clf::transport {

// Whether this host has a hardware RDMA provider with a device (a device in
// /sys/class/infiniband, and libfabric's verbs provider offers an FI_EP_MSG +
// FI_RMA endpoint). Probed once per process.
bool HardwareRdmaAvailable();

// Client end for one server. Keeps up to `max_connections` endpoints (a pool,
// as TcpTransport); opens the fabric and domain on first use with the first of
// ProviderCandidates(provider) that offers an endpoint to `address`.
// Registrations: a cache keyed by address range, LRU-bounded by
// cache_entries and cache_bytes; on providers whose registrations pin pages
// (verbs) the cache is off (see docs/ARCHITECTURE.md) and every request
// registers, leaving reuse to the provider's own monitored cache.
// Thread safety: as DataTransport.
class RdmaTransport final : public DataTransport {
 public:
  RdmaTransport(std::string address, std::string provider, std::string secret, uint32_t timeout_ms,
                size_t max_connections = 4, size_t cache_entries = 256,
                uint64_t cache_bytes = 4ull << 30);
  ~RdmaTransport() override;
  RdmaTransport(const RdmaTransport&) = delete;
  RdmaTransport& operator=(const RdmaTransport&) = delete;

  TransportKind kind() const override { return TransportKind::kRdma; }
  const std::string& address() const;
  // The libfabric provider in use ("tcp", "verbs"); empty before the first connection.
  std::string provider() const;
  // Connects and authenticates one endpoint and keeps it in the pool.
  // kUnavailable when nothing answers; kUnauthenticated on a secret mismatch.
  Status Probe();

  Status Write(const ObjectRef& obj, const std::vector<Extent>& extents, const std::vector<iovec>& payload,
               bool sync) override;
  Status Read(const ObjectRef& obj, const std::vector<Extent>& extents,
              const std::vector<iovec>& dest) override;
  Status Sync(const ObjectRef& obj) override;

  struct CacheStats {
    uint64_t hits = 0, misses = 0;
    size_t entries = 0;
  };
  CacheStats cache_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace clf::transport
