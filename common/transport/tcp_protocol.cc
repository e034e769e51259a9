#include "common/transport/tcp_protocol.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>

#include "common/credentials.h"

namespace clf::transport::tcp {

namespace {

// Deadlines on the data channel follow progress: a transfer that moves
// bytes is slow, not dead (a shared or shaped link), so each time bytes move
// the deadline moves to at least now + the span it was given with. A peer
// that moves nothing still costs at most that span.
class ProgressDeadline {
 public:
  explicit ProgressDeadline(Clock::time_point at)
      : at_(at), span_(std::max(Clock::duration::zero(), at - Clock::now())) {}
  void Moved() { at_ = std::max(at_, Clock::now() + span_); }
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
  const Clock::duration span_;
};

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

// Waits for `events` on fd; kTimedOut / kCancelled otherwise.
Status Wait(int fd, short events, Clock::time_point deadline, int stop_fd) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    int n = ::poll(p, stop_fd >= 0 ? 2 : 1, RemainingMs(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return FromErrno(errno, "poll");
    }
    if (n == 0) return Status(Code::kTimedOut, "data channel: peer did not answer in time");
    if (stop_fd >= 0 && p[1].revents != 0) return Status(Code::kCancelled, "data channel stopping");
    return Status::Ok();
  }
}

Status SocketError(int err, const char* what) {
  if (err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ESHUTDOWN) {
    return Unavailable(std::string("data channel ") + what + ": connection closed by peer");
  }
  return FromErrno(err, std::string("data channel ") + what);
}

void Advance(std::vector<iovec>& iov, size_t& first, size_t n) {
  while (n > 0 && first < iov.size()) {
    if (n >= iov[first].iov_len) {
      n -= iov[first].iov_len;
      iov[first].iov_len = 0;
      ++first;
    } else {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + n;
      iov[first].iov_len -= n;
      n = 0;
    }
  }
  while (first < iov.size() && iov[first].iov_len == 0) ++first;
}

}  // namespace

HeaderBytes Encode(const FrameHeader& h) {
  HeaderBytes out{};
  uint8_t* p = out.data();
  frame::PutHeader(p, h);
  return out;
}

Status Decode(const uint8_t* in, FrameHeader* h) {
  const uint8_t* p = in;
  return frame::GetHeader(p, kMagic, kVersion, "data channel", h);
}

Status RandomNonce(Nonce* out) {
  if (RAND_bytes(out->data(), static_cast<int>(out->size())) != 1) {
    return Status(Code::kInternal, "RAND_bytes failed");
  }
  return Status::Ok();
}

Mac AuthMac(std::string_view secret, std::string_view label, const Nonce& a, const Nonce& b) {
  std::string msg;
  msg.reserve(label.size() + a.size() + b.size());
  msg.append(label);
  msg.append(reinterpret_cast<const char*>(a.data()), a.size());
  msg.append(reinterpret_cast<const char*>(b.data()), b.size());
  Mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out.data(), &len);
  return out;
}

bool MacEqual(const uint8_t* a, const uint8_t* b) { return CRYPTO_memcmp(a, b, kMacBytes) == 0; }

namespace {

// After an SSL_* call returned `rc` <= 0: waits for what the session wants
// (Ok: call again), or the error.
Status TlsWait(Link l, int rc, const char* what, Clock::time_point deadline, int stop_fd) {
  const int err = SSL_get_error(l.ssl, rc);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return Wait(l.fd, POLLIN, deadline, stop_fd);
    case SSL_ERROR_WANT_WRITE:
      return Wait(l.fd, POLLOUT, deadline, stop_fd);
    case SSL_ERROR_ZERO_RETURN:
      return Unavailable(std::string("data channel ") + what + ": connection closed by peer (TLS)");
    case SSL_ERROR_SYSCALL: {
      const int e = errno;
      ERR_clear_error();
      if (e == 0 || e == EAGAIN) {
        return Unavailable(std::string("data channel ") + what + ": connection closed by peer");
      }
      return SocketError(e, what);
    }
    default:
      return Status(Code::kUnauthenticated,
                    std::string("data channel ") + what + ": TLS: " + OpenSslErrors());
  }
}

// A socket BIO whose writes never raise SIGPIPE; everything else is OpenSSL's.
int NoSigpipeWrite(BIO* b, const char* data, int len) {
  int fd = -1;
  BIO_get_fd(b, &fd);
  BIO_clear_retry_flags(b);
  errno = 0;
  const ssize_t n = ::send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n <= 0 && BIO_sock_should_retry(static_cast<int>(n))) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

const BIO_METHOD* NoSigpipeSocketMethod() {
  static BIO_METHOD* method = [] {
    const BIO_METHOD* sock = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "clf socket (MSG_NOSIGNAL)");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, NoSigpipeWrite);
    BIO_meth_set_read(m, BIO_meth_get_read(sock));
    BIO_meth_set_puts(m, BIO_meth_get_puts(sock));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock));
    BIO_meth_set_create(m, BIO_meth_get_create(sock));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock));
    return m;
  }();
  return method;
}

}  // namespace

Status AttachTls(ssl_st* ssl, int fd) {
  const BIO_METHOD* m = NoSigpipeSocketMethod();
  BIO* bio = m != nullptr ? BIO_new(m) : nullptr;
  if (bio == nullptr) return Internal("data channel: cannot make a socket BIO: " + OpenSslErrors());
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl, bio, bio);  // the session owns the BIO now
  return Status::Ok();
}

