#include "server/data/rdma_listener.h"

#include <list>
#include <mutex>
#include <thread>

#include "common/config.h"
#include "common/log.h"
#include "common/transport/rdma_fabric.h"
#include "common/transport/tcp_protocol.h"

namespace clf::server {

using transport::rdma::Clock;
using transport::rdma::Endpoint;
using transport::rdma::Message;
using transport::rdma::RemoteBuf;
namespace rdma = transport::rdma;
namespace tcp = transport::tcp;

namespace {

Clock::time_point Deadline(uint32_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// The registered buffer of one connection: RDMA READ lands here, RDMA WRITE
// leaves from here. Re-registered only when it has to grow.
struct Bounce {
  std::string buf;
  std::shared_ptr<rdma::MemoryRegion> mr;
  // Ensures buf's storage [data, data + capacity) is registered and holds `n` bytes.
  Status Fit(rdma::Domain* d, size_t n) {
    if (buf.capacity() < n) buf.reserve(n);
    return Cover(d);
  }
  Status Cover(rdma::Domain* d) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
    if (mr && mr->Covers(p, buf.capacity(), FI_READ | FI_WRITE)) return Status::Ok();
    mr.reset();
    CLF_ASSIGN_OR_RETURN(mr, d->Register(buf.data(), buf.capacity(), FI_READ | FI_WRITE));
    return Status::Ok();
  }
  void Trim() {
    if (buf.capacity() > kKeepBytes) {
      mr.reset();
      std::string().swap(buf);
    }
  }
  static constexpr size_t kKeepBytes = 16u << 20;  // do not pin 64 MiB per idle endpoint
};

}  // namespace

struct RdmaDataListener::Impl {
  struct Conn {
    std::unique_ptr<Endpoint> ep;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  Impl(std::string a, std::string p, std::string s, transport::DataHandler* h, uint32_t t, size_t m)
      : address(std::move(a)),
        provider_setting(std::move(p)),
        secret(std::move(s)),
        handler(h),
        frame_timeout_ms(t),
        max_connections(m) {}

  Status Start();
  void Stop();
  void AcceptLoop();
  void Serve(Conn* c);
  Status Authenticate(Endpoint& ep);
  bool ServeRequest(Endpoint& ep, const Message& m, Bounce* bounce);
  bool SendReply(Endpoint& ep, const rdma::Header& req, const Status& st, bool closing,
                 std::string_view payload = {});
  void Reap(bool all);

