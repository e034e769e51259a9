#include "common/transport/rdma_transport.h"

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "common/log.h"
#include "common/transport/rdma_fabric.h"
#include "common/transport/tcp_protocol.h"

namespace clf::transport {

using rdma::Clock;
using rdma::Endpoint;
using rdma::Message;
using rdma::RemoteBuf;

bool HardwareRdmaAvailable() {
  static const bool found = [] {
    // Without an RDMA device in sysfs (hardware, rxe or siw) the verbs provider
    // has nothing to offer; checking first spares every process with
    // transport = auto libfabric's initialization (it scans /proc/kallsyms:
    // about 0.1-0.5 s here).
    std::error_code ec;
    std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
    if (ec || it == std::filesystem::directory_iterator()) return false;
    Result<rdma::InfoPtr> info = rdma::GetInfo("verbs", "", "", false);
    return info.ok();
  }();
  return found;
}

namespace {

Clock::time_point Deadline(uint32_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

Code CodeFromWire(uint32_t v) {
  if (v > static_cast<uint32_t>(Code::kLastCode)) return Code::kIo;
  return static_cast<Code>(v);
}

// One message of a request: a run of extents and the client memory they map to.
struct Batch {
  std::vector<Extent> extents;
  std::vector<RemoteBuf> buffers;
};

using Regions = std::vector<std::shared_ptr<rdma::MemoryRegion>>;  // one per iovec

// The remote buffers naming extent `e`'s bytes: the next e.length bytes of
// the iovecs from iovec *vi, offset *vo (both moved past them), one buffer per
// iovec piece; adjacent pieces of one region merge into one buffer.
Result<std::vector<RemoteBuf>> BuffersOf(const Extent& e, const std::vector<iovec>& iov,
                                         const Regions& regions, size_t* vi, uint64_t* vo) {
  std::vector<RemoteBuf> bufs;
  for (uint64_t left = e.length; left > 0;) {
    while (*vi < iov.size() && *vo == iov[*vi].iov_len) {
      ++*vi;
      *vo = 0;
    }
    if (*vi == iov.size()) return Invalid("rdma: buffers shorter than the extents");
    const uint64_t n = std::min<uint64_t>(left, iov[*vi].iov_len - *vo);
    const uintptr_t p = reinterpret_cast<uintptr_t>(iov[*vi].iov_base) + *vo;
    const rdma::MemoryRegion& r = *regions[*vi];
    if (!bufs.empty() && bufs.back().key == r.key &&
        bufs.back().addr + bufs.back().len == r.RemoteAddr(p)) {
      bufs.back().len += n;
    } else {
      bufs.push_back(RemoteBuf{r.RemoteAddr(p), n, r.key});
    }
    *vo += n;
    left -= n;
  }
  return bufs;
}

// The extents cut into messages, each extent with its remote buffers
// (BuffersOf, in order through the iovecs); the iovecs must hold exactly the
// extents' bytes.
Result<std::vector<Batch>> CutIntoBatches(const std::vector<Extent>& extents,
                                          const std::vector<iovec>& iov, const Regions& regions) {
  std::vector<Batch> batches(1);
  size_t bytes_used = rdma::kHeaderBytes;
  size_t vi = 0;    // current iovec
  uint64_t vo = 0;  // offset in it
  uint64_t extent_bytes = 0;
  for (const Extent& e : extents) {
    CLF_ASSIGN_OR_RETURN(std::vector<RemoteBuf> bufs, BuffersOf(e, iov, regions, &vi, &vo));
    const size_t need = rdma::kExtentBytes + bufs.size() * rdma::kBufferBytes;
    if (need + rdma::kHeaderBytes > rdma::kMaxMessageBytes) {
      return Status(Code::kTooBig, "rdma: one extent spans too many buffers");
    }
    if (bytes_used + need > rdma::kMaxMessageBytes) {
      batches.emplace_back();
      bytes_used = rdma::kHeaderBytes;
    }
    batches.back().extents.push_back(e);
    batches.back().buffers.insert(batches.back().buffers.end(), bufs.begin(), bufs.end());
    bytes_used += need;
    extent_bytes += e.length;
  }
  if (TotalBytes(iov) != extent_bytes) return Invalid("rdma: buffers do not match the extents");
  return batches;
}

}  // namespace

struct RdmaTransport::Impl {
  enum class Op { kWrite, kRead, kSync };

  Impl(std::string a, std::string p, std::string s, uint32_t t, size_t m, size_t ce, uint64_t cb)
      : address(std::move(a)),
        provider_setting(std::move(p)),
        secret(std::move(s)),
        timeout_ms(t),
        max_connections(m == 0 ? 1 : m),
        cache_entries(ce),
        cache_bytes(cb) {}
  ~Impl() {
    if (cache && cache->hits() + cache->misses() > 0) {
      CLF_LOG_INFO("rdma {}: registration cache {} hits, {} misses", address, cache->hits(),
                   cache->misses());
    }
    idle.clear();  // endpoints before the cache and the domain
    cache.reset();
    domain.reset();
  }

