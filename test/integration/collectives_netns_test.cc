// `clf bench collectives --quick` end to end in network namespaces: every
// metadata mode (client, collective, onehop) at N = 1 and 2 servers, real clfd
// and a worker client in their own namespaces. The CSV must hold every mode,
// N and operation with a nonzero rate, the PNGs must exist, and nothing the
// bench made (namespaces, processes, its work folder) may survive it, also
// when it is stopped with SIGTERM halfway. With --delay-us D the nodes are
// joined by the userspace HopSwitch: a TCP connect between two nodes' namespaces
// (one round trip) takes at least 2D, every create at least 2D, odd frames do
// not stop the switch, and the same cleanup holds.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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

// SIGTERM to a running bench: it exits by itself (it handled the signal and
// cleaned up), leaving no namespace, process or work folder (`log_path`:
// its output).
void StopAndExpectNothingLeft(pid_t pid, const std::string& log_path) {
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(pid, 120000, &status));
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_TRUE(BenchNamespaces(pid).empty());
  Result<std::string> log = tools::ReadFileToString(log_path);
  ASSERT_OK(log);
  ExpectWorkFolderGone(*log);
}

// The rows of DIR/collectives.csv (header checked, then dropped), split at commas.
std::vector<std::vector<std::string>> CsvRows(const std::string& path) {
  std::ifstream csv(path);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  if (!std::getline(csv, line)) {
    ADD_FAILURE() << "no " << path;
    return rows;
  }
  EXPECT_EQ(line.rfind("mode,servers,op,files,ops_per_s,mean_us,p50_us,p99_us,", 0), 0u) << line;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    std::string x;
    while (std::getline(ls, x, ',')) f.push_back(x);
    rows.push_back(f);
  }
  return rows;
}

// Runs `fn` on a thread inside network namespace `ns` (the caller's threads
// stay). `ip netns add` makes the name before it binds the namespace to it:
// setns is retried for a while.
void InNamespace(const std::string& ns, const std::function<void()>& fn) {
  std::thread t([&] {
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; ++i) {
      const int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        rc = setns(fd, CLONE_NEWNET);
        close(fd);
      }
      if (rc != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(rc, 0) << ns << ": " << std::strerror(errno);
    fn();
  });
  t.join();
}

int64_t MonoUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

// Microseconds a TCP connect to ip:port took, -1 if it failed (refused, timed out).
int64_t ConnectUs(const std::string& ip, uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  const int64_t t0 = MonoUs();
  const int rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int64_t took = MonoUs() - t0;
  close(fd);
  return rc == 0 ? took : -1;
}

