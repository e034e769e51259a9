// Replicated files' copies as the tests see them: the object file of a copy
// on a server's disk, a client's data channel to one server (to ask one copy
// directly), and the check that every copy of a file is byte-identical.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "clf/client.h"
#include "common/layout.h"
#include "common/transport/tcp_transport.h"
#include "test/support/cluster.h"
#include "test/support/pattern.h"

namespace clf::testing {

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file of server `holder`'s copy in `slot` of h.
inline std::string CopyPath(const TestCluster& c, ServerId holder, uint32_t slot, Handle h) {
  char name[64];
  std::snprintf(name, sizeof name, "/%02x/%016llx", static_cast<unsigned>(h % 256),
                static_cast<unsigned long long>(h));
  std::string dir = c.store_dir(static_cast<int>(holder)) + "/objects";
  if (slot > 0) dir += "-r" + std::to_string(slot);
  return dir + name;
}

// Every primary's copies compare equal, byte for byte (a copy never written
// reads as empty).
inline void ExpectCopiesIdentical(const TestCluster& c, const client::Attr& a) {
  const uint32_t n = static_cast<uint32_t>(c.size());
  for (ServerId p : DataServers(a.layout, n)) {
    const std::string primary = ReadWholeFile(CopyPath(c, p, 0, a.handle));
    for (uint32_t slot = 1; slot < a.layout.replicas; ++slot) {
      const ServerId holder = ReplicaServer(p, slot, n);
      const std::string copy = ReadWholeFile(CopyPath(c, holder, slot, a.handle));
      EXPECT_EQ(primary.size(), copy.size()) << "server " << p << "'s units, copy " << slot;
      EXPECT_EQ(FirstDifference(primary, copy), -1)
          << "server " << p << "'s units differ from copy " << slot << " on server " << holder;
    }
  }
}

// A data channel to server s, as a client.
inline std::unique_ptr<transport::TcpTransport> ClientDataChannel(const TestCluster& c,
                                                                  ServerId s) {
  Result<std::string> addr = DataAddressOf(c.config().servers[s]);
  EXPECT_OK(addr);
  std::string secret = ReadWholeFile(c.dir() + "/secret");
  while (!secret.empty() && secret.back() == '\n') secret.pop_back();
  return std::make_unique<transport::TcpTransport>(*addr, secret, 1000);
}

}  // namespace clf::testing
