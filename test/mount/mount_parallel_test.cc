// Parallel directory operations through the kernel: with libfuse 3.14 the
// kernel serializes lookups in one directory unless clfmount's INIT reply
// carries FUSE_PARALLEL_DIROPS (fuse/init_patch.*). Proof: the directory's
// server is stopped (SIGSTOP), so a lookup in it cannot finish; two lookups of
// different names in that directory must both reach clfmount while the first
// is still waiting.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <string>
#include <thread>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(MountParallelTest, LookupsInOneDirectoryRunConcurrently) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.rpc_timeout_ms = 5000;
  o.mount_options = "loglevel=debug";
  TestCluster c(o);
  ASSERT_OK(c.Start());
  const std::string mnt = c.mount_point();
  // The root directory lives on server 0: its lookups wait while it is stopped.
  ASSERT_EQ(::kill(c.server_pid(0), SIGSTOP), 0);
  std::vector<std::thread> lookers;
  for (const char* name : {"par-a", "par-b", "par-c"}) {
    lookers.emplace_back([&mnt, name] {
      struct stat st;
      (void)::stat((mnt + "/" + name).c_str(), &st);  // fails (EIO or ENOENT) later
    });
  }
  const std::string log_path = c.dir() + "/clfmount.log";
  const int64_t took = TestCluster::PollUntil(
      [&] {
        const std::string log = c.LogTail(-1, 1 << 20);
        return Count(log, "lookup 0x1 par-a") >= 1 && Count(log, "lookup 0x1 par-b") >= 1 &&
               Count(log, "lookup 0x1 par-c") >= 1;
      },
      3000);
  ::kill(c.server_pid(0), SIGCONT);
  for (std::thread& t : lookers) t.join();
  EXPECT_GE(took, 0) << "three lookups in one directory did not reach clfmount together: the "
                        "kernel serialized them (no FUSE_PARALLEL_DIROPS); mount log:\n"
                     << c.LogTail(-1, 3000);
  EXPECT_NE(c.LogTail(-1, 1 << 20).find("parallel dirops on"), std::string::npos)
      << "clfmount did not log that the INIT reply carried FUSE_PARALLEL_DIROPS";
}

}  // namespace
}  // namespace clf::testing
