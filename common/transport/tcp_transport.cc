#include "common/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "common/log.h"
#include "common/transport/tcp_protocol.h"
#include "common/transport/zero_copy.h"

namespace clf::transport {

using tcp::Clock;
using tcp::FrameHeader;

uint64_t TotalBytes(const std::vector<iovec>& iov) {
  uint64_t t = 0;
  for (const iovec& v : iov) t += v.iov_len;
  return t;
}

namespace {

Code CodeFromWire(uint32_t v) {
  if (v > static_cast<uint32_t>(Code::kLastCode)) return Code::kIo;
  return static_cast<Code>(v);
}

Clock::time_point Deadline(uint32_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

iovec Iov(const void* p, size_t n) { return iovec{const_cast<void*>(p), n}; }

// Reads an error reply's message (bounded).
Status ReadError(tcp::Link fd, const FrameHeader& r, Clock::time_point deadline) {
  if (r.payload_len > tcp::kMaxErrorBytes) return IoError("data channel: oversized error reply");
  std::string msg(r.payload_len, '\0');
  CLF_RETURN_IF_ERROR(tcp::ReadFull(fd, msg.data(), msg.size(), deadline));
  return Status(CodeFromWire(r.status), msg);
}

}  // namespace

// ------------------------------------------------------------------ client

TcpTransport::Conn::~Conn() {
  if (ssl != nullptr) SSL_free(ssl);
  if (fd >= 0) ::close(fd);
}

TcpTransport::TcpTransport(std::string address, std::string secret, uint32_t timeout_ms,
                           size_t max_connections)
    : TcpTransport(std::move(address), DataChannelAuth{std::move(secret), nullptr, true, {}},
                   timeout_ms, max_connections) {}

TcpTransport::TcpTransport(std::string address, DataChannelAuth auth, uint32_t timeout_ms,
                           size_t max_connections)
    : address_(std::move(address)),
      auth_(std::move(auth)),
      timeout_ms_(timeout_ms),
      max_connections_(max_connections == 0 ? 1 : max_connections) {}

TcpTransport::~TcpTransport() = default;

Result<std::unique_ptr<TcpTransport::Conn>> TcpTransport::Connect() {
  CLF_ASSIGN_OR_RETURN(int fd, tcp::Dial(address_, timeout_ms_));
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  CLF_RETURN_IF_ERROR(auth_.tls ? AuthenticateTls(*c) : AuthenticateSecret(*c));
  return c;
}

Status TcpTransport::AuthenticateTls(Conn& c) {
  const Clock::time_point deadline = Deadline(timeout_ms_);
  c.ssl = SSL_new(auth_.tls.get());
  if (c.ssl == nullptr) return Internal("data channel: SSL_new: " + OpenSslErrors());
  CLF_RETURN_IF_ERROR(tcp::AttachTls(c.ssl, c.fd));
  SSL_set_connect_state(c.ssl);
  // The server's certificate must name the host we dialled (IP or DNS SAN).
  std::string host, port;
  CLF_RETURN_IF_ERROR(tcp::SplitHostPort(address_, &host, &port));
  in6_addr ip;
  const bool is_ip =
      ::inet_pton(AF_INET, host.c_str(), &ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), &ip) == 1;
  const int named = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.ssl), host.c_str())
                          : SSL_set1_host(c.ssl, host.c_str());
  if (named != 1) return Internal("data channel: cannot set the expected host " + host);
  if (!is_ip) SSL_set_tlsext_host_name(c.ssl, host.c_str());
  const tcp::Link link{c.fd, c.ssl};
  CLF_RETURN_IF_ERROR(tcp::TlsHandshake(link, deadline).WithContext("data channel " + address_));
  if (RoleOfCertificate(SSL_get0_peer_certificate(c.ssl)) != Role::kServer) {
    return Status(
        Code::kUnauthenticated,
        "data channel " + address_ + ": the peer's certificate is not a server certificate");
  }
  uint8_t hb[tcp::kHeaderBytes];
  FrameHeader h;
  CLF_RETURN_IF_ERROR(
      tcp::ReadFull(link, hb, sizeof hb, deadline).WithContext("data channel " + address_));
  CLF_RETURN_IF_ERROR(tcp::Decode(hb, &h));
  if (h.op != (tcp::kAuthOk | tcp::kReplyBit)) {
    return IoError("data channel " + address_ + ": expected an authentication reply");
  }
  if (h.status != 0) return ReadError(link, h, deadline).WithContext("data channel " + address_);
  if (h.payload_len != 0) return IoError("data channel: bad authentication reply");
  if ((h.flags & tcp::kFlagPlaintext) != 0) {
    CLF_RETURN_IF_ERROR(tcp::TlsUnwrap(link, deadline).WithContext("data channel " + address_));
    SSL_free(c.ssl);
    c.ssl = nullptr;
  }
  return Status::Ok();
}

