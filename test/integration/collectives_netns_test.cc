// `clf bench collectives --quick` end to end in network namespaces: every
// metadata mode (client, collective, onehop) at N = 1 and 2 servers, real clfd
// and a worker client in their own namespaces. The CSV must hold every mode,
// N and operation with a nonzero rate, the PNGs must exist, and nothing the
// bench made (namespaces, processes, its work folder) may survive it, also
// when it is stopped with SIGTERM halfway.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

// Namespaces the bench with this pid made (named clfcb<pid>-...).
std::vector<std::string> BenchNamespaces(pid_t pid) {
  return NamespacesWithPrefix("clfcb" + std::to_string(pid) + "-");
}

// The bench's work folder (printed first), no process naming it, and it is gone.
void ExpectWorkFolderGone(const std::string& log) {
  const size_t at = log.find("work folder ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string work = log.substr(at + 12, log.find('\n', at) - at - 12);
  Result<tools::RunResult> ps = tools::Run({"pgrep", "-f", work}, 10000);
  ASSERT_OK(ps);
  EXPECT_EQ(ps->output, "") << "processes of the bench are left";
  EXPECT_FALSE(std::filesystem::exists(work));
}

class CollectivesNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanUseNetns()) GTEST_SKIP() << "needs root and ip netns";
  }
  TempDir dir_;
};

TEST_F(CollectivesNetnsTest, QuickRunCoversEveryModeAndLeavesNothing) {
  const std::string out = dir_.str() + "/out";
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid = tools::Spawn(
      {TestCluster::Binary("CLF", "clf"), "bench", "collectives", "--quick", "--out", out}, so);
  ASSERT_OK(pid);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 240000, &status));
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_OK(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << *log;
  EXPECT_TRUE(BenchNamespaces(*pid).empty());
  ExpectWorkFolderGone(*log);
  std::ifstream csv(out + "/collectives.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line.rfind("mode,servers,op,files,ops_per_s,mean_us,p50_us,p99_us,", 0), 0u) << line;
  std::set<std::tuple<std::string, int, std::string>> seen;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    std::string x;
    while (std::getline(ls, x, ',')) f.push_back(x);
    ASSERT_GE(f.size(), 10u) << line;
    EXPECT_EQ(f[3], "20") << line;              // files per point in quick mode
    EXPECT_GT(std::stod(f[4]), 0) << line;      // ops/s
    EXPECT_GT(std::stod(f[5]), 0) << line;      // mean latency
    EXPECT_GE(std::stod(f[7]), std::stod(f[6])) << line;  // p99 >= p50
    seen.insert({f[0], std::stoi(f[1]), f[2]});
  }
  for (const char* mode : {"client", "collective", "onehop"}) {
    for (int n : {1, 2}) {
      for (const char* op : {"create", "stat", "remove"}) {
        EXPECT_TRUE(seen.count({mode, n, op})) << mode << " N=" << n << " " << op << " missing";
      }
    }
  }
  EXPECT_EQ(seen.size(), 18u);
  for (const char* png : {"create", "stat", "remove", "ratio"}) {
    const std::string p = out + "/collectives-" + png + ".png";
    EXPECT_TRUE(std::filesystem::exists(p) && std::filesystem::file_size(p) > 0) << p;
  }
}

TEST_F(CollectivesNetnsTest, StoppedHalfwayItRemovesItsNamespacesAndProcesses) {
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid = tools::Spawn({TestCluster::Binary("CLF", "clf"), "bench", "collectives",
                                    "--servers", "2", "--files", "100000", "--modes", "client",
                                    "--out", dir_.str() + "/out", "--no-plots"},
                                   so);
  ASSERT_OK(pid);
  // Wait until the client's namespace exists (made last), then a little into the run.
  const std::string last = "clfcb" + std::to_string(*pid) + "-c";
  ASSERT_GE(TestCluster::PollUntil(
                [&] {
                  for (const std::string& ns : BenchNamespaces(*pid)) {
                    if (ns == last) return true;
                  }
                  return false;
                },
                60000),
            0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(kill(*pid, SIGTERM), 0);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 120000, &status));
  EXPECT_TRUE(WIFEXITED(status));  // it handled the signal and cleaned up
  EXPECT_TRUE(BenchNamespaces(*pid).empty());
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_OK(log);
  ExpectWorkFolderGone(*log);
}

}  // namespace
}  // namespace clf::testing
