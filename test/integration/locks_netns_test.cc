// `clf bench locks --cluster --netns --quick` end to end: 2 clfd, up to 6
// worker processes and the driver, each in its own network namespace behind a
// tc-shaped veth. Every workload, client count and locking method must have
// moved its bytes (nonzero bandwidth in locks_cluster.csv), and nothing the
// bench made may survive it (namespaces, clfd and worker processes, its work
// folder), also when it is stopped with SIGTERM halfway.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

// Namespaces the bench with this pid made (named clflk<pid>-...).
std::vector<std::string> BenchNamespaces(pid_t pid) {
  return NamespacesWithPrefix("clflk" + std::to_string(pid) + "-");
}

// The work folder the bench printed, and that nothing runs from it any more.
void ExpectNothingLeft(pid_t pid, const std::string& log) {
  EXPECT_TRUE(BenchNamespaces(pid).empty());
  const size_t at = log.find("work folder ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string work = log.substr(at + 12, log.find('\n', at) - at - 12);
  Result<tools::RunResult> ps = tools::Run({"pgrep", "-f", work}, 10000);
  ASSERT_OK(ps);
  EXPECT_EQ(ps->output, "");
  EXPECT_FALSE(std::filesystem::exists(work));
}

class LocksNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanUseNetns()) GTEST_SKIP() << "needs root and ip netns";
  }
  TempDir dir_;
};

TEST_F(LocksNetnsTest, EveryMethodMovesItsBytesAndNothingIsLeftBehind) {
  const std::string out = dir_.str() + "/out";
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid = tools::Spawn({TestCluster::Binary("CLF", "clf"), "bench", "locks",
                                    "--cluster", "--netns", "--quick", "--skip-raw", "--no-plots",
                                    "--rate", "1gbit", "--out", out},
                                   so);
  ASSERT_OK(pid);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 240000, &status));
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_OK(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << *log;
  ExpectNothingLeft(*pid, *log);
  std::ifstream csv(out + "/locks_cluster.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line.rfind("workload,clients,method,locks_per_client,bytes,seconds,mb_per_s,", 0), 0u);
  std::map<std::string, std::set<std::string>> methods;  // "workload,clients" -> methods
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    std::string x;
    while (std::getline(ls, x, ',')) f.push_back(x);
    ASSERT_GE(f.size(), 7u) << line;
    EXPECT_GT(std::stod(f[4]), 0) << line;  // bytes
    EXPECT_GT(std::stod(f[6]), 0) << line;  // MB/s
    if (f[0] == "flash" && f[1] == "2" && f[2] == "list") {
      EXPECT_EQ(f[3], "1920") << line;
    }
    EXPECT_TRUE(methods[f[0] + "," + f[1]].insert(f[2]).second) << "duplicate row " << line;
  }
  const std::set<std::string> all = {"none", "file", "range", "list"};
  for (const char* wc : {"3d-block,1", "3d-block,2", "flash,1", "flash,2", "tile,6"}) {
    EXPECT_EQ(methods[wc], all) << wc;
  }
  EXPECT_EQ(methods.size(), 5u);
}

TEST_F(LocksNetnsTest, StoppedHalfwayItRemovesItsNamespacesAndProcesses) {
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  // Slow links and several files per run: the runs last long enough to be interrupted.
  Result<pid_t> pid = tools::Spawn(
      {TestCluster::Binary("CLF", "clf"), "bench", "locks", "--cluster", "--netns", "--clients",
       "2", "--files", "20", "--rate", "20mbit", "--skip-raw", "--no-plots", "--out",
       dir_.str() + "/out"},
      so);
  ASSERT_OK(pid);
  // Wait until the testbed is up (the driver's namespace is made last) and
  // worker processes of this bench run (their command lines name its work folder).
  const std::string last = "clflk" + std::to_string(*pid) + "-d";
  ASSERT_TRUE(WaitForNamespace(last, 60000)) << "the bench's testbed never came up";
  std::string work;
  ASSERT_GE(TestCluster::PollUntil(
                [&] {
                  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
                  if (!log.ok()) return false;
                  const size_t at = log->find("work folder ");
                  if (at == std::string::npos || log->find('\n', at) == std::string::npos) return false;
                  work = log->substr(at + 12, log->find('\n', at) - at - 12);
                  return true;
                },
                60000),
            0);
  ASSERT_GE(TestCluster::PollUntil(
                [&] {
                  Result<tools::RunResult> ps =
                      tools::Run({"pgrep", "-f", "cluster-file " + work}, 10000);
                  return ps.ok() && !ps->output.empty();
                },
                60000),
            0);
  ASSERT_EQ(kill(*pid, SIGTERM), 0);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 120000, &status));
  EXPECT_TRUE(WIFEXITED(status));  // it handled the signal and cleaned up
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_OK(log);
  ExpectNothingLeft(*pid, *log);
}

}  // namespace
}  // namespace clf::testing
