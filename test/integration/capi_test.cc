// The application API (clf/clf.h) against real clfd processes: this binary
// links only the public libclf.so (not the internal client) and starts the
// servers with `clf init` and clfd, as a user would. CApiMountTest adds a
// clfmount mount of the same cluster (root and /dev/fuse: suite mount).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "clf/clf.h"
#include "test/support/pattern.h"
#include "test/support/scrape.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

constexpr int kServers = 3;
constexpr int kStripe = 4096;  // small: a few KiB cross every server
constexpr int kStartTimeoutMs = 60000;

std::string Binary(const char* env, const char* name) {
  const char* p = std::getenv(env);
  return p != nullptr ? p : name;
}

// Servers of one cluster (and optionally a mount), stopped by PID whatever happens.
class ApiCluster {
 public:
  ~ApiCluster() { Stop(); }

  // Writes the cluster file with `clf init`, starts the servers and waits
  // for each one's pid file (written once it listens).
  ::testing::AssertionResult Start() {
    Result<std::vector<uint16_t>> ports = tools::PickFreePorts(2 * kServers);
    if (!ports.ok()) return ::testing::AssertionFailure() << ports.status().ToString();
    std::string servers;
    for (int k = 0; k < kServers; ++k) {
      servers +=
          (k == 0 ? "" : ",") + ("127.0.0.1:" + std::to_string((*ports)[static_cast<size_t>(k)]));
    }
    // Metrics ports 1..kServers from clf init, then replaced by free ones.
    Result<tools::RunResult> init = tools::Run(
        {Binary("CLF", "clf"), "init", "--servers", servers, "--out", dir() + "/etc", "--data-root",
         dir() + "/data", "--stripe-size", std::to_string(kStripe), "--metrics-port", "1"},
        60000);
    if (!init.ok() || init->exit_code != 0) {
      return ::testing::AssertionFailure()
             << "clf init: " << (init.ok() ? init->output : init.status().ToString());
    }
    Result<std::string> toml = tools::ReadFileToString(cluster_file());
    if (!toml.ok()) return ::testing::AssertionFailure() << toml.status().ToString();
    for (int k = 0; k < kServers; ++k) {
      const std::string from = "metrics_address = '127.0.0.1:" + std::to_string(k + 1) + "'";
      metrics_.push_back("127.0.0.1:" +
                         std::to_string((*ports)[static_cast<size_t>(kServers + k)]));
      const size_t at = toml->find(from);
      if (at == std::string::npos)
        return ::testing::AssertionFailure() << "no " << from << " in " << *toml;
      toml->replace(at, from.size(), "metrics_address = '" + metrics_.back() + "'");
    }
    if (Status w = tools::WriteFileWithMode(cluster_file(), *toml, 0644); !w.ok()) {
      return ::testing::AssertionFailure() << w.ToString();
    }
    for (int k = 0; k < kServers; ++k) {
      const std::string pid_file = dir() + "/clfd" + std::to_string(k) + ".pid";
      tools::SpawnOptions so;
      so.stdout_path = dir() + "/clfd" + std::to_string(k) + ".log";
      Result<pid_t> pid = tools::Spawn({Binary("CLFD", "clfd"), "--cluster", cluster_file(), "--id",
                                        std::to_string(k), "--pid-file", pid_file},
                                       so);
      if (!pid.ok()) return ::testing::AssertionFailure() << pid.status().ToString();
      pids_.push_back(*pid);
      pid_files_.push_back(pid_file);
    }
    for (int k = 0; k < kServers; ++k) {
      if (!WaitFor([&] { return tools::ReadPidFile(pid_files_[static_cast<size_t>(k)]) > 0; },
                   [&] { return !tools::ProcessAlive(pids_[static_cast<size_t>(k)]); })) {
        return ::testing::AssertionFailure() << "clfd " << k << " did not start: " << Log(k);
      }
    }
    return ::testing::AssertionSuccess();
  }

  // Mounts the cluster with clfmount -f and waits until the mount is live.
  ::testing::AssertionResult Mount() {
    std::filesystem::create_directories(mount_point());
    tools::SpawnOptions so;
    so.stdout_path = dir() + "/clfmount.log";
    Result<pid_t> pid =
        tools::Spawn({Binary("CLFMOUNT", "clfmount"), cluster_file(), mount_point(), "-f"}, so);
    if (!pid.ok()) return ::testing::AssertionFailure() << pid.status().ToString();
    mount_pid_ = *pid;
    if (!WaitFor([&] { return tools::IsMountRoot(mount_point()); },
                 [&] { return !tools::ProcessAlive(mount_pid_); })) {
      return ::testing::AssertionFailure() << "mount did not appear";
    }
    return ::testing::AssertionSuccess();
  }