Status WaitSocket(int fd, short events, Clock::time_point deadline, int stop_fd) {
  return Wait(fd, events, deadline, stop_fd);
}

Status SocketStatus(int err, const char* what) { return SocketError(err, what); }

bool WaitReadable(Link l, int stop_fd, Clock::time_point deadline) {
  if (l.ssl != nullptr && SSL_pending(l.ssl) > 0) return true;
  return Wait(l.fd, POLLIN, deadline, stop_fd).ok();
}

Status ReadFull(Link l, void* buf, size_t len, Clock::time_point deadline, int stop_fd) {
  return ReadvFull(l, {iovec{buf, len}}, deadline, stop_fd);
}

Status ReadvFull(Link l, std::vector<iovec> iov, Clock::time_point at, int stop_fd) {
  const int fd = l.fd;
  size_t first = 0;
  Advance(iov, first, 0);
  ProgressDeadline deadline(at);
  if (l.ssl != nullptr) {
    while (first < iov.size()) {
      size_t got = 0;
      const int rc = SSL_read_ex(l.ssl, iov[first].iov_base, iov[first].iov_len, &got);
      if (rc == 1) {
        Advance(iov, first, got);
        deadline.Moved();
        continue;
      }
      CLF_RETURN_IF_ERROR(TlsWait(l, rc, "read", deadline.at(), stop_fd));
    }
    return Status::Ok();
  }
  while (first < iov.size()) {
    msghdr m{};
    m.msg_iov = iov.data() + first;
    m.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    ssize_t n = ::recvmsg(fd, &m, MSG_DONTWAIT);
    if (n > 0) {
      Advance(iov, first, static_cast<size_t>(n));
      deadline.Moved();
      continue;
    }
    if (n == 0) return Unavailable("data channel: connection closed by peer mid-frame");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return SocketError(errno, "read");
    CLF_RETURN_IF_ERROR(Wait(fd, POLLIN, deadline.at(), stop_fd));
  }
  return Status::Ok();
}

Status WritevFull(Link l, std::vector<iovec> iov, Clock::time_point at) {
  const int fd = l.fd;
  size_t first = 0;
  Advance(iov, first, 0);
  ProgressDeadline deadline(at);
  if (l.ssl != nullptr) {
    // Small leading pieces (header, extents) go in one record with what follows
    // them when they fit; a large payload piece is written from its own buffer.
    constexpr size_t kCoalesce = 16 * 1024;
    std::string small;
    while (first < iov.size()) {
      const void* p = iov[first].iov_base;
      size_t n = iov[first].iov_len;
      if (n < kCoalesce && first + 1 < iov.size() && iov[first + 1].iov_len < kCoalesce) {
        small.clear();
        size_t i = first;
        while (i < iov.size() && small.size() + iov[i].iov_len <= kCoalesce) {
          small.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
          ++i;
        }
        p = small.data();
        n = small.size();
      }
      for (;;) {
        size_t put = 0;
        const int rc = SSL_write_ex(l.ssl, p, n, &put);
        if (rc == 1) {
          Advance(iov, first, put);
          deadline.Moved();
          break;
        }
        CLF_RETURN_IF_ERROR(TlsWait(l, rc, "write", deadline.at(), -1));
      }
    }
    return Status::Ok();
  }
  while (first < iov.size()) {
    msghdr m{};
    m.msg_iov = iov.data() + first;
    m.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    ssize_t n = ::sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      Advance(iov, first, static_cast<size_t>(n));
      if (n > 0) deadline.Moved();
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return SocketError(errno, "write");
    CLF_RETURN_IF_ERROR(Wait(fd, POLLOUT, deadline.at(), -1));
  }
  return Status::Ok();
}

Status TlsHandshake(Link l, Clock::time_point deadline, int stop_fd) {
  ERR_clear_error();
  for (;;) {
    const int rc = SSL_do_handshake(l.ssl);
    if (rc == 1) return Status::Ok();
    Status st = TlsWait(l, rc, "TLS handshake", deadline, stop_fd);
    if (!st.ok()) {
      const long v = SSL_get_verify_result(l.ssl);
      if (v != X509_V_OK) {
        return Status(Code::kUnauthenticated,
                      std::string("data channel TLS handshake: certificate: ") +
                          X509_verify_cert_error_string(v));
      }
      return st;
    }
  }
}

Status TlsUnwrap(Link l, Clock::time_point deadline, int stop_fd) {
  ERR_clear_error();
  for (;;) {
    const int rc = SSL_shutdown(l.ssl);
    if (rc == 1) return Status::Ok();  // both close_notify alerts exchanged
    if (rc == 0) continue;             // ours sent; call again to read the peer's
    CLF_RETURN_IF_ERROR(TlsWait(l, rc, "TLS close", deadline, stop_fd));
  }
}

Status SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Invalid("address must be host:port, got " + address);
  }
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return Status::Ok();
}

Result<int> Dial(const std::string& address, uint32_t timeout_ms) {
  std::string host, port;
  CLF_RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return Unavailable("resolve " + address + ": " + ::gai_strerror(rc));
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last = Unavailable("no address for " + address);
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      ai->ai_protocol);
    if (fd < 0) {
      last = FromErrno(errno, "socket");
      continue;
    }
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        Status w = Wait(fd, POLLOUT, deadline, -1);
        if (!w.ok()) {
          ::close(fd);
          last = Unavailable("connect " + address + ": timed out");
          continue;
        }
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err != 0) {
      ::close(fd);
      last = Unavailable("connect " + address + ": " + std::strerror(err));
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

}  // namespace clf::transport::tcp