  const std::string address, provider_setting, secret;
  transport::DataHandler* handler;
  const uint32_t frame_timeout_ms;
  const size_t max_connections;
  std::atomic<bool> stop{false};
  std::shared_ptr<rdma::Domain> domain;
  rdma::FidPtr<fid_eq> eq;
  rdma::FidPtr<fid_pep> pep;
  std::thread acceptor;
  mutable std::mutex mu;  // guards conns
  std::list<std::unique_ptr<Conn>> conns;
  bool started = false, stopped = false;
};

Status RdmaDataListener::Impl::Start() {
  std::string host, port;
  CLF_RETURN_IF_ERROR(tcp::SplitHostPort(address, &host, &port));
  if (host == "*") host = "0.0.0.0";
  Status last = Unavailable("rdma: no provider");
  for (const std::string& p : rdma::ProviderCandidates(provider_setting)) {
    Result<rdma::InfoPtr> info = rdma::GetInfo(p, host, port, true);
    if (!info.ok()) {
      last = info.status();
      continue;
    }
    rdma::InfoPtr listen_info(fi_dupinfo(info->get()));
    CLF_ASSIGN_OR_RETURN(domain, rdma::Domain::Open(std::move(*info)));
    fi_eq_attr eq_attr{};
    eq_attr.size = 64;
    eq_attr.wait_obj = FI_WAIT_UNSPEC;
    fid_eq* e = nullptr;
    int rc = fi_eq_open(domain->fabric(), &eq_attr, &e, nullptr);
    if (rc != 0) return rdma::FiError(rc, "fi_eq_open");
    eq.reset(e);
    fid_pep* pe = nullptr;
    rc = fi_passive_ep(domain->fabric(), listen_info.get(), &pe, nullptr);
    if (rc != 0) return rdma::FiError(rc, "fi_passive_ep");
    pep.reset(pe);
    if ((rc = fi_pep_bind(pe, &e->fid, 0)) != 0) return rdma::FiError(rc, "fi_pep_bind");
    if ((rc = fi_listen(pe)) != 0) return rdma::FiError(rc, "listen on " + address);
    started = true;
    acceptor = std::thread([this] { AcceptLoop(); });
    return Status::Ok();
  }
  return last;
}

void RdmaDataListener::Impl::Stop() {
  if (!started || stopped) return;
  stopped = true;
  stop = true;
  acceptor.join();
  Reap(true);
  pep.reset();
  eq.reset();
  domain.reset();
}

void RdmaDataListener::Impl::Reap(bool all) {
  std::list<std::unique_ptr<Conn>> finished;
  {
    std::lock_guard<std::mutex> l(mu);
    for (auto it = conns.begin(); it != conns.end();) {
      if (all || (*it)->done) {
        finished.push_back(std::move(*it));
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    c->thread.join();
    c->ep.reset();
  }
}

void RdmaDataListener::Impl::AcceptLoop() {
  while (!stop) {
    uint32_t event = 0;
    alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 256];
    ssize_t n = fi_eq_sread(eq.get(), &event, buf, sizeof buf, 100, 0);
    if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) continue;
    if (n == -FI_EAVAIL) {
      fi_eq_err_entry err{};
      fi_eq_readerr(eq.get(), &err, 0);
      CLF_LOG_WARN("rdma listener: {}", fi_strerror(err.err));
      continue;
    }
    if (n < 0) {
      CLF_LOG_WARN("rdma listener: fi_eq_sread: {}", fi_strerror(static_cast<int>(-n)));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (event != FI_CONNREQ) continue;
    auto* entry = reinterpret_cast<fi_eq_cm_entry*>(buf);
    rdma::InfoPtr info(entry->info);
    Reap(false);
    size_t open = 0;
    {
      std::lock_guard<std::mutex> l(mu);
      open = conns.size();
    }
    if (open >= max_connections) {
      CLF_LOG_WARN("rdma listener: {} endpoints open; refusing one more", open);
      fi_reject(pep.get(), info->handle, nullptr, 0);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->ep = std::make_unique<Endpoint>(domain, &stop);
    if (Status st = c->ep->Open(info.get()); !st.ok()) {
      CLF_LOG_WARN("rdma listener: cannot open an endpoint: {}", st.ToString());
      c->ep.reset();
      fi_reject(pep.get(), info->handle, nullptr, 0);
      continue;
    }
    Conn* raw = c.get();
    c->thread = std::thread([this, raw] { Serve(raw); });
    std::lock_guard<std::mutex> l(mu);
    conns.push_back(std::move(c));
  }
}

bool RdmaDataListener::Impl::SendReply(Endpoint& ep, const rdma::Header& req, const Status& st,
                                       bool closing, std::string_view payload) {
  Message r;
  r.h.op = req.op | rdma::kReplyBit;
  r.h.request_id = req.request_id;
  r.h.handle = req.handle;
  r.h.status = static_cast<uint32_t>(st.code());
  r.h.flags = closing ? rdma::kFlagClosing : 0;
  r.payload = st.ok() ? std::string(payload)
                      : std::string(std::string_view(st.message()).substr(0, rdma::kMaxErrorBytes));
  const size_t len = rdma::Encode(r, ep.send_buf(), rdma::kMaxMessageBytes);
  return len != 0 && ep.Send(len, Deadline(frame_timeout_ms)).ok();
}

Status RdmaDataListener::Impl::Authenticate(Endpoint& ep) {
  const Clock::time_point deadline = Deadline(frame_timeout_ms);
  tcp::Nonce server_nonce;
  CLF_RETURN_IF_ERROR(tcp::RandomNonce(&server_nonce));
  Message ch;
  ch.h.op = rdma::kChallenge;
  ch.payload.assign(reinterpret_cast<const char*>(server_nonce.data()), server_nonce.size());
  const size_t len = rdma::Encode(ch, ep.send_buf(), rdma::kMaxMessageBytes);
  CLF_RETURN_IF_ERROR(ep.Send(len, deadline));
  CLF_ASSIGN_OR_RETURN(size_t n, ep.WaitRecv(deadline));
  Message a;
  Status st = rdma::Decode(ep.recv_buf(), n, &a);
  if (st.ok() && (a.h.op != rdma::kAuth || !a.extents.empty() || !a.buffers.empty() ||
                  a.payload.size() != tcp::kNonceBytes + tcp::kMacBytes)) {
    st = Status(Code::kUnauthenticated, "authenticate first");
  }
  a.h.op = rdma::kAuthOk;  // every answer here is an authentication reply
  if (!st.ok()) {
    SendReply(ep, a.h, st, true);
    return st;
  }
  tcp::Nonce client_nonce;
  std::memcpy(client_nonce.data(), a.payload.data(), client_nonce.size());
  const tcp::Mac want = tcp::AuthMac(secret, rdma::kClientLabel, server_nonce, client_nonce);
  if (!tcp::MacEqual(reinterpret_cast<const uint8_t*>(a.payload.data()) + tcp::kNonceBytes,
                     want.data())) {
    st = Status(Code::kUnauthenticated, "wrong cluster secret");
    SendReply(ep, a.h, st, true);
    return st;
  }
  CLF_RETURN_IF_ERROR(ep.PostRecv());
  const tcp::Mac proof = tcp::AuthMac(secret, rdma::kServerLabel, client_nonce, server_nonce);
  if (!SendReply(ep, a.h, Status::Ok(), false,
                 std::string_view(reinterpret_cast<const char*>(proof.data()), proof.size()))) {
    return Unavailable("rdma: client went away during authentication");
  }
  return Status::Ok();
}

void RdmaDataListener::Impl::Serve(Conn* c) {
  Endpoint& ep = *c->ep;
  Status st = ep.Accept(Deadline(frame_timeout_ms));
  if (st.ok()) st = Authenticate(ep);
  if (!st.ok()) {
    if (st.code() != Code::kCancelled) CLF_LOG_WARN("rdma: endpoint refused: {}", st.ToString());
  } else {
    Bounce bounce;
    for (;;) {
      // Idle between requests: no deadline (stop and disconnects still end the wait).
      Result<size_t> n = ep.WaitRecv(Clock::time_point::max());
      if (!n.ok()) {
        if (n.status().code() == Code::kInvalid) {
          CLF_LOG_WARN("rdma: {}; closing", n.status().message());
        }
        break;
      }
      Message m;
      Status d = rdma::Decode(ep.recv_buf(), *n, &m);
      if (!d.ok()) {
        CLF_LOG_WARN("rdma: {}; closing", d.message());
        SendReply(ep, m.h, d, true);
        break;
      }
      if (!ep.PostRecv().ok()) break;
      bool keep = false;
      try {
        keep = ServeRequest(ep, m, &bounce);
      } catch (const std::exception& e) {
        CLF_LOG_ERROR("rdma: request failed: {}", e.what());
      }
      if (!keep) break;
      bounce.Trim();
    }
    c->ep.reset();  // before the bounce buffer's registration goes
  }
  c->ep.reset();  // closes the endpoint now: the peer sees the shutdown
  c->done = true;
}

bool RdmaDataListener::Impl::ServeRequest(Endpoint& ep, const Message& m, Bounce* bounce) {
  const Clock::time_point deadline = Deadline(frame_timeout_ms);
  const rdma::Header& q = m.h;
  auto fail = [&](const Status& why) {
    CLF_LOG_WARN("rdma: request {}: {}; closing", q.request_id, why.ToString());
    SendReply(ep, q, why, true);
    return false;
  };
  if (q.op != rdma::kWrite && q.op != rdma::kRead && q.op != rdma::kSync) {
    return fail(Invalid("unknown op " + std::to_string(q.op)));
  }
  if (!m.payload.empty()) return fail(Invalid("inline payload on a request"));
  ObjectRef obj;
  if (Status o = transport::frame::GetObject(q.handle, q.flags, &obj); !o.ok()) return fail(o);
  // Servers forward a copy's writes on the TCP data channel (as servers);
  // the RDMA channel's connections are clients'.
  if (obj.forwarded) {
    return fail(Status(Code::kPermission, "a forwarded copy's request is for servers only (TCP data channel)"));
  }
  if (q.op == rdma::kSync) {
    if (!m.extents.empty() || !m.buffers.empty()) return fail(Invalid("extents on a sync"));
    return SendReply(ep, q, handler->Sync(obj), false);
  }
  // The buffers must name exactly the extents' bytes, each piece non-empty.
  uint64_t named = 0;
  for (const RemoteBuf& b : m.buffers) {
    if (b.len == 0 || b.len > kMaxIoBytes || b.addr + b.len < b.addr) {
      return fail(Invalid("bad remote buffer (empty, oversized or wrapping)"));
    }
    named += b.len;
    if (named > kMaxIoBytes) return fail(Status(Code::kTooBig, "buffers larger than 64 MiB"));
  }
  Result<uint64_t> total = handler->CheckExtents(m.extents);
  // Nothing else of this request is in flight: the endpoint stays usable.
  if (!total.ok()) return SendReply(ep, q, total.status(), false);
  if (*total != named) return fail(Invalid("buffers do not match the extents"));
  if (Status f = bounce->Fit(domain.get(), *total); !f.ok()) {
    return SendReply(ep, q, f.WithContext("rdma: register"), false);
  }
  if (q.op == rdma::kWrite) {
    bounce->buf.resize(*total);
    uint8_t* p = reinterpret_cast<uint8_t*>(bounce->buf.data());
    if (Status r = ep.Rma(false, p, bounce->mr->desc, m.buffers, deadline); !r.ok()) {
      return fail(r.WithContext("RDMA read from the client"));
    }
    Status w = handler->Write(obj, m.extents, bounce->buf, (q.flags & rdma::kFlagSync) != 0);
    return SendReply(ep, q, w, false);
  }
  Status r = handler->Read(obj, m.extents, &bounce->buf);
  if (r.ok() && bounce->buf.size() != *total) r = Status(Code::kInternal, "read size mismatch");
  if (r.ok()) r = bounce->Cover(domain.get());  // the handler may have moved the storage
  if (!r.ok()) return SendReply(ep, q, r, false);
  uint8_t* p = reinterpret_cast<uint8_t*>(bounce->buf.data());
  if (Status w = ep.Rma(true, p, bounce->mr->desc, m.buffers, deadline); !w.ok()) {
    return fail(w.WithContext("RDMA write to the client"));
  }
  return SendReply(ep, q, Status::Ok(), false);
}

RdmaDataListener::RdmaDataListener(std::string address, std::string provider, std::string secret,
                                   transport::DataHandler* handler, uint32_t frame_timeout_ms,
                                   size_t max_connections)
    : impl_(std::make_unique<Impl>(std::move(address), std::move(provider), std::move(secret),
                                   handler, frame_timeout_ms, max_connections)) {}

RdmaDataListener::~RdmaDataListener() { Stop(); }

Status RdmaDataListener::Start() { return impl_->Start(); }
void RdmaDataListener::Stop() { impl_->Stop(); }
std::string RdmaDataListener::address() const { return impl_->address; }

std::string RdmaDataListener::provider() const {
  return impl_->domain ? impl_->domain->provider() : std::string();
}

size_t RdmaDataListener::connections() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  size_t n = 0;
  for (const auto& c : impl_->conns) n += c->done ? 0 : 1;
  return n;
}

}  // namespace clf::server