  void Stop() {
    if (mount_pid_ > 0) {
      tools::UnmountFuse(mount_point()).IgnoreError();
      if (!tools::WaitChild(mount_pid_, 10000)) tools::StopProcess(mount_pid_, 5000);
      mount_pid_ = 0;
    }
    for (pid_t p : pids_) tools::StopProcess(p, 10000);
    pids_.clear();
  }

  // The sum over the servers of one metrics sample (-1: a server lacks it).
  double MetricSum(const std::string& series) const {
    double sum = 0;
    for (const std::string& m : metrics_) {
      const double v = Sample(Body(Get(m)), series);
      if (v < 0) return -1;
      sum += v;
    }
    return sum;
  }

  std::string dir() const { return tmp_.str(); }
  std::string cluster_file() const { return dir() + "/etc/cluster.toml"; }
  std::string mount_point() const { return dir() + "/mnt"; }

 private:
  // Polls `ready` every 20 ms until it holds; false if `failed` holds first
  // or after kStartTimeoutMs.
  template <typename Ready, typename Failed>
  static bool WaitFor(Ready ready, Failed failed) {
    const int64_t deadline = tools::NowMs() + kStartTimeoutMs;
    while (!ready()) {
      if (failed() || tools::NowMs() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  std::string Log(int k) const {
    std::ifstream in(dir() + "/clfd" + std::to_string(k) + ".log");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  TempDir tmp_{"clf-capi"};
  std::vector<pid_t> pids_;
  std::vector<std::string> pid_files_;
  std::vector<std::string> metrics_;  // each server's metrics address
  pid_t mount_pid_ = 0;
};

// A connection that disconnects when it goes away.
struct Fs {
  clf_fs_t* fs = nullptr;
  ~Fs() { clf_disconnect(fs); }
};

std::string Err() { return clf_last_error(); }

class CApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new ApiCluster();
    ::testing::AssertionResult up = cluster_->Start();
    if (!up) {
      start_error_ = new std::string(up.message());
      return;
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(start_error_, nullptr) << *start_error_;
    ASSERT_EQ(clf_connect(cluster_->cluster_file().c_str(), &fs_.fs), 0) << Err();
  }

  // Creates `path` with `content` (written at 0) and closes it.
  void WriteFile(const std::string& path, const std::string& content) {
    clf_file_t* f = nullptr;
    ASSERT_EQ(clf_open(fs_.fs, path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644, &f), 0) << Err();
    ASSERT_EQ(clf_pwrite(f, content.data(), content.size(), 0),
              static_cast<ssize_t>(content.size()))
        << Err();
    ASSERT_EQ(clf_close(f), 0) << Err();
  }
  std::string ReadAll(const std::string& path, size_t max = 1 << 20) {
    clf_file_t* f = nullptr;
    if (clf_open(fs_.fs, path.c_str(), O_RDONLY, 0, &f) != 0) return "<open: " + Err() + ">";
    std::string out(max, '\0');
    const ssize_t n = clf_pread(f, out.data(), out.size(), 0);
    EXPECT_EQ(clf_close(f), 0);
    if (n < 0) return "<pread: " + Err() + ">";
    out.resize(static_cast<size_t>(n));
    return out;
  }
  int64_t SizeOf(const std::string& path) {
    struct stat st;
    const int rc = clf_stat(fs_.fs, path.c_str(), &st);
    return rc != 0 ? rc : st.st_size;
  }

  static ApiCluster* cluster_;
  static std::string* start_error_;
  Fs fs_;
};

ApiCluster* CApiTest::cluster_ = nullptr;
std::string* CApiTest::start_error_ = nullptr;

TEST_F(CApiTest, CreateWriteCloseThenReadBack) {
  const std::string head = PatternBytes(1, 0, 100000), tail = PatternBytes(1, 200000, 5000);
  clf_file_t* f = nullptr;
  ASSERT_EQ(clf_open(fs_.fs, "/rw", O_CREAT | O_EXCL | O_RDWR, 0640, &f), 0) << Err();
  ASSERT_EQ(clf_pwrite(f, head.data(), head.size(), 0), 100000) << Err();
  ASSERT_EQ(clf_pwrite(f, tail.data(), tail.size(), 200000), 5000) << Err();
  ASSERT_EQ(clf_close(f), 0) << Err();

  ASSERT_EQ(clf_open(fs_.fs, "/rw", O_RDONLY, 0, &f), 0) << Err();
  struct stat st;
  ASSERT_EQ(clf_fstat(f, &st), 0) << Err();
  EXPECT_EQ(st.st_size, 205000);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  std::string got(300000, 'x');
  // Asked past the end: what is before it, the hole as zeros.
  ASSERT_EQ(clf_pread(f, got.data(), got.size(), 0), 205000) << Err();
  got.resize(205000);
  const std::string want = head + std::string(100000, '\0') + tail;
  EXPECT_EQ(FirstDifference(got, want), -1);
  char b;
  EXPECT_EQ(clf_pread(f, &b, 1, 205000), 0);  // at the end
  EXPECT_EQ(clf_pread(f, &b, 1, 999999), 0);  // past it
  std::string mid(10, '\0');
  EXPECT_EQ(clf_pread(f, mid.data(), 10, 204995), 5);
  EXPECT_EQ(mid.substr(0, 5), tail.substr(4995));
  ASSERT_EQ(clf_close(f), 0) << Err();

  // A second connection (another client) sees the same bytes.
  Fs other;
  ASSERT_EQ(clf_connect(cluster_->cluster_file().c_str(), &other.fs), 0) << Err();
  ASSERT_EQ(clf_open(other.fs, "/rw", O_RDONLY, 0, &f), 0) << Err();
  std::string again(205000, '\0');
  ASSERT_EQ(clf_pread(f, again.data(), again.size(), 0), 205000) << Err();
  EXPECT_EQ(FirstDifference(again, want), -1);
  ASSERT_EQ(clf_close(f), 0) << Err();
}

TEST_F(CApiTest, TruncAndCreateFlags) {
  WriteFile("/flags", "0123456789");
  clf_file_t* f = nullptr;
  EXPECT_EQ(clf_open(fs_.fs, "/flags", O_CREAT | O_EXCL | O_WRONLY, 0644, &f), -EEXIST);
  EXPECT_NE(Err().find("flags"), std::string::npos) << Err();
  // O_CREAT without O_EXCL opens the existing file; without O_TRUNC it keeps its bytes.
  ASSERT_EQ(clf_open(fs_.fs, "/flags", O_CREAT | O_WRONLY, 0644, &f), 0) << Err();
  ASSERT_EQ(clf_pwrite(f, "ab", 2, 0), 2);
  ASSERT_EQ(clf_close(f), 0) << Err();
  EXPECT_EQ(ReadAll("/flags"), "ab23456789");
  ASSERT_EQ(clf_open(fs_.fs, "/flags", O_WRONLY | O_TRUNC, 0, &f), 0) << Err();
  EXPECT_EQ(SizeOf("/flags"), 0);
  ASSERT_EQ(clf_pwrite(f, "xyz", 3, 0), 3);
  ASSERT_EQ(clf_close(f), 0) << Err();
  EXPECT_EQ(ReadAll("/flags"), "xyz");
  // The umask is applied to the mode of a new file.
  EXPECT_EQ(clf_umask(fs_.fs, 077), 022u);
  ASSERT_EQ(clf_open(fs_.fs, "/masked", O_CREAT | O_WRONLY, 0666, &f), 0) << Err();
  ASSERT_EQ(clf_close(f), 0);
  struct stat st;
  ASSERT_EQ(clf_stat(fs_.fs, "/masked", &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(CApiTest, MissingAndWrongTypes) {
  clf_file_t* f = nullptr;
  struct stat st;
  EXPECT_EQ(clf_open(fs_.fs, "/missing", O_RDONLY, 0, &f), -ENOENT);
  EXPECT_EQ(clf_open(fs_.fs, "/missing/x", O_CREAT | O_WRONLY, 0644, &f), -ENOENT);
  EXPECT_EQ(clf_stat(fs_.fs, "/missing", &st), -ENOENT);
  EXPECT_EQ(clf_unlink(fs_.fs, "/missing"), -ENOENT);
  EXPECT_EQ(f, nullptr);
  WriteFile("/plain", "p");
  EXPECT_EQ(clf_open(fs_.fs, "/plain/x", O_RDONLY, 0, &f), -ENOTDIR);
  EXPECT_EQ(clf_mkdir(fs_.fs, "/plain/d", 0755), -ENOTDIR);
  ASSERT_EQ(clf_mkdir(fs_.fs, "/dir", 0755), 0) << Err();
  EXPECT_EQ(clf_mkdir(fs_.fs, "/dir", 0755), -EEXIST);
  EXPECT_EQ(clf_open(fs_.fs, "/dir", O_RDONLY, 0, &f), -EISDIR);
  EXPECT_EQ(clf_open(fs_.fs, "/dir", O_CREAT | O_WRONLY, 0644, &f), -EISDIR);
  EXPECT_EQ(clf_open(fs_.fs, "/", O_RDONLY, 0, &f), -EISDIR);
  EXPECT_EQ(clf_unlink(fs_.fs, "/dir"), -EISDIR);
  ASSERT_EQ(clf_stat(fs_.fs, "/dir/", &st), 0) << Err();
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  WriteFile("/dir/inner", "i");
  EXPECT_EQ(clf_rmdir(fs_.fs, "/dir"), -ENOTEMPTY);
  EXPECT_EQ(clf_rmdir(fs_.fs, "/plain"), -ENOTDIR);
  ASSERT_EQ(clf_unlink(fs_.fs, "/dir/inner"), 0) << Err();
  EXPECT_EQ(clf_stat(fs_.fs, "/dir/inner", &st), -ENOENT);
  ASSERT_EQ(clf_rmdir(fs_.fs, "/dir"), 0) << Err();
  EXPECT_EQ(clf_stat(fs_.fs, "/dir", &st), -ENOENT);
}

TEST_F(CApiTest, PermissionsOfOtherUsers) {
  // As root: a directory everyone may write in. Then uid 1000 makes a
  // private directory (0700) with a file, and a shared 0644 and a 0600 file.
  clf_umask(fs_.fs, 0);
  ASSERT_EQ(clf_mkdir(fs_.fs, "/shared", 0777), 0) << Err();
  ASSERT_EQ(clf_set_credentials(fs_.fs, 1000, 1000, nullptr, 0), 0) << Err();
  ASSERT_EQ(clf_mkdir(fs_.fs, "/shared/private", 0700), 0) << Err();
  WriteFile("/shared/private/f", "secret");
  WriteFile("/shared/readable", "r");
  WriteFile("/shared/own", "o");
  clf_file_t* f = nullptr;
  ASSERT_EQ(clf_open(fs_.fs, "/shared/mine", O_CREAT | O_WRONLY, 0600, &f), 0) << Err();
  ASSERT_EQ(clf_close(f), 0);
  ASSERT_EQ(clf_open(fs_.fs, "/shared/own", O_RDONLY, 0, &f), 0) << Err();
  ASSERT_EQ(clf_close(f), 0);
  struct stat st;
  ASSERT_EQ(clf_stat(fs_.fs, "/shared/own", &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  // Another uid (its groups given explicitly, none in common).
  const uint32_t groups[] = {3000, 3001};
  ASSERT_EQ(clf_set_credentials(fs_.fs, 2000, 2000, groups, 2), 0) << Err();
  EXPECT_EQ(clf_open(fs_.fs, "/shared/private/f", O_RDONLY, 0, &f), -EACCES) << Err();
  EXPECT_EQ(clf_stat(fs_.fs, "/shared/private/f", &st), -EACCES);
  EXPECT_EQ(clf_open(fs_.fs, "/shared/private/new", O_CREAT | O_WRONLY, 0644, &f), -EACCES);
  EXPECT_EQ(clf_unlink(fs_.fs, "/shared/private/f"), -EACCES);
  // 0644 of uid 1000: readable, not writable (the server's check).
  ASSERT_EQ(clf_open(fs_.fs, "/shared/readable", O_RDONLY, 0, &f), 0) << Err();
  ASSERT_EQ(clf_close(f), 0);
  EXPECT_EQ(clf_open(fs_.fs, "/shared/readable", O_WRONLY, 0, &f), -EACCES);
  EXPECT_EQ(clf_open(fs_.fs, "/shared/readable", O_CREAT | O_RDWR, 0644, &f), -EACCES);
  // 0600 of uid 1000: neither.
  EXPECT_EQ(clf_open(fs_.fs, "/shared/mine", O_RDONLY, 0, &f), -EACCES);
  EXPECT_EQ(clf_open(fs_.fs, "/shared/mine", O_WRONLY, 0, &f), -EACCES);
  // The group's bits: the file's group among the caller's groups.
  const uint32_t with_1000[] = {1000};
  ASSERT_EQ(clf_set_credentials(fs_.fs, 2001, 2001, with_1000, 1), 0) << Err();
  EXPECT_EQ(clf_open(fs_.fs, "/shared/private/f", O_RDONLY, 0, &f), -EACCES);  // dir is 0700

  // uid 1000 and root get in.
  ASSERT_EQ(clf_set_credentials(fs_.fs, 1000, 1000, nullptr, 0), 0) << Err();
  EXPECT_EQ(ReadAll("/shared/private/f"), "secret");
  ASSERT_EQ(clf_set_credentials(fs_.fs, 0, 0, nullptr, 0), 0) << Err();
  EXPECT_EQ(ReadAll("/shared/private/f"), "secret");
}

// While a file is open for writing its metadata server gathers the size
// from the data servers for a stat; the close ends the open there (the
// servers' open-writers gauge drops) and leaves the size in M's record.
TEST_F(CApiTest, CloseReportsTheSize) {
  const double writers = cluster_->MetricSum("clf_open_writers");
  ASSERT_GE(writers, 0);
  const std::string data = PatternBytes(2, 0, 12345);
  clf_file_t* f = nullptr;
  ASSERT_EQ(clf_open(fs_.fs, "/sized", O_CREAT | O_WRONLY, 0644, &f), 0) << Err();
  EXPECT_EQ(cluster_->MetricSum("clf_open_writers"), writers + 1);
  ASSERT_EQ(clf_pwrite(f, data.data(), data.size(), 0), 12345) << Err();
  struct stat st;
  ASSERT_EQ(clf_fstat(f, &st), 0) << Err();
  EXPECT_EQ(st.st_size, 12345);
  ASSERT_EQ(clf_close(f), 0) << Err();
  EXPECT_EQ(cluster_->MetricSum("clf_open_writers"), writers);
  EXPECT_EQ(SizeOf("/sized"), 12345);
  Fs other;
  ASSERT_EQ(clf_connect(cluster_->cluster_file().c_str(), &other.fs), 0) << Err();
  ASSERT_EQ(clf_stat(other.fs, "/sized", &st), 0) << Err();
  EXPECT_EQ(st.st_size, 12345);

  // A reader's open is no writer; an open for writing that writes nothing
  // ends as it began.
  ASSERT_EQ(clf_open(fs_.fs, "/sized", O_RDONLY, 0, &f), 0) << Err();
  EXPECT_EQ(cluster_->MetricSum("clf_open_writers"), writers);
  ASSERT_EQ(clf_close(f), 0) << Err();
  ASSERT_EQ(clf_open(fs_.fs, "/sized", O_RDWR, 0, &f), 0) << Err();
  EXPECT_EQ(cluster_->MetricSum("clf_open_writers"), writers + 1);
  ASSERT_EQ(clf_pwrite(f, data.data(), 100, 50000), 100) << Err();
  ASSERT_EQ(clf_fsync(f), 0) << Err();
  EXPECT_EQ(SizeOf("/sized"), 50100);
  ASSERT_EQ(clf_close(f), 0) << Err();
  EXPECT_EQ(cluster_->MetricSum("clf_open_writers"), writers);
  EXPECT_EQ(SizeOf("/sized"), 50100);
  // A failed open (O_EXCL) counts no writer.
  EXPECT_EQ(clf_open(fs_.fs, "/sized", O_CREAT | O_EXCL | O_WRONLY, 0644, &f), -EEXIST);
  EXPECT_EQ(cluster_->MetricSum("clf_open_writers"), writers);
}

// Two writers interleave noncontiguous blocks (as MPI ranks writing a vector
// type of blocklen B, stride 2B); each gathers from memory pieces that do not
// line up with the file pieces. A list read in another order, and a plain
// read, give back every byte.
TEST_F(CApiTest, InterleavedListWriteAndRead) {
  constexpr int kBlocks = 2000;  // per writer
  constexpr int64_t kBlock = 1000;
  const std::string want = PatternBytes(3, 0, 2 * kBlocks * kBlock);
  clf_file_t* writers[2] = {nullptr, nullptr};
  Fs other;
  ASSERT_EQ(clf_connect(cluster_->cluster_file().c_str(), &other.fs), 0) << Err();
  ASSERT_EQ(clf_open(fs_.fs, "/list", O_CREAT | O_WRONLY, 0644, &writers[0]), 0) << Err();
  ASSERT_EQ(clf_open(other.fs, "/list", O_WRONLY, 0, &writers[1]), 0) << Err();
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<clf_segment_t> segs;
    std::string packed;
    for (int i = 0; i < kBlocks; ++i) {
      const int64_t off = (2 * i + rank) * kBlock;
      segs.push_back(clf_segment_t{off, kBlock});
      packed += want.substr(static_cast<size_t>(off), kBlock);
    }
    // Memory pieces of 7777 bytes (and the rest): none ends on a block boundary.
    std::vector<std::string> pieces;
    for (size_t at = 0; at < packed.size(); at += 7777) pieces.push_back(packed.substr(at, 7777));
    std::vector<iovec> iov;
    for (std::string& p : pieces) iov.push_back(iovec{p.data(), p.size()});
    ASSERT_EQ(clf_writev_list(writers[rank], iov.data(), static_cast<int>(iov.size()), segs.data(),
                              static_cast<int>(segs.size())),
              static_cast<ssize_t>(packed.size()))
        << Err();
  }
  ASSERT_EQ(clf_close(writers[0]), 0) << Err();
  ASSERT_EQ(clf_close(writers[1]), 0) << Err();
  EXPECT_EQ(SizeOf("/list"), static_cast<int64_t>(want.size()));

  // Every third block, last to first, into two memory pieces, plus a segment
  // that runs 500 bytes past the end (zeros, not counted).
  clf_file_t* f = nullptr;
  ASSERT_EQ(clf_open(fs_.fs, "/list", O_RDONLY, 0, &f), 0) << Err();
  std::vector<clf_segment_t> segs;
  std::string expect;
  for (int64_t b = 2 * kBlocks - 1; b >= 0; b -= 3) {
    segs.push_back(clf_segment_t{b * kBlock + 1, kBlock - 2});
    expect += want.substr(static_cast<size_t>(b * kBlock + 1), kBlock - 2);
  }
  const int64_t size = static_cast<int64_t>(want.size());
  segs.push_back(clf_segment_t{size - 100, 600});
  expect += want.substr(want.size() - 100) + std::string(500, '\0');
  std::string a(expect.size() / 2, 'x'), b(expect.size() - a.size(), 'x');
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  EXPECT_EQ(clf_readv_list(f, iov, 2, segs.data(), static_cast<int>(segs.size())),
            static_cast<ssize_t>(expect.size() - 500))
      << Err();
  EXPECT_EQ(FirstDifference(a + b, expect), -1);
  std::string all(want.size(), '\0');
  ASSERT_EQ(clf_pread(f, all.data(), all.size(), 0), static_cast<ssize_t>(all.size())) << Err();
  EXPECT_EQ(FirstDifference(all, want), -1);
  ASSERT_EQ(clf_close(f), 0) << Err();

  // Overlapping segments of one write: the later one's bytes win.
  ASSERT_EQ(clf_open(fs_.fs, "/list", O_WRONLY, 0, &f), 0) << Err();
  std::string over = std::string(10, 'A') + std::string(10, 'B');
  iovec one = {over.data(), over.size()};
  clf_segment_t two[2] = {{0, 10}, {5, 10}};
  ASSERT_EQ(clf_writev_list(f, &one, 1, two, 2), 20) << Err();
  ASSERT_EQ(clf_close(f), 0) << Err();
  EXPECT_EQ(ReadAll("/list", 16), "AAAAABBBBBBBBBB" + want.substr(15, 1));
}

// Every bad argument is -EINVAL (or -EBADF for the wrong direction), says
// why, and changes nothing.
TEST_F(CApiTest, BadArgumentsAreRefused) {
  WriteFile("/args", "unchanged");
  clf_file_t* w = nullptr;
  clf_file_t* r = nullptr;
  ASSERT_EQ(clf_open(fs_.fs, "/args", O_WRONLY, 0, &w), 0) << Err();
  ASSERT_EQ(clf_open(fs_.fs, "/args", O_RDONLY, 0, &r), 0) << Err();
  char buf[16] = {};
  struct stat st;
  clf_file_t* f = nullptr;
  clf_fs_t* none = nullptr;

  EXPECT_EQ(clf_connect(nullptr, &none), -EINVAL);
  EXPECT_EQ(clf_connect(cluster_->cluster_file().c_str(), nullptr), -EINVAL);
  EXPECT_LT(clf_connect("/nonexistent/cluster.toml", &none), 0);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(clf_open(nullptr, "/args", O_RDONLY, 0, &f), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, nullptr, O_RDONLY, 0, &f), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, "/args", O_RDONLY, 0, nullptr), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, "", O_RDONLY, 0, &f), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, "args", O_RDONLY, 0, &f), -EINVAL);
  EXPECT_NE(Err().find("absolute"), std::string::npos) << Err();
  EXPECT_EQ(clf_open(fs_.fs, "/x/../args", O_RDONLY, 0, &f), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, "/args", O_RDONLY | O_APPEND, 0, &f), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, "/args", O_RDONLY | O_DIRECTORY, 0, &f), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, "/args", O_ACCMODE, 0, &f), -EINVAL);
  EXPECT_EQ(clf_open(fs_.fs, "/args", O_RDONLY | O_TRUNC, 0, &f), -EINVAL);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(clf_stat(fs_.fs, "/args", nullptr), -EINVAL);
  EXPECT_EQ(clf_stat(nullptr, "/args", &st), -EINVAL);
  EXPECT_EQ(clf_fstat(r, nullptr), -EINVAL);
  EXPECT_EQ(clf_fstat(nullptr, &st), -EINVAL);
  EXPECT_EQ(clf_mkdir(fs_.fs, "rel", 0755), -EINVAL);
  EXPECT_EQ(clf_unlink(fs_.fs, nullptr), -EINVAL);
  EXPECT_EQ(clf_set_credentials(fs_.fs, 1, 1, nullptr, 3), -EINVAL);
  EXPECT_EQ(clf_close(nullptr), -EINVAL);
  EXPECT_EQ(clf_fsync(nullptr), -EINVAL);

