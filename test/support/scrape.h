// Raw HTTP against a server's metrics_address, for tests: GET, the body, and
// one sample's value from the Prometheus text.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "test/support/cluster.h"

namespace clf::testing {

inline int ConnectLoopback(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends `request` raw and returns everything the server answers until it closes.
inline std::string Exchange(const std::string& address, const std::string& request) {
  int fd = ConnectLoopback(address);
  if (fd < 0) return "";
  size_t off = 0;
  while (off < request.size()) {
    ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);  // end of request: a cut-off request is answered or dropped now
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

inline std::string Get(const std::string& address, const std::string& path = "/metrics") {
  return Exchange(address, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

inline std::string Body(const std::string& http) {
  size_t p = http.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : http.substr(p + 4);
}

// The value of one sample ("clf_locks{state=\"granted\"}") in an exposition
// body; -1 when the body has no such line.
inline double Sample(const std::string& body, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t p = body.find(key);
  if (p == std::string::npos) return -1;
  return std::stod(body.substr(p + key.size()));
}

// The sum of one sample over every server of `cluster` (each must have it).
inline double SumOverServers(const TestCluster& cluster, const std::string& series) {
  double sum = 0;
  for (int k = 0; k < cluster.size(); ++k) {
    const std::string body =
        Body(Get(cluster.config().servers[static_cast<size_t>(k)].metrics_address));
    const double v = Sample(body, series);
    EXPECT_GE(v, 0) << "server " << k << " lacks " << series << "\n" << body;
    sum += v;
  }
  return sum;
}

}  // namespace clf::testing
