// libfabric plumbing shared by the RDMA client (rdma_transport.*) and the RDMA
// listener (server/data/rdma_listener.*). This header and those two .cc files
// are the only places that see libfabric types; nothing else includes it.
//
// Endpoints are FI_EP_MSG with FI_MSG | FI_RMA: small messages carry requests
// and replies, RDMA READ/WRITE move the bytes. Each endpoint has its own
// completion queue and event queue; one thread drives an endpoint at a time.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/transport/rdma_protocol.h"

namespace clf::transport::rdma {

using Clock = std::chrono::steady_clock;

// A libfabric return code (negative fi_errno) as a Status: connection loss is
// kUnavailable, a timeout kTimedOut, the rest kIo.
Status FiError(ssize_t rc, const std::string& what);

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;
template <typename T>
struct FidDeleter {
  void operator()(T* p) const {
    if (p != nullptr) fi_close(&p->fid);
  }
};
template <typename T>
using FidPtr = std::unique_ptr<T, FidDeleter<T>>;

// Providers to try for an rdma_provider setting ("auto": verbs, then tcp).
std::vector<std::string> ProviderCandidates(const std::string& rdma_provider);
// fi_getinfo for an FI_EP_MSG + FI_MSG + FI_RMA endpoint of `provider` at
// node:service (source: a local address to listen on). kUnavailable when the
// provider offers nothing there.
Result<InfoPtr> GetInfo(const std::string& provider, const std::string& node,
                        const std::string& service, bool source);

// One registration of memory in a domain.
struct MemoryRegion {
  FidPtr<fid_mr> mr;
  uintptr_t base = 0;
  size_t len = 0;
  uint64_t access = 0;
  void* desc = nullptr;
  uint64_t key = 0;
  bool virt_addr = false;  // the provider addresses RMA by virtual address (else by offset)
  bool Covers(uintptr_t a, size_t n, uint64_t acc) const {
    return a >= base && n <= len && a - base <= len - n && (access & acc) == acc;
  }
  // The address the peer names for local address `a` in this region.
  uint64_t RemoteAddr(uintptr_t a) const { return virt_addr ? a : a - base; }
};

// A fabric and one domain, opened from one fi_info. Thread safe (the domain is
// opened FI_THREAD_SAFE).
class Domain {
 public:
  static Result<std::shared_ptr<Domain>> Open(InfoPtr info);
  ~Domain();
  const fi_info* info() const { return info_.get(); }
  fid_fabric* fabric() const { return fabric_.get(); }
  fid_domain* domain() const { return domain_.get(); }
  std::string provider() const { return info_->fabric_attr->prov_name; }
  // Registers [addr, addr + len) for `access` (FI_SEND, FI_REMOTE_READ, ...).
  Result<std::shared_ptr<MemoryRegion>> Register(const void* addr, size_t len, uint64_t access);
  // Whether a registration pins pages (hardware providers): a cached
  // registration would then go stale when its memory is unmapped and reused.
  bool PinsMemory() const;

 private:
  Domain() = default;
  InfoPtr info_;
  FidPtr<fid_fabric> fabric_;
  FidPtr<fid_domain> domain_;
  std::atomic<uint64_t> next_key_{1};
};

// Caches registrations by address range (a hit is any cached region that
// covers the range with the access asked for), least recently used first out,
// bounded by entries and bytes. An evicted region stays registered until the
// last request using it lets go (shared_ptr). capacity 0: no caching (every
// call registers, the registration is closed after the request).
// Thread safe.
class RegistrationCache {
 public:
  RegistrationCache(Domain* domain, size_t max_entries, size_t max_bytes)
      : domain_(domain), max_entries_(max_entries), max_bytes_(max_bytes) {}
  // A region covering [addr, addr + len) with `access`: a cached one, or a new
  // registration of the page-aligned range, cached.
  Result<std::shared_ptr<MemoryRegion>> Get(const void* addr, size_t len, uint64_t access);
  uint64_t hits() const { return hits_.load(); }
  uint64_t misses() const { return misses_.load(); }
  size_t entries() const;

 private:
  Domain* domain_;
  const size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;                         // guards lru_ and bytes_
  std::list<std::shared_ptr<MemoryRegion>> lru_;  // most recently used first
  size_t bytes_ = 0;
  std::atomic<uint64_t> hits_{0}, misses_{0};
};

// One connected FI_EP_MSG endpoint with its completion and event queues and a
// registered send and receive buffer of kMaxMessageBytes each. Exactly one
// receive is kept posted. Driven by one thread at a time.
class Endpoint {
 public:
  // `stop` (may be null): once true, waits without a deadline give up (kCancelled).
  explicit Endpoint(std::shared_ptr<Domain> domain, const std::atomic<bool>* stop = nullptr)
      : domain_(std::move(domain)), stop_(stop) {}
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Opens the endpoint for `info` (the domain's info on a client, a connection
  // request's info on a server), binds its queues, enables it, posts a receive.
  Status Open(const fi_info* info);
  // Client: connects to info's destination and waits for FI_CONNECTED.
  Status Connect(Clock::time_point deadline);
  // Server: accepts the connection request and waits for FI_CONNECTED.
  Status Accept(Clock::time_point deadline);

  uint8_t* send_buf() { return send_buf_.data(); }
  const uint8_t* recv_buf() const { return recv_buf_.data(); }
  // Sends send_buf()[0, len) and waits for its completion.
  Status Send(size_t len, Clock::time_point deadline);
  // Waits for the posted receive (deadline max: no deadline; the stop flag and
  // a disconnect still end the wait); returns the message length. The message
  // stays in recv_buf() until PostRecv().
  Result<size_t> WaitRecv(Clock::time_point deadline);
  Status PostRecv();
  // RDMA READ (write = false: remote -> local) or WRITE (local -> remote) of
  // the remote buffers in order, to or from local[0, total), pipelined, each
  // operation naming up to the provider's rma_iov_limit remote pieces.
  Status Rma(bool write, uint8_t* local, void* local_desc, const std::vector<RemoteBuf>& remote,
             Clock::time_point deadline);
  bool connected() const { return connected_; }

 private:
  // Reads one completion (or fails); dispatches it by context.
  Status Pump(Clock::time_point deadline);
  Status WaitConnected(Clock::time_point deadline);
  // Checks the event queue for a disconnect (without waiting).
  Status CheckEvents();

  std::shared_ptr<Domain> domain_;
  const std::atomic<bool>* stop_;
  FidPtr<fid_eq> eq_;
  FidPtr<fid_cq> cq_;
  FidPtr<fid_ep> ep_;
  std::vector<uint8_t> send_buf_, recv_buf_;
  std::shared_ptr<MemoryRegion> send_mr_, recv_mr_;
  fi_context2 send_ctx_{}, recv_ctx_{};
  std::vector<fi_context2> rma_ctx_;  // one per RMA operation in flight
  std::vector<size_t> free_slots_;    // indexes of rma_ctx_ not in flight
  size_t rma_iov_limit_ = 1;
  size_t max_op_bytes_ = 1u << 20;
  bool send_done_ = false, recv_done_ = false, recv_posted_ = false;
  size_t recv_len_ = 0;
  size_t rma_outstanding_ = 0;
  bool connected_ = false;
  bool broken_ = false;  // an error completion or a disconnect: never reused
};

}  // namespace clf::transport::rdma