  EXPECT_EQ(clf_pwrite(nullptr, "x", 1, 0), -EINVAL);
  EXPECT_EQ(clf_pwrite(w, nullptr, 1, 0), -EINVAL);
  EXPECT_EQ(clf_pwrite(w, "x", 1, -1), -EINVAL);
  EXPECT_NE(Err().find("negative offset"), std::string::npos) << Err();
  EXPECT_EQ(clf_pwrite(w, "xy", 2, INT64_MAX), -EINVAL);
  EXPECT_EQ(clf_pwrite(w, "x", SIZE_MAX, 0), -EINVAL);
  EXPECT_EQ(clf_pwrite(w, "x", 1, int64_t{1} << 60), -EFBIG);
  EXPECT_EQ(clf_pread(r, buf, sizeof buf, -5), -EINVAL);
  EXPECT_EQ(clf_pread(r, nullptr, 4, 0), -EINVAL);
  EXPECT_EQ(clf_pread(r, buf, 2, INT64_MAX - 1), -EINVAL);
  EXPECT_EQ(clf_pwrite(r, "x", 1, 0), -EBADF);  // read-only open
  EXPECT_EQ(clf_pread(w, buf, 1, 0), -EBADF);   // write-only open

  iovec iov = {buf, 4};
  clf_segment_t seg = {0, 4};
  EXPECT_EQ(clf_writev_list(nullptr, &iov, 1, &seg, 1), -EINVAL);
  EXPECT_EQ(clf_writev_list(w, &iov, -1, &seg, 1), -EINVAL);
  EXPECT_EQ(clf_writev_list(w, &iov, 1, &seg, -1), -EINVAL);
  EXPECT_EQ(clf_writev_list(w, nullptr, 1, &seg, 1), -EINVAL);
  EXPECT_EQ(clf_writev_list(w, &iov, 1, nullptr, 1), -EINVAL);
  clf_segment_t longer = {0, 5};
  EXPECT_EQ(clf_writev_list(w, &iov, 1, &longer, 1), -EINVAL);  // 4 bytes of memory, 5 of file
  EXPECT_NE(Err().find("memory list holds 4 bytes, file list 5"), std::string::npos) << Err();
  clf_segment_t negative = {-4, 4};
  EXPECT_EQ(clf_writev_list(w, &iov, 1, &negative, 1), -EINVAL);
  clf_segment_t negative_len = {0, -4};
  EXPECT_EQ(clf_writev_list(w, &iov, 1, &negative_len, 1), -EINVAL);
  clf_segment_t overflow = {INT64_MAX - 1, 4};
  EXPECT_EQ(clf_writev_list(w, &iov, 1, &overflow, 1), -EINVAL);
  iovec null_piece = {nullptr, 4};
  EXPECT_EQ(clf_writev_list(w, &null_piece, 1, &seg, 1), -EINVAL);
  iovec huge[2] = {{buf, SIZE_MAX}, {buf, 2}};
  EXPECT_EQ(clf_writev_list(w, huge, 2, &seg, 1), -EINVAL);  // the memory total overflows
  clf_segment_t huge_segs[2] = {{0, INT64_MAX}, {0, INT64_MAX}};
  EXPECT_EQ(clf_readv_list(r, &iov, 1, huge_segs, 2), -EFBIG);
  EXPECT_EQ(clf_readv_list(r, &iov, 1, &longer, 1), -EINVAL);
  EXPECT_EQ(clf_readv_list(w, &iov, 1, &seg, 1), -EBADF);
  EXPECT_EQ(clf_writev_list(r, &iov, 1, &seg, 1), -EBADF);
  EXPECT_EQ(clf_writev_list(w, nullptr, 0, nullptr, 0), 0);  // empty lists: nothing to do

