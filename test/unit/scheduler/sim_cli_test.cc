// `clf sim` end to end through the built binary: CSV headers, row counts, and
// EATF's ratio to itself. Runs only when CLF_BIN names the clf binary (meson
// sets it for the scheduler_sim_cli test); skipped otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/test_util.h"

namespace clf::scheduler {
namespace {

std::vector<std::vector<std::string>> ReadCsv(const std::string& path, std::string* header) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, *header);
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

class SimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("CLF_BIN");
    if (bin == nullptr || *bin == '\0') GTEST_SKIP() << "CLF_BIN not set";
    bin_ = bin;
    plots_ = std::system("command -v gnuplot > /dev/null 2>&1") == 0;
  }
  int Run(const std::string& args) {
    const std::string cmd = bin_ + " sim " + args + " --out " + dir_.str() +
                            (plots_ ? "" : " --no-plots") + " > " + dir_.str() + "/stdout.txt";
    return std::system(cmd.c_str());
  }
  std::string bin_;
  bool plots_ = false;
  testing::TempDir dir_{"clf-sim-cli"};
};

TEST_F(SimCli, Paper001) {
  ASSERT_EQ(Run("paper001 --runs 2 --seed 3"), 0);
  std::string header;
  const auto rows = ReadCsv(dir_.str() + "/paper001.csv", &header);
  EXPECT_EQ(header, "pattern,sizes,cn_per_ion,io_nodes,heuristic,ratio_to_eatf");
  // 2 patterns x 2 size classes x 3 ratios x 9 I/O node counts x 6 heuristics.
  ASSERT_EQ(rows.size(), 648u);
  int eatf = 0;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 6u);
    EXPECT_TRUE(r[0] == "random" || r[0] == "all-to-all") << r[0];
    EXPECT_TRUE(r[1] == "uniform" || r[1] == "variable") << r[1];
    const double ratio = std::stod(r[5]);
    if (r[4] == "eatf") {
      ++eatf;
      EXPECT_EQ(ratio, 1.0);
    } else {
      EXPECT_GT(ratio, 0.5);
    }
  }
  EXPECT_EQ(eatf, 108);
  if (plots_) {
    EXPECT_TRUE(std::filesystem::exists(dir_.path() / "paper001-random-variable.png"));
    EXPECT_TRUE(std::filesystem::exists(dir_.path() / "paper001-all-to-all-uniform.png"));
  }
}

TEST_F(SimCli, Paper000) {
  ASSERT_EQ(Run("paper000"), 0);
  std::string header;
  const auto rows = ReadCsv(dir_.str() + "/paper000.csv", &header);
  EXPECT_EQ(header, "policy,block_bytes,schedule_length,throughput_mb_s");
  // 3 policies x {write, read} x 11 block sizes (4 KiB .. 4 MiB).
  ASSERT_EQ(rows.size(), 66u);
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 4u);
    // No schedule beats the 8 links at 120 MB/s: 960 MB/s.
    EXPECT_LE(std::stod(r[3]), 960.0 + 1e-6) << r[0];
    if (r[0] == "hash-ios") {
      EXPECT_NEAR(std::stod(r[3]), 960.0, 0.01);
    }
  }
  if (plots_) {
    EXPECT_TRUE(std::filesystem::exists(dir_.path() / "paper000.png"));
  }
}

TEST_F(SimCli, RejectsMissingOut) {
  EXPECT_NE(std::system((bin_ + " sim paper000 > /dev/null 2>&1").c_str()), 0);
}

}  // namespace
}  // namespace clf::scheduler
