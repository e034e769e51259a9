// `clf bench sched` end to end in network namespaces, small: 2 clients and 2
// clfd in their own namespaces behind tc-shaped veths; every policy's
// write+read must come back exact (the bench verifies every byte and fails
// otherwise), and nothing the bench made may survive it, also when it is
// stopped with SIGTERM halfway.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

// Namespaces the bench with this pid made (named clfsb<pid>-...).
std::vector<std::string> BenchNamespaces(pid_t pid) {
  return NamespacesWithPrefix("clfsb" + std::to_string(pid) + "-");
}

// The comma-separated fields of one CSV line.
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream ls(line);
  std::string x;
  while (std::getline(ls, x, ',')) f.push_back(x);
  return f;
}

class SchedNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanUseNetns()) GTEST_SKIP() << "needs root and ip netns";
  }
  TempDir dir_;
};

TEST_F(SchedNetnsTest, EveryPolicyExactAndNothingLeftBehind) {
  const std::string out = dir_.str() + "/out";
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid =
      tools::Spawn({TestCluster::Binary("CLF", "clf"), "bench", "sched", "--out", out, "--clients",
                    "2", "--servers", "2", "--mib", "1", "--blocks", "16K", "256K", "--no-plots"},
                   so);
  ASSERT_OK(pid);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 240000, &status));
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << (log.ok() ? *log : "");
  EXPECT_TRUE(BenchNamespaces(*pid).empty());
  std::ifstream csv(out + "/sched.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line.rfind("policy,block_bytes,write_mb_s,read_mb_s,", 0), 0u);
  int rows = 0;
  while (std::getline(csv, line)) {
    const std::vector<std::string> f = CsvFields(line);
    ASSERT_GE(f.size(), 9u) << line;
    EXPECT_GT(std::stod(f[2]), 0) << line;
    EXPECT_GT(std::stod(f[3]), 0) << line;
    EXPECT_EQ(f[8], "0") << line;  // bytes read back wrong
    ++rows;
  }
  EXPECT_EQ(rows, 6);  // 3 policies x 2 block sizes
}

// `clf bench replicas` (paper 001 on replicated reads), small: 2 servers and
// 2 clients, one all-to-all variable-size instance, every heuristic; every
// byte read back right, the CSV has one row per heuristic, and nothing the
// bench made survives it.
TEST_F(SchedNetnsTest, ReplicasBenchEveryHeuristicExactAndNothingLeftBehind) {
  const std::string out = dir_.str() + "/out";
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid = tools::Spawn(
      {TestCluster::Binary("CLF", "clf"), "bench", "replicas", "--out", out, "--servers", "2",
       "--patterns", "all-to-all", "--sizes", "variable", "--instances", "1", "--max-mb", "8",
       "--no-plots"},
      so);
  ASSERT_OK(pid);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 240000, &status));
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << (log.ok() ? *log : "");
  EXPECT_TRUE(NamespacesWithPrefix("clfrb" + std::to_string(*pid) + "-").empty());
  std::ifstream csv(out + "/replicas.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line.rfind("servers,pattern,sizes,heuristic,finish_s,ratio_to_eatf,", 0), 0u);
  std::vector<std::string> heuristics;
  while (std::getline(csv, line)) {
    const std::vector<std::string> f = CsvFields(line);
    ASSERT_GE(f.size(), 10u) << line;
    EXPECT_GT(std::stod(f[4]), 0) << line;  // a finish time was measured
    EXPECT_EQ(f[9], "0") << line;           // bytes read back wrong
    heuristics.push_back(f[3]);
  }
  EXPECT_EQ(heuristics.size(), 7u);  // eatf, sjf, lcdf, lddf, ldsdf, random, primary
}

TEST_F(SchedNetnsTest, StoppedHalfwayItRemovesItsNamespacesAndProcesses) {
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid = tools::Spawn(
      {TestCluster::Binary("CLF", "clf"), "bench", "sched", "--out", dir_.str() + "/out",
       "--clients", "2", "--servers", "2", "--mib", "64", "--rate", "10mbit", "--no-plots"},
      so);
  ASSERT_OK(pid);
  // Wait until the testbed exists (the second client's namespace is made last).
  const std::string last = "clfsb" + std::to_string(*pid) + "-c1";
  ASSERT_TRUE(WaitForNamespace(last, 60000)) << "the bench's testbed never came up";
  ASSERT_EQ(kill(*pid, SIGTERM), 0);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 120000, &status));
  EXPECT_TRUE(WIFEXITED(status));  // it handled the signal and cleaned up
  EXPECT_TRUE(BenchNamespaces(*pid).empty());
  // No clfd or worker of this bench is left (their command lines name its
  // work folder), and the folder is gone.
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_OK(log);
  const size_t at = log->find("work folder ");
  ASSERT_NE(at, std::string::npos) << *log;
  const std::string work = log->substr(at + 12, log->find('\n', at) - at - 12);
  Result<tools::RunResult> ps = tools::Run({"pgrep", "-f", work}, 10000);
  ASSERT_OK(ps);
  EXPECT_EQ(ps->output, "");
  EXPECT_FALSE(std::filesystem::exists(work));
}

}  // namespace
}  // namespace clf::testing