Status TcpTransport::AuthenticateSecret(Conn& c) {
  const int fd = c.fd;
  const std::string& secret = auth_.secret;
  const Clock::time_point deadline = Deadline(timeout_ms_);
  uint8_t hb[tcp::kHeaderBytes];
  FrameHeader h;
  CLF_RETURN_IF_ERROR(tcp::ReadFull(fd, hb, sizeof hb, deadline));
  CLF_RETURN_IF_ERROR(tcp::Decode(hb, &h));
  if (h.op != tcp::kChallenge || h.payload_len != tcp::kNonceBytes) {
    return IoError("data channel " + address_ + ": expected a challenge");
  }
  tcp::Nonce server_nonce, client_nonce;
  CLF_RETURN_IF_ERROR(tcp::ReadFull(fd, server_nonce.data(), server_nonce.size(), deadline));
  CLF_RETURN_IF_ERROR(tcp::RandomNonce(&client_nonce));
  tcp::Mac mac = tcp::AuthMac(secret, tcp::kClientLabel, server_nonce, client_nonce);
  FrameHeader a;
  a.op = tcp::kAuth;
  a.payload_len = tcp::kNonceBytes + tcp::kMacBytes;
  tcp::HeaderBytes ab = tcp::Encode(a);
  CLF_RETURN_IF_ERROR(tcp::WritevFull(
      fd, {Iov(ab.data(), ab.size()), Iov(client_nonce.data(), client_nonce.size()),
           Iov(mac.data(), mac.size())},
      deadline));
  CLF_RETURN_IF_ERROR(tcp::ReadFull(fd, hb, sizeof hb, deadline));
  CLF_RETURN_IF_ERROR(tcp::Decode(hb, &h));
  if (h.op != (tcp::kAuthOk | tcp::kReplyBit)) {
    return IoError("data channel " + address_ + ": expected an authentication reply");
  }
  if (h.status != 0) return ReadError(fd, h, deadline).WithContext("data channel " + address_);
  if (h.payload_len != tcp::kMacBytes) return IoError("data channel: bad authentication reply");
  tcp::Mac proof;
  CLF_RETURN_IF_ERROR(tcp::ReadFull(fd, proof.data(), proof.size(), deadline));
  tcp::Mac want = tcp::AuthMac(secret, tcp::kServerLabel, client_nonce, server_nonce);
  if (!tcp::MacEqual(proof.data(), want.data())) {
    return Status(Code::kUnauthenticated,
                  "data channel " + address_ + ": the server does not hold the cluster secret");
  }
  return Status::Ok();
}

Result<std::unique_ptr<TcpTransport::Conn>> TcpTransport::Acquire(bool fresh, bool* reused) {
  std::unique_lock<std::mutex> l(mu_);
  *reused = false;
  if (fresh) {
    // A retry after a pooled connection failed: the other idle ones are likely stale too.
    open_ -= idle_.size();
    idle_.clear();
  }
  for (;;) {
    if (!fresh && !idle_.empty()) {
      std::unique_ptr<Conn> c = std::move(idle_.back());
      idle_.pop_back();
      *reused = true;
      return c;
    }
    if (open_ < max_connections_) {
      ++open_;
      l.unlock();
      Result<std::unique_ptr<Conn>> c = Connect();
      if (!c.ok()) Drop();
      return c;
    }
    // Every connection is busy with a call, and each call ends within its
    // own deadline unless its bytes keep moving: wait for one (a slow link
    // slows this caller down; a dead server fails the busy calls first).
    cv_.wait(l);
  }
}

