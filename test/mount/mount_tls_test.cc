// Mutual TLS through a real mount: clfmount presents the cluster's client
// certificate on gRPC and on the TLS data channel; `clf up --tls` makes the
// certificates and brings a TLS cluster up in one command.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/pattern.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return "<open failed: " + std::to_string(errno) + ">";
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

TEST(MountTlsTest, WriteAndReadThroughATlsMount) {
  ClusterOptions o;
  o.servers = 3;
  o.stripe_size = 64 * 1024;
  o.transport = "tcp";  // bulk data on the TLS data channel, no inline fallback
  o.tls = true;
  o.mount = true;
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  const std::string m = cluster.mount_point();
  ASSERT_EQ(::mkdir((m + "/d").c_str(), 0755), 0) << errno;
  const std::string data = PatternBytes(17, 0, 3 * 1024 * 1024 + 123);
  {
    int fd = ::open((m + "/d/f").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ASSERT_GE(fd, 0) << errno;
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ASSERT_EQ(::fsync(fd), 0);
    ASSERT_EQ(::close(fd), 0);
  }
  ASSERT_EQ(::rename((m + "/d/f").c_str(), (m + "/d/g").c_str()), 0) << errno;
  struct stat st;
  ASSERT_EQ(::stat((m + "/d/g").c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), data.size());
  EXPECT_EQ(FirstDifference(ReadAll(m + "/d/g"), data), -1);
  // The bytes the mount wrote, read by libclf (its own TLS client).
  client::Client& c = cluster.client();
  Result<client::Attr> d = c.LookupSync(c.root(), "d");
  ASSERT_OK(d);
  Result<client::Attr> g = c.LookupSync(d->handle, "g");
  ASSERT_OK(g);
  Result<std::string> back = c.ReadSync(g->handle, g->layout, 0, data.size());
  ASSERT_OK(back);
  EXPECT_EQ(FirstDifference(*back, data), -1);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(c.DataTransportOf(static_cast<ServerId>(k)), "tcp");
  ASSERT_EQ(::unlink((m + "/d/g").c_str()), 0);
  ASSERT_EQ(::rmdir((m + "/d").c_str()), 0);
}

class ClfUpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::chmod(tmp_.str().c_str(), 0755);
    dir_ = tmp_.str() + "/cluster";
    mnt_ = tmp_.str() + "/mnt";
  }
  // Whatever happened: unmount and stop what `clf up` started, by PID.
  void TearDown() override {
    Clf({"down", "--dir", dir_});
    tools::UnmountFuse(mnt_).IgnoreError();
    for (int k = 0; k < 2; ++k) {
      pid_t pid = tools::ReadPidFile(dir_ + "/srv" + std::to_string(k) + "/clfd.pid");
      if (pid > 0 && tools::ProcessName(pid) == "clfd") tools::StopProcess(pid, 5000);
    }
  }
  tools::RunResult Clf(std::vector<std::string> args) {
    return TestCluster::RunClf(std::move(args), 180000);
  }

  TempDir tmp_{"clf-test-up-tls"};
  std::string dir_, mnt_;
};

TEST_F(ClfUpTlsTest, UpWithTlsMakesCertificatesAndServes) {
  tools::RunResult r = Clf({"up", "--tls", "--servers", "2", "--dir", dir_, "--mount", mnt_});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(tools::IsMountRoot(mnt_));
  EXPECT_NE(r.output.find("mutual TLS"), std::string::npos) << r.output;
  for (const char* f : {"ca.crt", "ca.key", "server-0.crt", "server-0.key", "server-1.crt",
                        "server-1.key", "client.crt", "client.key"}) {
    struct stat st;
    ASSERT_EQ(::stat((dir_ + "/tls/" + f).c_str(), &st), 0) << f;
    const bool key = std::string(f).ends_with(".key");
    EXPECT_EQ(st.st_mode & 0777, key ? 0600u : 0644u) << f;
  }
  Result<ClusterConfig> cfg = LoadClusterConfig(dir_ + "/cluster.toml");
  ASSERT_OK(cfg);
  EXPECT_TRUE(cfg->tls.enabled());
  EXPECT_EQ(cfg->tls.dir, dir_ + "/tls");

  ASSERT_OK(tools::WriteFileWithMode(mnt_ + "/hello", "hello tls\n", 0644));
  Result<std::string> hello = tools::ReadFileToString(mnt_ + "/hello");
  ASSERT_OK(hello);
  EXPECT_EQ(*hello, "hello tls\n");
  // The CLI is a TLS client too.
  r = Clf({"status", "--cluster", dir_ + "/cluster.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 of 2 servers up"), std::string::npos) << r.output;

  r = Clf({"down", "--dir", dir_});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(tools::IsMountRoot(mnt_));
}

}  // namespace
}  // namespace clf::testing