  ASSERT_EQ(clf_close(w), 0) << Err();
  ASSERT_EQ(clf_close(r), 0) << Err();
  EXPECT_EQ(ReadAll("/args"), "unchanged");
  EXPECT_EQ(SizeOf("/args"), 9);
}

// A mount of the same cluster sees what the API wrote once it is closed, and
// the API reads what was written through the mount; an API write clears
// setuid/setgid as one through the mount would.
class CApiMountTest : public ::testing::Test {};

TEST_F(CApiMountTest, MountSeesTheSizeAfterClose) {
  ApiCluster cluster;
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.Mount());
  Fs fs;
  ASSERT_EQ(clf_connect(cluster.cluster_file().c_str(), &fs.fs), 0) << Err();
  const std::string data = PatternBytes(4, 0, 70000);
  clf_file_t* f = nullptr;
  ASSERT_EQ(clf_open(fs.fs, "/from-api", O_CREAT | O_WRONLY, 0644, &f), 0) << Err();
  ASSERT_EQ(clf_pwrite(f, data.data(), data.size(), 0), 70000) << Err();
  ASSERT_EQ(clf_close(f), 0) << Err();
  const std::string path = cluster.mount_point() + "/from-api";
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_size, 70000);
  Result<std::string> through_mount = tools::ReadFileToString(path);
  ASSERT_TRUE(through_mount.ok()) << through_mount.status().ToString();
  EXPECT_EQ(FirstDifference(*through_mount, data), -1);

  const std::string other = cluster.mount_point() + "/from-mount";
  ASSERT_TRUE(tools::WriteFileWithMode(other, "written through the mount", 0644).ok());
  struct stat api_st;
  ASSERT_EQ(clf_stat(fs.fs, "/from-mount", &api_st), 0) << Err();
  EXPECT_EQ(api_st.st_size, 25);
  std::string got(64, '\0');
  ASSERT_EQ(clf_open(fs.fs, "/from-mount", O_RDONLY, 0, &f), 0) << Err();
  ASSERT_EQ(clf_pread(f, got.data(), got.size(), 0), 25) << Err();
  EXPECT_EQ(got.substr(0, 25), "written through the mount");
  ASSERT_EQ(clf_close(f), 0) << Err();

  // A write by another user clears setuid and setgid (setgid: the file is
  // group-executable), as a write through the mount does.
  const std::string suid = cluster.mount_point() + "/suid";
  ASSERT_TRUE(tools::WriteFileWithMode(suid, "#!/bin/sh\n", 06777).ok());
  ASSERT_EQ(clf_stat(fs.fs, "/suid", &api_st), 0) << Err();
  ASSERT_EQ(api_st.st_mode & 07777, 06777u);
  ASSERT_EQ(clf_set_credentials(fs.fs, 1000, 1000, nullptr, 0), 0) << Err();
  ASSERT_EQ(clf_open(fs.fs, "/suid", O_WRONLY, 0, &f), 0) << Err();
  ASSERT_EQ(clf_pwrite(f, "#", 1, 0), 1) << Err();
  ASSERT_EQ(clf_close(f), 0) << Err();
  ASSERT_EQ(clf_stat(fs.fs, "/suid", &api_st), 0) << Err();
  EXPECT_EQ(api_st.st_mode & 07777, 0777u);
}

}  // namespace
}  // namespace clf::testing