void TcpTransport::Release(std::unique_ptr<Conn> c) {
  {
    std::lock_guard<std::mutex> l(mu_);
    idle_.push_back(std::move(c));
  }
  cv_.notify_one();
}

void TcpTransport::Drop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (open_ > 0) --open_;
  }
  cv_.notify_one();
}

Status TcpTransport::Probe() {
  bool reused = false;
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<Conn> c, Acquire(false, &reused));
  Release(std::move(c));
  return Status::Ok();
}

Status TcpTransport::Call(Conn& c, Op op, const ObjectRef& obj, const std::vector<Extent>& extents,
                          const std::vector<iovec>& iov, bool sync, uint32_t sched_tag,
                          bool* healthy, bool* replied, const PipeDest* pipe) {
  *healthy = false;
  *replied = false;
  Clock::time_point deadline = Deadline(timeout_ms_);
  FrameHeader q;
  q.op = op == Op::kWrite     ? tcp::kWrite
         : op == Op::kRead    ? tcp::kRead
         : op == Op::kTruncate ? tcp::kTruncate
                               : tcp::kSync;
  q.flags = (sync ? tcp::kFlagSync : 0) | frame::ObjectFlags(obj);
  q.request_id = next_id_.fetch_add(1, std::memory_order_relaxed);
  q.handle = obj.handle;
  q.extent_count = static_cast<uint32_t>(extents.size());
  q.aux = op == Op::kRead ? sched_tag : 0;
  const uint64_t total = pipe != nullptr ? pipe->length : TotalBytes(iov);
  q.payload_len = op == Op::kWrite ? total : 0;
  tcp::HeaderBytes qb = tcp::Encode(q);
  std::vector<iovec> out;
  out.reserve(2 + (op == Op::kWrite ? iov.size() : 0));
  out.push_back(Iov(qb.data(), qb.size()));
  if (!extents.empty()) out.push_back(Iov(extents.data(), extents.size() * sizeof(Extent)));
  if (op == Op::kWrite) out.insert(out.end(), iov.begin(), iov.end());
  const tcp::Link link{c.fd, c.ssl};
  CLF_RETURN_IF_ERROR(tcp::WritevFull(link, std::move(out), deadline));

  // Each phase has the whole deadline, moving with its progress: a request
  // that took long to send over a slow link is not late for its answer.
  deadline = Deadline(timeout_ms_);
  uint8_t rb[tcp::kHeaderBytes];
  CLF_RETURN_IF_ERROR(tcp::ReadFull(link, rb, sizeof rb, deadline));
  deadline = Deadline(timeout_ms_);
  *replied = true;
  FrameHeader r;
  CLF_RETURN_IF_ERROR(tcp::Decode(rb, &r));
  if (r.op != (q.op | tcp::kReplyBit) || r.request_id != q.request_id) {
    return IoError("data channel " + address_ + ": reply does not match the request");
  }
  if (r.status != 0) {
    Status st = ReadError(link, r, deadline);
    *healthy = (r.flags & tcp::kFlagClosing) == 0 && st.code() != Code::kIo;
    return st;
  }
  if (op == Op::kRead) {
    if (r.payload_len != total) return IoError("data channel " + address_ + ": short read reply");
    if (pipe != nullptr && c.ssl == nullptr) {
      Status st;
      switch (SpliceSocketToPipe(c.fd, pipe->w, pipe->r, total, deadline, -1, pipe->bytes, &st)) {
        case SpliceOutcome::kDone:
          *pipe->in_pipe = true;
          break;
        case SpliceOutcome::kBuffered:
          *pipe->in_pipe = false;
          break;
        default:
          return st;
      }
    } else if (pipe != nullptr) {
      *pipe->in_pipe = false;
      pipe->bytes->resize(total);
      CLF_RETURN_IF_ERROR(tcp::ReadFull(link, pipe->bytes->data(), total, deadline));
    } else {
      CLF_RETURN_IF_ERROR(tcp::ReadvFull(link, iov, deadline));
    }
  } else if (r.payload_len != 0) {
    return IoError("data channel " + address_ + ": unexpected reply payload");
  }
  *healthy = true;
  return Status::Ok();
}

