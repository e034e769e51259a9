// clfmount's schedule options (-o sched, sched_block, sched_window): files
// written and read through the kernel with them come back exact, and bad
// values are refused before anything is mounted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

TEST(MountSchedTest, MountOptionsApplyAndMoveExactBytes) {
  ClusterOptions o;
  o.servers = 3;
  o.stripe_size = 64 << 10;
  o.mount = true;
  o.mount_options = "sched=first,sched_block=64K,sched_window=2";
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  const std::string path = cluster.mount_point() + "/f";
  const std::string data = PatternBytes(3, 0, (5 << 20) + 777);
  {
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ASSERT_EQ(::fsync(fd), 0);
    ASSERT_EQ(::close(fd), 0);
  }
  // The servers hold the bytes (read by a client with default settings)...
  Result<client::Attr> a = cluster.client().ResolvePath("/f");
  ASSERT_OK(a);
  Result<std::string> r = cluster.client().ReadSync(a->handle, a->layout, 0, data.size());
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, data), -1);
  // ...and the mount reads them back with its settings (O_DIRECT: not the page cache).
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0);
  std::string back(data.size() + 4096, '\0');
  void* buf = nullptr;
  ASSERT_EQ(posix_memalign(&buf, 4096, back.size()), 0);
  ssize_t got = 0, n;
  while ((n = ::pread(fd, static_cast<char*>(buf) + got, (1 << 20), got)) > 0) got += n;
  ::close(fd);
  back.assign(static_cast<char*>(buf), static_cast<size_t>(got));
  free(buf);
  EXPECT_EQ(FirstDifference(back, data), -1);
}

TEST(MountSchedTest, BadOptionsAreRefusedBeforeMounting) {
  ClusterOptions o;
  o.servers = 1;
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  TempDir mnt;
  for (const char* bad :
       {"sched=fifo", "sched_block=5000", "sched_block=64M", "sched_window=5000"}) {
    Result<tools::RunResult> r = tools::Run({TestCluster::Binary("CLFMOUNT", "clfmount"),
                                             cluster.cluster_file(), mnt.str(), "-f", "-o", bad},
                                            60000);
    ASSERT_OK(r);
    EXPECT_NE(r->exit_code, 0) << bad;
    EXPECT_NE(r->output.find("-o sched"), std::string::npos) << r->output;
    EXPECT_FALSE(tools::IsMountRoot(mnt.str()));
  }
}

}  // namespace
}  // namespace clf::testing