  Status OpenDomain();
  Result<std::unique_ptr<Endpoint>> Connect();
  Result<std::unique_ptr<Endpoint>> Acquire(bool fresh, bool* reused);
  void Release(std::unique_ptr<Endpoint> e);
  void Drop();
  Status Register(Op op, const std::vector<iovec>& iov,
                  std::vector<std::shared_ptr<rdma::MemoryRegion>>* regions);
  Status Exchange(Endpoint& ep, Message& m, bool* replied, bool* clean);
  Status Call(Endpoint& ep, Op op, const ObjectRef& obj, const std::vector<Extent>& extents,
              const std::vector<iovec>& iov, bool sync, bool* healthy, bool* replied);
  Status SendBatches(Endpoint& ep, uint16_t wire_op, const ObjectRef& obj, bool sync,
                     std::vector<Batch>& batches, bool* healthy, bool* replied);
  Status Run(Op op, const ObjectRef& obj, const std::vector<Extent>& extents, const std::vector<iovec>& iov,
             bool sync);

  const std::string address, provider_setting, secret;
  const uint32_t timeout_ms;
  const size_t max_connections;
  const size_t cache_entries;
  const uint64_t cache_bytes;
  std::atomic<uint64_t> next_id{1};
  std::mutex domain_mu;  // guards domain and cache while they are opened
  std::shared_ptr<rdma::Domain> domain;
  std::unique_ptr<rdma::RegistrationCache> cache;
  std::mutex mu;  // guards idle and open
  std::condition_variable cv;
  std::vector<std::unique_ptr<Endpoint>> idle;
  size_t open = 0;
};

Status RdmaTransport::Impl::OpenDomain() {
  std::lock_guard<std::mutex> l(domain_mu);
  if (domain) return Status::Ok();
  std::string host, port;
  CLF_RETURN_IF_ERROR(tcp::SplitHostPort(address, &host, &port));
  Status last = Unavailable("rdma: no provider");
  for (const std::string& p : rdma::ProviderCandidates(provider_setting)) {
    Result<rdma::InfoPtr> info = rdma::GetInfo(p, host, port, false);
    if (!info.ok()) {
      last = info.status();
      continue;
    }
    CLF_ASSIGN_OR_RETURN(domain, rdma::Domain::Open(std::move(*info)));
    const bool pins = domain->PinsMemory();
    cache = std::make_unique<rdma::RegistrationCache>(domain.get(), pins ? 0 : cache_entries,
                                                      cache_bytes);
    return Status::Ok();
  }
  return last;
}

Result<std::unique_ptr<Endpoint>> RdmaTransport::Impl::Connect() {
  CLF_RETURN_IF_ERROR(OpenDomain());
  const Clock::time_point deadline = Deadline(timeout_ms);
  auto ep = std::make_unique<Endpoint>(domain);
  CLF_RETURN_IF_ERROR(ep->Open(domain->info()));
  CLF_RETURN_IF_ERROR(ep->Connect(deadline).WithContext("rdma " + address));
  // Challenge-response (rdma_protocol.h) before any key is sent.
  CLF_ASSIGN_OR_RETURN(size_t n, ep->WaitRecv(deadline));
  Message ch;
  CLF_RETURN_IF_ERROR(rdma::Decode(ep->recv_buf(), n, &ch));
  if (ch.h.op != rdma::kChallenge || ch.payload.size() != tcp::kNonceBytes) {
    return IoError("rdma " + address + ": expected a challenge");
  }
  CLF_RETURN_IF_ERROR(ep->PostRecv());
  tcp::Nonce server_nonce, client_nonce;
  std::memcpy(server_nonce.data(), ch.payload.data(), server_nonce.size());
  CLF_RETURN_IF_ERROR(tcp::RandomNonce(&client_nonce));
  const tcp::Mac mac = tcp::AuthMac(secret, rdma::kClientLabel, server_nonce, client_nonce);
  Message a;
  a.h.op = rdma::kAuth;
  a.payload.assign(reinterpret_cast<const char*>(client_nonce.data()), client_nonce.size());
  a.payload.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  const size_t len = rdma::Encode(a, ep->send_buf(), rdma::kMaxMessageBytes);
  CLF_RETURN_IF_ERROR(ep->Send(len, deadline));
  CLF_ASSIGN_OR_RETURN(n, ep->WaitRecv(deadline));
  Message r;
  CLF_RETURN_IF_ERROR(rdma::Decode(ep->recv_buf(), n, &r));
  if (r.h.op != (rdma::kAuthOk | rdma::kReplyBit)) {
    return IoError("rdma " + address + ": expected an authentication reply");
  }
  if (r.h.status != 0)
    return Status(CodeFromWire(r.h.status), "rdma " + address + ": " + r.payload);
  const tcp::Mac want = tcp::AuthMac(secret, rdma::kServerLabel, client_nonce, server_nonce);
  if (r.payload.size() != tcp::kMacBytes ||
      !tcp::MacEqual(reinterpret_cast<const uint8_t*>(r.payload.data()), want.data())) {
    return Status(Code::kUnauthenticated,
                  "rdma " + address + ": the server does not hold the cluster secret");
  }
  CLF_RETURN_IF_ERROR(ep->PostRecv());
  return ep;
}

Result<std::unique_ptr<Endpoint>> RdmaTransport::Impl::Acquire(bool fresh, bool* reused) {
  std::unique_lock<std::mutex> l(mu);
  *reused = false;
  if (fresh) {
    open -= idle.size();
    idle.clear();
  }
  const Clock::time_point deadline = Deadline(timeout_ms);
  for (;;) {
    if (!fresh && !idle.empty()) {
      std::unique_ptr<Endpoint> e = std::move(idle.back());
      idle.pop_back();
      *reused = true;
      return e;
    }
    if (open < max_connections) {
      ++open;
      l.unlock();
      Result<std::unique_ptr<Endpoint>> e = Connect();
      if (!e.ok()) Drop();
      return e;
    }
    if (cv.wait_until(l, deadline) == std::cv_status::timeout) {
      return Status(Code::kTimedOut, "rdma " + address + ": every endpoint stayed busy");
    }
  }
}

void RdmaTransport::Impl::Release(std::unique_ptr<Endpoint> e) {
  {
    std::lock_guard<std::mutex> l(mu);
    idle.push_back(std::move(e));
  }
  cv.notify_one();
}

void RdmaTransport::Impl::Drop() {
  {
    std::lock_guard<std::mutex> l(mu);
    if (open > 0) --open;
  }
  cv.notify_one();
}

// Registers the iovecs: one region for all of them when they lie close
// together (the usual case: one caller buffer cut into stripes), else one per iovec.
Status RdmaTransport::Impl::Register(Op op, const std::vector<iovec>& iov,
                                     std::vector<std::shared_ptr<rdma::MemoryRegion>>* regions) {
  const uint64_t access = op == Op::kWrite ? FI_REMOTE_READ : FI_REMOTE_WRITE;
  regions->assign(iov.size(), nullptr);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  uint64_t total = 0;
  for (const iovec& v : iov) {
    if (v.iov_len == 0) continue;
    const uintptr_t b = reinterpret_cast<uintptr_t>(v.iov_base);
    lo = std::min(lo, b);
    hi = std::max(hi, b + v.iov_len);
    total += v.iov_len;
  }
  if (total == 0) return Status::Ok();
  if (hi - lo <= 2 * total + (2u << 20)) {
    CLF_ASSIGN_OR_RETURN(std::shared_ptr<rdma::MemoryRegion> r,
                         cache->Get(reinterpret_cast<void*>(lo), hi - lo, access));
    for (size_t i = 0; i < iov.size(); ++i) (*regions)[i] = r;
    return Status::Ok();
  }
  for (size_t i = 0; i < iov.size(); ++i) {
    if (iov[i].iov_len == 0) continue;
    CLF_ASSIGN_OR_RETURN((*regions)[i], cache->Get(iov[i].iov_base, iov[i].iov_len, access));
  }
  return Status::Ok();
}

// Sends one request message and waits for its reply; *replied once a reply
// arrived, *clean when it was well formed and the endpoint stays usable.
Status RdmaTransport::Impl::Exchange(Endpoint& ep, Message& m, bool* replied, bool* clean) {
  *clean = false;
  const Clock::time_point deadline = Deadline(timeout_ms);
  m.h.request_id = next_id.fetch_add(1, std::memory_order_relaxed);
  const size_t len = rdma::Encode(m, ep.send_buf(), rdma::kMaxMessageBytes);
  if (len == 0) return Status(Code::kInternal, "rdma: request does not fit a message");
  CLF_RETURN_IF_ERROR(ep.Send(len, deadline));
  CLF_ASSIGN_OR_RETURN(size_t n, ep.WaitRecv(deadline));
  *replied = true;
  Message r;
  CLF_RETURN_IF_ERROR(rdma::Decode(ep.recv_buf(), n, &r));
  CLF_RETURN_IF_ERROR(ep.PostRecv());
  if (r.h.op != (m.h.op | rdma::kReplyBit) || r.h.request_id != m.h.request_id) {
    return IoError("rdma " + address + ": reply does not match the request");
  }
  *clean = (r.h.flags & rdma::kFlagClosing) == 0;
  if (r.h.status != 0) {
    Status st(CodeFromWire(r.h.status), r.payload);
    if (!*clean) return st.WithContext("rdma " + address + " (endpoint closed)");
    return st;
  }
  return Status::Ok();
}

Status RdmaTransport::Impl::Call(Endpoint& ep, Op op, const ObjectRef& obj, const std::vector<Extent>& extents,
                                 const std::vector<iovec>& iov, bool sync, bool* healthy,
                                 bool* replied) {
  *healthy = false;
  *replied = false;
  const uint16_t wire_op = op == Op::kWrite  ? rdma::kWrite
                           : op == Op::kRead ? rdma::kRead
                                             : rdma::kSync;
  if (op == Op::kSync) {
    Message m;
    m.h.op = wire_op;
    m.h.handle = obj.handle;
    m.h.flags = frame::ObjectFlags(obj);
    bool clean = false;
    Status st = Exchange(ep, m, replied, &clean);
    *healthy = clean;
    return st;
  }
  Regions regions;  // held until the replies are in
  CLF_RETURN_IF_ERROR(Register(op, iov, &regions));
  CLF_ASSIGN_OR_RETURN(std::vector<Batch> batches, CutIntoBatches(extents, iov, regions));
  return SendBatches(ep, wire_op, obj, sync, batches, healthy, replied);
}

// One message per batch, in order, each waiting for its reply; the last one
// carries `sync`. Stops at the first error.
Status RdmaTransport::Impl::SendBatches(Endpoint& ep, uint16_t wire_op, const ObjectRef& obj,
                                        bool sync, std::vector<Batch>& batches, bool* healthy,
                                        bool* replied) {
  Status st;
  bool clean = true;
  for (size_t b = 0; b < batches.size() && st.ok(); ++b) {
    Message m;
    m.h.op = wire_op;
    m.h.handle = obj.handle;
    m.h.flags = ((sync && b + 1 == batches.size()) ? rdma::kFlagSync : 0) | frame::ObjectFlags(obj);
    m.extents = std::move(batches[b].extents);
    m.buffers = std::move(batches[b].buffers);
    bool got = false;
    st = Exchange(ep, m, &got, &clean);
    *replied = *replied || got;
  }
  *healthy = clean;
  return st;
}

Status RdmaTransport::Impl::Run(Op op, const ObjectRef& obj, const std::vector<Extent>& extents,
                                const std::vector<iovec>& iov, bool sync) {
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    CLF_ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> ep, Acquire(attempt > 0, &reused));
    bool healthy = false, replied = false;
    Status st = Call(*ep, op, obj, extents, iov, sync, &healthy, &replied);
    if (healthy) {
      Release(std::move(ep));
    } else {
      ep.reset();
      Drop();
    }
    if (st.ok() || healthy || replied || !reused || attempt > 0) return st;
    CLF_LOG_DEBUG("rdma {}: pooled endpoint failed ({}); retrying on a new one", address,
                  st.ToString());
  }
}