Status TcpTransport::Run(Op op, const ObjectRef& obj, const std::vector<Extent>& extents,
                         const std::vector<iovec>& iov, bool sync, uint32_t sched_tag,
                         const PipeDest* pipe) {
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    CLF_ASSIGN_OR_RETURN(std::unique_ptr<Conn> c, Acquire(attempt > 0, &reused));
    bool healthy = false, replied = false;
    Status st = Call(*c, op, obj, extents, iov, sync, sched_tag, &healthy, &replied, pipe);
    if (healthy) {
      Release(std::move(c));
    } else {
      c.reset();
      Drop();
    }
    // Retry only a request that died on a pooled connection before any answer:
    // the server restarted or closed an idle connection.
    if (st.ok() || healthy || replied || !reused || attempt > 0) return st;
    CLF_LOG_DEBUG("data channel {}: pooled connection failed ({}); retrying on a new one",
                  address_, st.ToString());
  }
}

Status TcpTransport::Write(const ObjectRef& obj, const std::vector<Extent>& extents,
                           const std::vector<iovec>& payload, bool sync) {
  return Run(Op::kWrite, obj, extents, payload, sync);
}

Status TcpTransport::Read(const ObjectRef& obj, const std::vector<Extent>& extents,
                          const std::vector<iovec>& dest) {
  return Run(Op::kRead, obj, extents, dest, false);
}

Status TcpTransport::Sync(const ObjectRef& obj) { return Run(Op::kSync, obj, {}, {}, false); }

Status TcpTransport::Truncate(const ObjectRef& obj, uint64_t size) {
  return Run(Op::kTruncate, obj, {Extent{size, 0}}, {}, false);
}

Status TcpTransport::ReadTagged(const ObjectRef& obj, const std::vector<Extent>& extents,
                                const std::vector<iovec>& dest, uint32_t sched_tag) {
  return Run(Op::kRead, obj, extents, dest, false, sched_tag);
}

Status TcpTransport::ReadToPipe(const ObjectRef& obj, const std::vector<Extent>& extents, uint64_t length,
                                int pipe_w, int pipe_r, uint32_t sched_tag, bool* in_pipe,
                                std::string* bytes) {
  *in_pipe = false;
  const PipeDest dest{pipe_w, pipe_r, length, in_pipe, bytes};
  return Run(Op::kRead, obj, extents, {}, false, sched_tag, &dest);
}

// ------------------------------------------------------------------ server

TcpDataListener::TcpDataListener(std::string address, std::string secret, DataHandler* handler,
                                 uint32_t frame_timeout_ms, size_t max_connections)
    : TcpDataListener(std::move(address), DataChannelAuth{std::move(secret), nullptr, true, {}},
                      handler, frame_timeout_ms, max_connections) {}

TcpDataListener::TcpDataListener(std::string address, DataChannelAuth auth, DataHandler* handler,
                                 uint32_t frame_timeout_ms, size_t max_connections)
    : address_(std::move(address)),
      auth_(std::move(auth)),
      handler_(handler),
      frame_timeout_ms_(frame_timeout_ms),
      max_connections_(max_connections) {}

TcpDataListener::~TcpDataListener() { Stop(); }