// Sends frames a switch must survive out of `ifname`: header-only, runt, a
// broadcast with a made-up EtherType, a multicast source address, an unknown
// destination, random bytes at full size, a VLAN tag. Send errors (the kernel
// refusing a frame) are ignored: whatever leaves reaches the switch.
void SendOddFrames(const std::string& ifname) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  to.sll_halen = 6;
  ASSERT_GT(to.sll_ifindex, 0);
  const std::vector<uint8_t> bcast(6, 0xff);
  const std::vector<uint8_t> mcast = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
  const std::vector<uint8_t> nobody = {0x02, 0x42, 0x42, 0x42, 0x42, 0x42};
  auto frame = [](const std::vector<uint8_t>& dst, const std::vector<uint8_t>& src, uint16_t type,
                  size_t payload) {
    std::vector<uint8_t> f(dst);
    f.insert(f.end(), src.begin(), src.end());
    f.push_back(static_cast<uint8_t>(type >> 8));
    f.push_back(static_cast<uint8_t>(type));
    for (size_t i = 0; i < payload; ++i) f.push_back(static_cast<uint8_t>(i * 131 + 7));
    return f;
  };
  std::vector<std::vector<uint8_t>> frames = {
      frame(bcast, nobody, 0x88b5, 0),     // header only
      frame(nobody, bcast, 0x0800, 3),     // runt IPv4 from a broadcast source
      frame(bcast, mcast, 0x1234, 40),     // multicast source address
      frame(nobody, nobody, 0x0800, 20),   // unknown destination, bogus IPv4
      frame(bcast, nobody, 0x86dd, 1486),  // full size, random IPv6
      frame(nobody, nobody, 0x8100, 60),   // VLAN tag
  };
  frames.push_back(std::vector<uint8_t>(13, 0xab));  // shorter than a header
  for (int i = 0; i < 20; ++i) {
    for (const std::vector<uint8_t>& f : frames) {
      std::memcpy(to.sll_addr, f.data(), std::min<size_t>(6, f.size()));
      sendto(fd, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    }
  }
  close(fd);
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
  std::set<std::tuple<std::string, int, std::string>> seen;
  for (const std::vector<std::string>& f : CsvRows(out + "/collectives.csv")) {
    ASSERT_GE(f.size(), 12u) << f.size();
    EXPECT_EQ(f[3], "20") << f[0];                        // files per point in quick mode
    EXPECT_GT(std::stod(f[4]), 0) << f[0];                // ops/s
    EXPECT_GT(std::stod(f[5]), 0) << f[0];                // mean latency
    EXPECT_GE(std::stod(f[7]), std::stod(f[6])) << f[0];  // p99 >= p50
    EXPECT_EQ(f[11], "0") << f[0];                        // delay_us: the kernel bridge
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
  // Wait until the client's namespace exists (made last), then until the run
  // is underway: a process (the first point's clfd) lives in a server's namespace.
  const std::string prefix = "clfcb" + std::to_string(*pid);
  ASSERT_TRUE(WaitForNamespace(prefix + "-c", 60000)) << "the bench's testbed never came up";
  ASSERT_TRUE(WaitUntil(
      [&] {
        Result<tools::RunResult> r = tools::Run({"ip", "netns", "pids", prefix + "-s0"}, 10000);
        return r.ok() && r->exit_code == 0 && !r->output.empty();
      },
      std::chrono::seconds(60)))
      << "no process ever ran in the bench's server namespace";
  StopAndExpectNothingLeft(*pid, dir_.str() + "/bench.log");
}

constexpr int64_t kDelayUs = 2000;

// The quick run through the HopSwitch: every mode, N and op, the delay in the
// CSV, and no create faster than the round trip it needs (2D; about 1 ms
// without the delay). Nothing is left behind.
TEST_F(CollectivesNetnsTest, DelayedQuickRunHoldsEveryRoundTrip) {
  const std::string out = dir_.str() + "/out";
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid =
      tools::Spawn({TestCluster::Binary("CLF", "clf"), "bench", "collectives", "--quick", "--out",
                    out, "--no-plots", "--delay-us", std::to_string(kDelayUs)},
                   so);
  ASSERT_OK(pid);
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(*pid, 240000, &status));
  Result<std::string> log = tools::ReadFileToString(dir_.str() + "/bench.log");
  ASSERT_OK(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << *log;
  EXPECT_NE(log->find("userspace switch holding every frame 2000 us"), std::string::npos) << *log;
  EXPECT_NE(log->find("switch: "), std::string::npos) << *log;
  EXPECT_TRUE(BenchNamespaces(*pid).empty());
  ExpectWorkFolderGone(*log);
  std::set<std::tuple<std::string, int, std::string>> seen;
  for (const std::vector<std::string>& f : CsvRows(out + "/collectives.csv")) {
    ASSERT_GE(f.size(), 12u) << f.size();
    EXPECT_EQ(f[11], std::to_string(kDelayUs)) << f[0];
    if (f[2] == "create") {
      // A create needs at least one request and its answer: two hops, 2D.
      EXPECT_GE(std::stod(f[5]), 2.0 * kDelayUs) << f[0] << " N=" << f[1] << " mean";
      EXPECT_GE(std::stod(f[6]), 2.0 * kDelayUs) << f[0] << " N=" << f[1] << " p50";
    }
    seen.insert({f[0], std::stoi(f[1]), f[2]});
  }
  EXPECT_EQ(seen.size(), 18u);
}

// A bench with the HopSwitch, stopped halfway: while it runs, odd frames sent
// into the switch do not stop it, and a TCP connect from the client's namespace
// to the server's (SYN out, SYN-ACK back: two hops) takes at least 2D every
// time (well under 1 ms through the kernel bridge). After SIGTERM no namespace,
// process or folder of the bench is left.
TEST_F(CollectivesNetnsTest, DelayedSwitchDelaysEveryHopAndLeavesNothingWhenStopped) {
  tools::SpawnOptions so;
  so.stdout_path = dir_.str() + "/bench.log";
  Result<pid_t> pid =
      tools::Spawn({TestCluster::Binary("CLF", "clf"), "bench", "collectives", "--servers", "1",
                    "--files", "100000", "--modes", "client", "--out", dir_.str() + "/out",
                    "--no-plots", "--delay-us", std::to_string(kDelayUs)},
                   so);
  ASSERT_OK(pid);
  // Whatever fails below, the bench does not outlive the test.
  struct StopBench {
    pid_t pid;
    ~StopBench() {
      if (tools::ProcessAlive(pid)) tools::StopProcess(pid, 10000);
    }
  } stop_bench{*pid};
  const std::string prefix = "clfcb" + std::to_string(*pid) + "-";
  ASSERT_TRUE(WaitForNamespace(prefix + "c", 60000)) << "the bench's testbed never came up";
  std::vector<int64_t> took;
  InNamespace(prefix + "c", [&] {
    // The server listens once the testbed is complete and clfd is up (10.78.0.10:7000).
    ASSERT_GE(TestCluster::PollUntil([&] { return ConnectUs("10.78.0.10", 7000) >= 0; }, 30000), 0);
    SendOddFrames("eth0");
    for (int i = 0; i < 5; ++i) took.push_back(ConnectUs("10.78.0.10", 7000));
  });
  ASSERT_EQ(took.size(), 5u);
  for (int64_t us : took)
    EXPECT_GE(us, 2 * kDelayUs) << "a connect (one round trip) took " << us << " us";
  EXPECT_TRUE(tools::ProcessAlive(*pid)) << "the bench (and its switch thread) died";
  StopAndExpectNothingLeft(*pid, dir_.str() + "/bench.log");
}

}  // namespace
}  // namespace clf::testing