RdmaTransport::RdmaTransport(std::string address, std::string provider, std::string secret,
                             uint32_t timeout_ms, size_t max_connections, size_t cache_entries,
                             uint64_t cache_bytes)
    : impl_(std::make_unique<Impl>(std::move(address), std::move(provider), std::move(secret),
                                   timeout_ms, max_connections, cache_entries, cache_bytes)) {}

RdmaTransport::~RdmaTransport() = default;

const std::string& RdmaTransport::address() const { return impl_->address; }

std::string RdmaTransport::provider() const {
  std::lock_guard<std::mutex> l(impl_->domain_mu);
  return impl_->domain ? impl_->domain->provider() : std::string();
}

Status RdmaTransport::Probe() {
  bool reused = false;
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> e, impl_->Acquire(false, &reused));
  impl_->Release(std::move(e));
  return Status::Ok();
}

Status RdmaTransport::Write(const ObjectRef& obj, const std::vector<Extent>& extents,
                            const std::vector<iovec>& payload, bool sync) {
  return impl_->Run(Impl::Op::kWrite, obj, extents, payload, sync);
}

Status RdmaTransport::Read(const ObjectRef& obj, const std::vector<Extent>& extents,
                           const std::vector<iovec>& dest) {
  return impl_->Run(Impl::Op::kRead, obj, extents, dest, false);
}

Status RdmaTransport::Sync(const ObjectRef& obj) { return impl_->Run(Impl::Op::kSync, obj, {}, {}, false); }

RdmaTransport::CacheStats RdmaTransport::cache_stats() const {
  CacheStats s;
  std::lock_guard<std::mutex> l(impl_->domain_mu);
  if (impl_->cache) {
    s.hits = impl_->cache->hits();
    s.misses = impl_->cache->misses();
    s.entries = impl_->cache->entries();
  }
  return s;
}

}  // namespace clf::transport
