// libFuzzer harness: arbitrary bytes as what a client sends on an
// authenticated TCP data channel connection (common/transport/tcp_protocol.h:
// 48-byte headers, extents, payloads, any number of frames), served by
// ServeDataFrame (the listener's per-frame loop, tcp_transport.cc) with the
// server's DataServer handler (DataOps, ReadGate) over a socketpair: no
// network, no listener thread. A helper thread plays the client: it sends the
// input, half-closes and discards the replies. The connection authentication
// (challenge, HMAC) is not fuzzed here: a MAC the fuzzer cannot forge ends it.
//
// Frame timeout 2 s: a frame the input leaves incomplete ends at the
// half-close (kUnavailable), never at the timeout; a run that waits for it
// is a finding (libFuzzer -timeout).
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "common/transport/tcp_transport.h"
#include "server/service/data_server.h"
#include "test/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  static server::DataServer* handler =
      new server::DataServer(Server().data.get(), "127.0.0.1:0", "fuzz-secret", 2000);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  std::thread client([fd = sv[1], data, size] {
    size_t off = 0;
    while (off < size) {
      ssize_t n = ::send(fd, data + off, size - off, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server closed the connection
      off += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    char sink[65536];
    while (::recv(fd, sink, sizeof sink, 0) > 0) {
    }
  });
  std::string buf;
  size_t frames = 0;
  // The first byte's low bit: the connection is a server's (forwarded
  // copies' requests allowed) or a client's.
  const bool from_server = size > 0 && (data[0] & 1) != 0;
  while (transport::ServeDataFrame(transport::tcp::Link{sv[0]}, handler, 2000, -1, &buf,
                                   from_server)) {
    // Each frame that keeps the connection consumed at least a header.
    if (++frames > size / transport::tcp::kHeaderBytes) std::abort();
  }
  ::close(sv[0]);
  client.join();
  ::close(sv[1]);
  return 0;
}
