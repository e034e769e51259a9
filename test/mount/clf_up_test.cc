// `clf up` / `clf down`: a local cluster in one command, stopped by PID.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/config.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

namespace fs = std::filesystem;

class ClfUpTest : public ::testing::Test {
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
    for (int k = 0; k < 3; ++k) {
      pid_t pid = tools::ReadPidFile(dir_ + "/srv" + std::to_string(k) + "/clfd.pid");
      if (pid > 0 && tools::ProcessName(pid) == "clfd") tools::StopProcess(pid, 5000);
    }
  }
  tools::RunResult Clf(std::vector<std::string> args) {
    return TestCluster::RunClf(std::move(args), 180000);
  }
  std::vector<pid_t> ServerPids() {
    std::vector<pid_t> out;
    for (int k = 0; k < 3; ++k) {
      out.push_back(tools::ReadPidFile(dir_ + "/srv" + std::to_string(k) + "/clfd.pid"));
    }
    return out;
  }

  TempDir tmp_{"clf-test-up"};
  std::string dir_, mnt_;
};

TEST_F(ClfUpTest, UpStatusDownUpAgain) {
  tools::RunResult r = Clf({"up", "--servers", "3", "--dir", dir_, "--mount", mnt_});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // It returned only once the mount answers.
  EXPECT_TRUE(tools::IsMountRoot(mnt_));
  EXPECT_NE(r.output.find(dir_ + "/cluster.toml"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("clf down --dir " + dir_), std::string::npos) << r.output;
  std::vector<pid_t> pids = ServerPids();
  for (int k = 0; k < 3; ++k) {
    EXPECT_GT(pids[static_cast<size_t>(k)], 0) << "srv" << k << "/clfd.pid";
    EXPECT_TRUE(tools::ProcessAlive(pids[static_cast<size_t>(k)]));
    EXPECT_TRUE(fs::exists(dir_ + "/srv" + std::to_string(k) + "/clfd.log"));
  }
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_OK(tools::WriteFileWithMode(mnt_ + "/hello", "hello clf\n", 0644));

  r = Clf({"status", "--cluster", dir_ + "/cluster.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 of 3 servers up"), std::string::npos) << r.output;

  // A second `up` on the same folder refuses.
  r = Clf({"up", "--servers", "3", "--dir", dir_, "--mount", tmp_.str() + "/mnt2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("already has running servers"), std::string::npos) << r.output;
  EXPECT_FALSE(tools::IsMountRoot(tmp_.str() + "/mnt2"));

  r = Clf({"down", "--dir", dir_});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(tools::IsMountRoot(mnt_));
  for (pid_t p : pids) EXPECT_FALSE(tools::ProcessAlive(p)) << "clfd " << p << " still running";
  for (int k = 0; k < 3; ++k) {
    EXPECT_FALSE(fs::exists(dir_ + "/srv" + std::to_string(k) + "/clfd.pid"));
  }
  // down twice is harmless.
  r = Clf({"down", "--dir", dir_});
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // up again reuses the cluster: the data is still there.
  r = Clf({"up", "--servers", "3", "--dir", dir_, "--mount", mnt_});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<std::string> hello = tools::ReadFileToString(mnt_ + "/hello");
  ASSERT_OK(hello);
  EXPECT_EQ(*hello, "hello clf\n");

  // down works when a server is already gone.
  pids = ServerPids();
  ASSERT_GT(pids[1], 0);
  ::kill(pids[1], SIGKILL);
  r = Clf({"down", "--dir", dir_});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(tools::IsMountRoot(mnt_));
  for (pid_t p : pids) EXPECT_FALSE(tools::ProcessAlive(p));
}

// --set puts [cluster] keys into a new cluster file (the servers run with
// them); a bad value, a misspelt key or --set with an existing file is
// refused before anything starts.
TEST_F(ClfUpTest, SetPutsClusterKeysIntoANewClusterFile) {
  for (const char* bad : {"direct_write_kib=-1", "direct_writes_kib=64", "novalue", "Bad-Key=1"}) {
    tools::RunResult r =
        Clf({"up", "--servers", "3", "--dir", dir_, "--mount", mnt_, "--set", bad});
    EXPECT_NE(r.exit_code, 0) << bad << ": " << r.output;
    EXPECT_FALSE(tools::IsMountRoot(mnt_)) << bad;
    EXPECT_FALSE(fs::exists(dir_ + "/cluster.toml")) << bad;
  }
  tools::RunResult r = Clf({"up", "--servers", "3", "--dir", dir_, "--mount", mnt_, "--set",
                            "direct_write_kib=512", "--set", "early_writeback_kib=0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<ClusterConfig> cfg = LoadClusterConfig(dir_ + "/cluster.toml");
  ASSERT_OK(cfg);
  EXPECT_EQ(cfg->direct_write_kib, 512u);
  EXPECT_EQ(cfg->early_writeback_kib, 0u);
  EXPECT_TRUE(tools::IsMountRoot(mnt_));
  ASSERT_EQ(Clf({"down", "--dir", dir_}).exit_code, 0);
  r = Clf({"up", "--servers", "3", "--dir", dir_, "--mount", mnt_, "--set", "direct_write_kib=64"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--set applies to a new cluster file"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace clf::testing
