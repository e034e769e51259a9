// libFuzzer harness: a data channel connection from its first byte, served
// by a real TcpDataListener on loopback (accept, challenge, Authenticate,
// then the per-connection frame loop) with the server's DataServer handler.
// The first input byte chooses the client:
//   even: it reads the challenge and sends the rest of the input as its
//         answer (and whatever follows): arbitrary kAuth frames, truncated
//         ones, other ops before authenticating;
//   odd:  it answers the challenge correctly (HMAC over the cluster secret
//         and the server's nonce, as TcpTransport does), checks the server's
//         proof, then sends the rest as frames on the authenticated
//         connection (what frame_fuzz feeds ServeDataFrame directly, here
//         through the listener's own loop).
// Then it half-closes and reads until the server ends the connection. A
// server that keeps the connection open 10 s after the client's half-close,
// a crash or a sanitizer report is a finding.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/transport/tcp_protocol.h"
#include "common/transport/tcp_transport.h"
#include "server/service/data_server.h"
#include "test/fuzz/fuzz_server.h"

namespace {

using namespace clf;
using namespace clf::transport;

constexpr char kSecret[] = "fuzz-handshake-secret";

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "fuzz handshake: %s (errno %d)\n", what, errno);
  std::abort();
}

// A free loopback port (bound and released; nothing else runs here).
uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Die("no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

struct Listener {
  std::unique_ptr<server::DataServer> handler;
  std::unique_ptr<TcpDataListener> listener;
  uint16_t port = 0;
};

Listener& TheListener() {
  static Listener* l = [] {
    auto* x = new Listener;
    x->handler = std::make_unique<server::DataServer>(fuzz::Server().data.get(), "127.0.0.1:0",
                                                      kSecret, 2000);
    x->port = FreePort();
    DataChannelAuth auth;
    auth.secret = kSecret;
    x->listener = std::make_unique<TcpDataListener>("127.0.0.1:" + std::to_string(x->port),
                                                    std::move(auth), x->handler.get(), 2000);
    if (!x->listener->Start().ok()) Die("listener did not start");
    return x;
  }();
  return *l;
}

bool SendAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;  // the server closed the connection
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes; false at EOF or on an error.
bool RecvAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Listener& l = TheListener();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(l.port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("connect");
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  // The challenge: a header and the server's nonce.
  uint8_t hb[tcp::kHeaderBytes];
  tcp::FrameHeader ch;
  tcp::Nonce server_nonce;
  if (!RecvAll(fd, hb, sizeof hb) || !tcp::Decode(hb, &ch).ok() || ch.op != tcp::kChallenge ||
      ch.payload_len != tcp::kNonceBytes || !RecvAll(fd, server_nonce.data(), server_nonce.size())) {
    Die("no challenge from the server");
  }
  bool sent = true;
  if (data[0] & 1) {
    tcp::Nonce client_nonce{};
    client_nonce[0] = data[0];
    const tcp::Mac mac = tcp::AuthMac(kSecret, tcp::kClientLabel, server_nonce, client_nonce);
    tcp::FrameHeader h;
    h.op = tcp::kAuth;
    h.payload_len = tcp::kNonceBytes + tcp::kMacBytes;
    const tcp::HeaderBytes b = tcp::Encode(h);
    if (!SendAll(fd, b.data(), b.size()) || !SendAll(fd, client_nonce.data(), client_nonce.size()) ||
        !SendAll(fd, mac.data(), mac.size())) {
      Die("the server closed a connection that answered the challenge correctly");
    }
    tcp::FrameHeader ok;
    tcp::Mac proof;
    if (!RecvAll(fd, hb, sizeof hb) || !tcp::Decode(hb, &ok).ok() || ok.op != (tcp::kAuthOk | tcp::kReplyBit) ||
        ok.status != 0 || ok.payload_len != tcp::kMacBytes || !RecvAll(fd, proof.data(), proof.size())) {
      Die("a correct answer to the challenge was not accepted");
    }
    const tcp::Mac want = tcp::AuthMac(kSecret, tcp::kServerLabel, client_nonce, server_nonce);
    if (!tcp::MacEqual(proof.data(), want.data())) Die("the server's proof is wrong");
  }
  sent = SendAll(fd, data + 1, size - 1);
  (void)sent;  // a server that refused the input closes early: fine
  ::shutdown(fd, SHUT_WR);
  uint8_t sink[65536];
  for (;;) {
    ssize_t r = ::recv(fd, sink, sizeof sink, 0);
    if (r > 0) continue;
    if (r == 0 || errno == ECONNRESET) break;
    if (errno == EAGAIN || errno == EWOULDBLOCK) Die("the server kept the connection open after the client's half-close");
    if (errno != EINTR) break;
  }
  ::close(fd);
  return 0;
}
