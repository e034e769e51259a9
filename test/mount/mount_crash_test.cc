// kill -9 of a clfd in the middle of a create/write/unlink/rename storm
// through a real mount (issue 11, "correctness that must hold"): after the
// server's restart and `clf fsck --repair`, `clf fsck` is clean, and every
// file the storm created, fsynced and closed (and did not remove) reads back
// with its content, at its new name when a rename and the sync of its
// directories returned.
#include <sys/stat.h>

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/pattern.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

// Kills (by PID) whatever workers are still running when the test leaves.
struct Workers {
  std::vector<pid_t> pids;
  ~Workers() {
    for (pid_t p : pids) {
      if (p > 0) tools::StopProcess(p, 1000);
    }
  }
};

TEST(MountCrashTest, KillDuringStormThenFsckRepairIsClean) {
  ClusterOptions o;
  o.servers = 4;
  o.mount = true;
  o.stripe_size = 64 * 1024;
  o.rpc_timeout_ms = 2000;
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  const std::string root = cluster.mount_point() + "/storm";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  for (int d = 0; d < 4; ++d) {
    ASSERT_EQ(::mkdir((root + "/d" + std::to_string(d)).c_str(), 0755), 0);
  }
  const std::string helper = TestCluster::Binary("CLF_MOUNT_HELPER", "clf_mount_helper");
  constexpr int kWorkers = 3;
  constexpr int kStormMs = 7000;
  Workers workers;
  std::vector<std::string> outs;
  for (int w = 0; w < kWorkers; ++w) {
    tools::SpawnOptions so;
    so.stdout_path = cluster.dir() + "/storm" + std::to_string(w) + ".out";
    so.stderr_path = cluster.dir() + "/storm" + std::to_string(w) + ".err";
    outs.push_back(so.stdout_path);
    Result<pid_t> pid =
        tools::Spawn({helper, "storm", root, std::to_string(w), std::to_string(kStormMs)}, so);
    ASSERT_OK(pid);
    workers.pids.push_back(*pid);
  }
  // Mid-storm: a fixed point in the storm's kStormMs on purpose (when the
  // crash happens, not a readiness wait), and how long the server stays
  // dead while the workers' requests meet it.
  constexpr auto kCrashAt = std::chrono::milliseconds(2000);
  constexpr auto kDeadFor = std::chrono::milliseconds(700);
  WaitPast(kCrashAt);
  const int victim = 2;
  ASSERT_OK(cluster.KillServer(victim, 9));
  WaitPast(kDeadFor);
  Status restarted = cluster.RestartServer(victim);
  ASSERT_TRUE(restarted.ok()) << restarted.ToString() << "\n" << cluster.LogTail(victim);
  for (pid_t& p : workers.pids) {
    int status = 0;
    ASSERT_TRUE(tools::WaitChild(p, 60000, &status)) << "a storm worker hangs";
    p = 0;
    EXPECT_EQ(status, 0);
  }

  struct Expected {
    std::string path;
    uint64_t seed;
    size_t len;
  };
  std::vector<Expected> expected;
  uint64_t ops = 0, errors = 0;
  for (const std::string& out : outs) {
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string tag;
      ls >> tag;
      if (tag == "file") {
        Expected e;
        ls >> e.path >> e.seed >> e.len;
        expected.push_back(e);
      } else if (tag == "ops") {
        uint64_t o1 = 0, e1 = 0;
        std::string word;
        ls >> o1 >> word >> e1;
        ops += o1;
        errors += e1;
      }
    }
  }
  std::printf("storm: %llu operations, %llu failed (the server was down), %zu files kept\n",
              static_cast<unsigned long long>(ops), static_cast<unsigned long long>(errors),
              expected.size());
  ASSERT_GT(ops, 100u) << "the storm did not run";
  ASSERT_GT(expected.size(), 10u);

  // The mount acknowledges namespace changes before the servers have them
  // (directory leases) and fsck checks a quiet cluster: the mount's queue is
  // committed first (a file's fsync waits for all of it; its status may
  // report a change the restarted server refused, which fsck then sees as
  // it is).
  {
    int fd = ::open((root + "/.barrier").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    (void)::fsync(fd);
    ::close(fd);
  }
  const std::string clf = TestCluster::Binary("CLF", "clf");
  Result<tools::RunResult> r =
      tools::Run({clf, "fsck", "--cluster", cluster.cluster_file(), "--repair"}, 120000);
  ASSERT_OK(r);
  std::printf("%s", r->output.c_str());
  EXPECT_EQ(r->exit_code, 0) << r->output;
  r = tools::Run({clf, "fsck", "--cluster", cluster.cluster_file()}, 120000);
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 0) << "fsck not clean after --repair\n" << r->output;

  // Every file the storm kept, with its content, through the mount.
  size_t bad = 0;
  for (const Expected& e : expected) {
    Result<std::string> data = tools::ReadFileToString(e.path);
    if (!data.ok()) {
      ADD_FAILURE() << e.path << ": " << data.status().ToString();
      if (++bad > 10) break;
      continue;
    }
    if (FirstDifference(*data, PatternBytes(e.seed, 0, e.len)) != -1) {
      ADD_FAILURE() << e.path << ": content differs (size " << data->size() << ", want " << e.len
                    << ")";
      if (++bad > 10) break;
    }
  }
}

}  // namespace
}  // namespace clf::testing
