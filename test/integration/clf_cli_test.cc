// The `clf` admin CLI against a real cluster: status, df, layout, setlayout, fsck.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "clf/client.h"
#include "test/support/cli_cluster_test.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

class ClfCliTest : public CliClusterTest {};

TEST_F(ClfCliTest, StatusShowsEveryServerAndDownOnes) {
  tools::RunResult r = Clf({"status", "--cluster", cluster_->cluster_file(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output, "\"up\":true"), 3u) << r.output;
  for (const ServerConfig& s : cluster_->config().servers) {
    EXPECT_NE(r.output.find(s.address), std::string::npos) << r.output;
  }
  r = Clf({"status", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 of 3 servers up"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("transport"), std::string::npos) << r.output;
  EXPECT_EQ(Count(r.output, " tcp"), 3u) << "every server offers the TCP data channel\n" << r.output;

  ASSERT_OK(cluster_->KillServer(2, 9));
  const int64_t t0 = tools::NowMs();
  r = Clf({"status", "--cluster", cluster_->cluster_file()});
  EXPECT_LE(tools::NowMs() - t0, 10000) << "status with a server down took too long";
  EXPECT_EQ(r.exit_code, 0) << "one server down is not an error of the command\n" << r.output;
  EXPECT_NE(r.output.find("DOWN"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 of 3 servers up"), std::string::npos) << r.output;
  // $CLF_CLUSTER stands in for --cluster.
  Result<tools::RunResult> env_run = tools::Run({TestCluster::Binary("CLF", "clf"), "df"}, 60000,
                                                {"CLF_CLUSTER=" + cluster_->cluster_file()});
  ASSERT_OK(env_run);
  EXPECT_EQ(env_run->exit_code, 0) << env_run->output;
  EXPECT_NE(env_run->output.find("total"), std::string::npos) << env_run->output;
  EXPECT_NE(env_run->output.find("DOWN"), std::string::npos) << env_run->output;
}

TEST_F(ClfCliTest, LayoutAndSetLayout) {
  client::CreateArgs dir;
  dir.type = client::FileType::kDirectory;
  dir.mode = 0755;
  Result<client::Attr> d = c().CreateSync(c().root(), "narrow", dir);
  ASSERT_OK(d);
  tools::RunResult r = Clf({"setlayout", "--cluster", cluster_->cluster_file(), "/narrow",
                            "--stripe-size", "128K", "--stripe-count", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<client::Attr> f = c().CreateSync(d->handle, "f", client::CreateArgs{});
  ASSERT_OK(f);
  EXPECT_EQ(f->layout.stripe_size, 128u * 1024);
  EXPECT_EQ(f->layout.stripe_count, 2u);
  ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, PatternBytes(1, 0, 5 * 128 * 1024)));
  r = Clf({"layout", "--cluster", cluster_->cluster_file(), "/narrow/f"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stripe_count 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("5 stripe unit(s)"), std::string::npos) << r.output;
  // Units 0,2,4 on the first data server and 1,3 on the second.
  EXPECT_NE(r.output.find("units 0,2,4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("units 1,3"), std::string::npos) << r.output;
  EXPECT_EQ(Count(r.output, "  server "), 2u) << r.output;
  r = Clf({"setlayout", "--cluster", cluster_->cluster_file(), "/narrow", "--stripe-count", "9"});
  EXPECT_NE(r.exit_code, 0) << "9 servers of 3 accepted: " << r.output;
  r = Clf({"setlayout", "--cluster", cluster_->cluster_file(), "/narrow/f", "--stripe-count", "1"});
  EXPECT_NE(r.exit_code, 0) << "setlayout on a file accepted: " << r.output;
}

TEST_F(ClfCliTest, FsckFindsAndRepairsOrphans) {
  for (int i = 0; i < 5; ++i) {
    Result<client::Attr> f = c().CreateSync(c().root(), "f" + std::to_string(i), client::CreateArgs{});
    ASSERT_OK(f);
    ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, PatternBytes(2, 0, 100000)));
  }
  tools::RunResult r = Clf({"fsck", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("clean"), std::string::npos) << r.output;

  // Plant a data object whose file never existed, as a crash mid-create leaves
  // one: with server 1 stopped, in its object folder.
  ASSERT_OK(cluster_->StopServer(1));
  const Handle ghost = MakeHandle(1, 0xABCDE12345ull);
  char rel[64];
  std::snprintf(rel, sizeof rel, "/objects/%02x/%016" PRIx64, static_cast<unsigned>(ghost % 256),
                ghost);
  const std::string ghost_path = cluster_->data_dir(1) + rel;
  ASSERT_TRUE(std::filesystem::is_directory(std::filesystem::path(ghost_path).parent_path()))
      << "object folder layout changed: " << ghost_path;
  ASSERT_OK(tools::WriteFileWithMode(ghost_path, "orphaned bytes", 0600));
  ASSERT_OK(cluster_->RestartServer(1));

  r = Clf({"fsck", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("1 orphaned data object"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(ghost_path)) << "fsck without --repair removed something";
  r = Clf({"fsck", "--cluster", cluster_->cluster_file(), "--repair"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("removed 1 orphaned"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(ghost_path));
  r = Clf({"fsck", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The real files were not touched.
  for (int i = 0; i < 5; ++i) {
    Result<client::Attr> f = c().LookupSync(c().root(), "f" + std::to_string(i));
    ASSERT_OK(f);
    Result<std::string> data = c().ReadSync(f->handle, f->layout, 0, 100000);
    ASSERT_OK(data);
    EXPECT_EQ(FirstDifference(*data, PatternBytes(2, 0, 100000)), -1);
  }
  // With a server down, fsck refuses to decide.
  ASSERT_OK(cluster_->KillServer(2, 9));
  r = Clf({"fsck", "--cluster", cluster_->cluster_file(), "--repair"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// `clf bench transport` on a cluster with the default transport (auto, no
// RDMA device here): the tcp and grpc rows move real bytes and check them
// (a row whose read-back differs is n/a, not a figure), and the rdma row is
// n/a with the reason and how to run it. Lists are taken comma-separated
// (as the README writes them) or space-separated. Five runs: each opens and
// closes a client per row in one process, which once hung the bench (a lost
// wakeup in its request window) and could abort it inside gRPC when the
// callback queue was torn down between clients (common/status_grpc.h).
TEST_F(ClfCliTest, BenchTransportMeasuresTcpAndSaysWhyRdmaIsAbsent) {
  for (int run = 0; run < 5; ++run) {
    tools::RunResult r = Clf({"bench", "transport", "--cluster", cluster_->cluster_file(), "--mib", "8",
                              "--windows", "1,2", "--regions", "0", "4", "--transports", "tcp,rdma,grpc",
                              "--no-iperf"});
    ASSERT_EQ(r.exit_code, 0) << "run " << run << "\n" << r.output;
    for (const std::string kind : {"fresh", "rewrite 4 MiB"}) {
      for (const std::string t : {"tcp", "grpc"}) {
        const std::string row = t + std::string(5 - t.size(), ' ') + " window 2   " + kind;
        const size_t at = r.output.find(row);
        ASSERT_NE(at, std::string::npos) << row << "\n" << r.output;
        const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
        EXPECT_NE(line.find("MB/s   read"), std::string::npos) << line;
        EXPECT_EQ(line.find("n/a"), std::string::npos) << line;
      }
    }
    EXPECT_EQ(Count(r.output, "rdma  window "), 4u) << r.output;
    EXPECT_EQ(Count(r.output, "the cluster's transport is not \"rdma\""), 4u) << r.output;
    EXPECT_NE(r.output.find("transport=\"rdma\""), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace clf::testing