Status TcpDataListener::Start() {
  std::string host, port;
  CLF_RETURN_IF_ERROR(tcp::SplitHostPort(address_, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host == "0.0.0.0" || host == "*" ? nullptr : host.c_str(), port.c_str(),
                         &hints, &res);
  if (rc != 0) return Unavailable("resolve " + address_ + ": " + ::gai_strerror(rc));
  Status last = Unavailable("no address for " + address_);
  for (addrinfo* ai = res; ai != nullptr && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      last = FromErrno(errno, "data channel: listen on " + address_);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) return last;
  if (::pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return FromErrno(errno, "pipe2");
  started_ = true;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void TcpDataListener::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  char b = 1;
  if (::write(stop_pipe_[1], &b, 1) != 1) CLF_LOG_WARN("data channel: cannot signal stop");
  acceptor_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
  Reap(true);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

size_t TcpDataListener::connections() const {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  for (const auto& c : conns_) n += c->done ? 0 : 1;
  return n;
}

void TcpDataListener::Reap(bool all) {
  std::list<std::unique_ptr<Conn>> finished;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (all || (*it)->done) {
        finished.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) c->thread.join();
}

void TcpDataListener::AcceptLoop() {
  for (;;) {
    if (!tcp::WaitReadable(listen_fd_, stop_pipe_[0], Clock::time_point::max())) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      CLF_LOG_WARN("data channel: accept: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // EMFILE and the like
      continue;
    }
    Reap(false);
    std::lock_guard<std::mutex> l(mu_);
    if (conns_.size() >= max_connections_) {
      CLF_LOG_WARN("data channel: {} connections open; refusing one more", conns_.size());
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    Conn* raw = c.get();
    c->thread = std::thread([this, raw] { Serve(raw); });
    conns_.push_back(std::move(c));
  }
}

namespace {

// Sends a reply frame; best effort (a failed send closes the connection anyway).
bool SendReply(tcp::Link fd, const FrameHeader& req, const Status& st, bool closing,
               std::string_view payload, uint32_t timeout_ms) {
  FrameHeader r;
  r.op = req.op | tcp::kReplyBit;
  r.request_id = req.request_id;
  r.handle = req.handle;
  r.status = static_cast<uint32_t>(st.code());
  r.flags = closing ? tcp::kFlagClosing : 0;
  std::string_view body = payload;
  if (!st.ok()) body = std::string_view(st.message()).substr(0, tcp::kMaxErrorBytes);
  r.payload_len = body.size();
  tcp::HeaderBytes hb = tcp::Encode(r);
  std::vector<iovec> iov{Iov(hb.data(), hb.size())};
  if (!body.empty()) iov.push_back(Iov(body.data(), body.size()));
  return tcp::WritevFull(fd, std::move(iov), Deadline(timeout_ms)).ok();
}

}  // namespace

Result<Role> TcpDataListener::AuthenticateTls(Conn* c) {
  const Clock::time_point deadline = Deadline(frame_timeout_ms_);
  c->ssl = SSL_new(auth_.tls.get());
  if (c->ssl == nullptr) return Internal("data channel: SSL_new: " + OpenSslErrors());
  CLF_RETURN_IF_ERROR(tcp::AttachTls(c->ssl, c->fd));
  SSL_set_accept_state(c->ssl);
  const tcp::Link link{c->fd, c->ssl};
  CLF_RETURN_IF_ERROR(tcp::TlsHandshake(link, deadline, stop_pipe_[0]));
  FrameHeader a;
  a.op = tcp::kAuthOk;
  // Clients and servers (the role in the certificate's OU) may move data; a
  // certificate of the cluster CA without a role may not.
  const Role role = RoleOfCertificate(SSL_get0_peer_certificate(c->ssl));
  if (role == Role::kNone) {
    Status st(Code::kUnauthenticated, "the client certificate names no role (OU client or server)");
    SendReply(link, a, st, true, {}, frame_timeout_ms_);
    return st;
  }
  FrameHeader r;
  r.op = tcp::kAuthOk | tcp::kReplyBit;
  r.flags = auth_.encrypt_data ? 0 : tcp::kFlagPlaintext;
  tcp::HeaderBytes rb = tcp::Encode(r);
  CLF_RETURN_IF_ERROR(tcp::WritevFull(link, {Iov(rb.data(), rb.size())}, deadline));
  if (!auth_.encrypt_data) {
    CLF_RETURN_IF_ERROR(tcp::TlsUnwrap(link, deadline, stop_pipe_[0]));
    SSL_free(c->ssl);
    c->ssl = nullptr;
  }
  return role;
}

Result<Role> TcpDataListener::Authenticate(int fd) {
  const std::string& secret = auth_.secret;
  const Clock::time_point deadline = Deadline(frame_timeout_ms_);
  tcp::Nonce server_nonce;
  CLF_RETURN_IF_ERROR(tcp::RandomNonce(&server_nonce));
  FrameHeader ch;
  ch.op = tcp::kChallenge;
  ch.payload_len = server_nonce.size();
  tcp::HeaderBytes chb = tcp::Encode(ch);
  CLF_RETURN_IF_ERROR(tcp::WritevFull(
      fd, {Iov(chb.data(), chb.size()), Iov(server_nonce.data(), server_nonce.size())}, deadline));
  uint8_t hb[tcp::kHeaderBytes];
  CLF_RETURN_IF_ERROR(tcp::ReadFull(fd, hb, sizeof hb, deadline, stop_pipe_[0]));
  FrameHeader a;
  Status st = tcp::Decode(hb, &a);
  if (st.ok() && (a.op != tcp::kAuth || a.extent_count != 0 ||
                  a.payload_len != tcp::kNonceBytes + tcp::kMacBytes)) {
    st = Status(Code::kUnauthenticated, "authenticate first");
  }
  a.op = tcp::kAuthOk;  // every answer here is an authentication reply
  if (!st.ok()) {
    SendReply(fd, a, st, true, {}, frame_timeout_ms_);
    return st;
  }
  tcp::Nonce client_nonce;
  tcp::Mac mac;
  CLF_RETURN_IF_ERROR(tcp::ReadvFull(
      fd, {Iov(client_nonce.data(), client_nonce.size()), Iov(mac.data(), mac.size())}, deadline,
      stop_pipe_[0]));
  // The clients' secret, or the servers' (a server forwarding a copy's write).
  Role role = Role::kNone;
  const std::string* proved = nullptr;
  for (auto [candidate, as] : {std::pair{&secret, Role::kClient},
                               std::pair{&auth_.server_secret, Role::kServer}}) {
    if (candidate->empty()) continue;
    tcp::Mac want = tcp::AuthMac(*candidate, tcp::kClientLabel, server_nonce, client_nonce);
    if (tcp::MacEqual(mac.data(), want.data()) && role == Role::kNone) {
      role = as;
      proved = candidate;
    }
  }
  if (role == Role::kNone) {
    st = Status(Code::kUnauthenticated, "wrong cluster secret");
    SendReply(fd, a, st, true, {}, frame_timeout_ms_);
    return st;
  }
  tcp::Mac proof = tcp::AuthMac(*proved, tcp::kServerLabel, client_nonce, server_nonce);
  if (!SendReply(fd, a, Status::Ok(), false,
                 std::string_view(reinterpret_cast<const char*>(proof.data()), proof.size()),
                 frame_timeout_ms_)) {
    return Unavailable("data channel: client went away during authentication");
  }
  return role;
}

void TcpDataListener::Serve(Conn* c) {
  const int fd = c->fd;
  Result<Role> auth = auth_.tls ? AuthenticateTls(c) : Authenticate(fd);
  if (!auth.ok()) {
    CLF_LOG_WARN("data channel: connection refused: {}", auth.status().ToString());
  } else {
    const tcp::Link link{fd, c->ssl};
    std::string buf;
    SplicePipe pipe;  // opened on the first zero-copy request
    for (;;) {
      // Idle between frames: wait without a deadline (persistent connections).
      if (!tcp::WaitReadable(link, stop_pipe_[0], Clock::time_point::max())) break;
      bool keep = false;
      try {
        keep = ServeDataFrame(link, handler_, frame_timeout_ms_, stop_pipe_[0], &buf,
                              *auth == Role::kServer,
                              c->ssl == nullptr ? &pipe : nullptr);
      } catch (const std::exception& e) {
        CLF_LOG_ERROR("data channel: request failed: {}", e.what());
      }
      if (!keep) break;
      if (buf.capacity() > (4u << 20)) std::string().swap(buf);  // do not pin 64 MiB per idle connection
    }
  }
  if (c->ssl != nullptr) {
    SSL_free(c->ssl);
    c->ssl = nullptr;
  }
  ::close(fd);
  c->done = true;
}

namespace {

// One request frame being served: the connection, the decoded header, and
// what its reply needs. Each step's bool is ServeDataFrame's (false: close).
struct FrameCall {
  tcp::Link fd;
  DataHandler* handler;
  uint32_t frame_timeout_ms;
  int stop;
  std::string* buf;
  Clock::time_point deadline;  // of the header and the extents
  FrameHeader q;

  bool Reply(const Status& st, std::string_view payload = {}) const {
    return SendReply(fd, q, st, false, payload, frame_timeout_ms);
  }
  // A request refused after its header: answered, then the connection closes.
  bool Fail(const Status& why) const {
    CLF_LOG_WARN("data channel: request {}: {}; closing", q.request_id, why.ToString());
    SendReply(fd, q, why, true, {}, frame_timeout_ms);
    return false;
  }
};

// Reads and decodes the header into call->q. False: the peer closed or
// stalled, or the header was malformed (answered).
bool ReadFrameHeader(FrameCall* call) {
  uint8_t hb[tcp::kHeaderBytes];
  Status st = tcp::ReadFull(call->fd, hb, sizeof hb, call->deadline, call->stop);
  if (st.code() == Code::kTimedOut) {
    CLF_LOG_WARN("data channel: peer stalled mid-header; closing");
    return false;
  }
  if (!st.ok()) return false;  // peer closed (or stopping)
  if (Status d = tcp::Decode(hb, &call->q); !d.ok()) {
    CLF_LOG_WARN("data channel: {}; closing", d.message());
    SendReply(call->fd, call->q, d, true, {}, call->frame_timeout_ms);
    return false;
  }
  return true;
}

// The header's op, counts and sizes against the limits, and the object it
// names; a forwarded copy's request or a truncate only from a server.
Status CheckFrame(const FrameHeader& q, bool from_server, ObjectRef* obj) {
  if (q.op != tcp::kWrite && q.op != tcp::kRead && q.op != tcp::kSync && q.op != tcp::kTruncate) {
    return Invalid("unknown op " + std::to_string(q.op));
  }
  if (q.extent_count > kMaxExtents) return Status(Code::kTooBig, "too many extents");
  if (q.payload_len > kMaxIoBytes) return Status(Code::kTooBig, "payload larger than 64 MiB");
  if (q.op != tcp::kWrite && q.payload_len != 0) return Invalid("payload on a read or sync");
  if (q.op == tcp::kSync && q.extent_count != 0) return Invalid("extents on a sync");
  if (q.op == tcp::kTruncate && q.extent_count != 1) return Invalid("a truncate has one extent");
  CLF_RETURN_IF_ERROR(frame::GetObject(q.handle, q.flags, obj));
  if ((obj->forwarded || q.op == tcp::kTruncate) && !from_server) {
    return Status(Code::kPermission,
                  "a forwarded copy's request is for servers only; the caller is a client");
  }
  return Status::Ok();
}

bool ServeTruncate(const FrameCall& call, const ObjectRef& obj, const Extent& size) {
  Status t = size.length != 0 || size.offset > kMaxFileSize
                 ? Invalid("truncate: bad size")
                 : call.handler->Truncate(obj, size.offset);
  return call.Reply(t);
}

// A write's payload spliced from the socket into the object's descriptor.
// Empty when it cannot be (no descriptor, no pipe, a payload larger than the
// pipe): the caller receives it into the buffer.
std::optional<bool> TrySpliceWrite(const FrameCall& call, const ObjectRef& obj,
                                   const std::vector<Extent>& extents, SplicePipe* pipe) {
  const FrameHeader& q = call.q;
  DataHandler* handler = call.handler;
  Result<std::shared_ptr<int>> object = handler->ObjectFd(obj, true);
  // Payloads larger than the pipe go through the buffer (they could not be
  // taken whole before writing).
  if (object.ok() && *object != nullptr && pipe->Open().ok() && q.payload_len <= pipe->capacity()) {
    Status w;
    // The payload has a deadline of its own, moving with its progress
    // (a shaped or shared link slows it down; only a silent peer ends it).
    switch (SpliceFrameToFile(call.fd.fd, *pipe, **object, extents, q.payload_len,
                              Deadline(call.frame_timeout_ms), call.stop, call.buf, &w)) {
      case SpliceOutcome::kDone:
        if (w.ok()) {
          w = handler->WroteSpliced(*object, extents, q.payload_len,
                                    (q.flags & tcp::kFlagSync) != 0);
        }
        return call.Reply(w);
      case SpliceOutcome::kBuffered: {
        Status bw = handler->Write(obj, extents, *call.buf, (q.flags & tcp::kFlagSync) != 0);
        return call.Reply(bw);
      }
      case SpliceOutcome::kTimedOut:
        return call.Fail(Status(Code::kTimedOut, "truncated payload"));
      case SpliceOutcome::kClosed:
        return false;
    }
  }
  if (!object.ok() && object.status().code() != Code::kNotSupported) {
    // The payload is still on the wire: answer, then close.
    return call.Fail(object.status());
  }
  return std::nullopt;
}

// A write's payload read into the buffer (4096-aligned within it when
// `aligned`), then written.
bool ReceiveAndWrite(const FrameCall& call, const ObjectRef& obj,
                     const std::vector<Extent>& extents, bool aligned) {
  const FrameHeader& q = call.q;
  std::string* buf = call.buf;
  buf->resize(q.payload_len + (aligned ? 4096 : 0));
  char* payload = buf->data();
  if (aligned) payload += (4096 - reinterpret_cast<uintptr_t>(payload) % 4096) % 4096;
  Status st =
      tcp::ReadFull(call.fd, payload, q.payload_len, Deadline(call.frame_timeout_ms), call.stop);
  if (!st.ok()) {
    if (st.code() != Code::kTimedOut) return false;
    return call.Fail(Status(Code::kTimedOut, "truncated payload"));
  }
  Status w = call.handler->Write(obj, extents, std::string_view(payload, q.payload_len),
                                 (q.flags & tcp::kFlagSync) != 0);
  return call.Reply(w);
}

bool ServeWrite(const FrameCall& call, const ObjectRef& obj, const std::vector<Extent>& extents,
                uint64_t total, SplicePipe* pipe) {
  const bool zero_copy = pipe != nullptr && call.fd.ssl == nullptr && total > 0;
  if (total != call.q.payload_len) {
    return call.Fail(Invalid("payload size does not match the extents"));
  }
  // A write the server takes with O_DIRECT is received into 4096-aligned
  // memory inside the buffer (the same one copy as a splice into the page
  // cache) instead of being spliced.
  const bool aligned = zero_copy && call.handler->WantsAligned(extents);
  if (zero_copy && !aligned) {
    if (std::optional<bool> spliced = TrySpliceWrite(call, obj, extents, pipe)) return *spliced;
  }
  return ReceiveAndWrite(call, obj, extents, aligned);
}

bool ServeRead(const FrameCall& call, const ObjectRef& obj, const std::vector<Extent>& extents,
               uint64_t total) {
  // A tagged read waits for its turn in the server's read schedule; the turn
  // is held until the reply is in the socket, so the order is the order on the wire.
  std::unique_ptr<DataHandler::ReadTurn> turn =
      call.handler->AwaitReadTurn(obj, extents, call.q.aux);
  Status r = call.handler->Read(obj, extents, call.buf);
  if (r.ok() && call.buf->size() != total) r = Status(Code::kInternal, "read size mismatch");
  return call.Reply(r, r.ok() ? std::string_view(*call.buf) : std::string_view());
}

}  // namespace

// Header -> checks -> extents -> the op (sync, truncate, write, read).
bool ServeDataFrame(tcp::Link fd, DataHandler* handler, uint32_t frame_timeout_ms, int stop,
                    std::string* buf, bool from_server, SplicePipe* pipe) {
  FrameCall call{fd, handler, frame_timeout_ms, stop, buf, Deadline(frame_timeout_ms), {}};
  if (!ReadFrameHeader(&call)) return false;
  const FrameHeader& q = call.q;
  ObjectRef obj;
  if (Status c = CheckFrame(q, from_server, &obj); !c.ok()) return call.Fail(c);
  std::vector<Extent> extents(q.extent_count);
  Status st =
      tcp::ReadFull(fd, extents.data(), extents.size() * sizeof(Extent), call.deadline, stop);
  if (!st.ok()) return st.code() == Code::kTimedOut ? call.Fail(st) : false;
  if (q.op == tcp::kSync) return call.Reply(handler->Sync(obj));
  if (q.op == tcp::kTruncate) return ServeTruncate(call, obj, extents[0]);
  Result<uint64_t> total = handler->CheckExtents(extents);
  if (!total.ok()) {
    // A read has nothing left on the wire: the connection stays usable.
    if (q.op == tcp::kRead) return call.Reply(total.status());
    return call.Fail(total.status());
  }
  if (q.op == tcp::kWrite) return ServeWrite(call, obj, extents, *total, pipe);
  return ServeRead(call, obj, extents, *total);
}

}  // namespace clf::transport
