// Locks across two (or three) real clfmount processes of one cluster: fcntl,
// OFD and flock locks taken through one mount block the other; F_GETLK on one
// reports the other's lock; a killed process's locks go at its close; a killed
// mount's locks go when its lease runs out; an interrupted F_SETLKW answers
// EINTR and leaves no waiter behind; SQLite writers on both mounts lose no row.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "clf/lock_client.h"
#include "clf/v1/lock.grpc.pb.h"
#include "common/config.h"
#include "common/status_grpc.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

extern "C" char** environ;

namespace clf::testing {
namespace {

constexpr int kStopGraceMs = 3000;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteAll(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  out << content;
  return static_cast<bool>(out);
}
// No kernel caching of names or attributes: another mount's creates, unlinks and
// size changes are seen at once (SQLite creates and deletes its journal).
const char* kMountOpts =
    "attr_timeout=0,entry_timeout=0,negative_timeout=0,nowriteback,lock_lease_ms=1000";

// One more clfmount of the test cluster, unmounted and stopped by PID in its destructor.
class ExtraMount {
 public:
  ExtraMount(TestCluster* c, const std::string& name, const std::string& opts)
      : c_(c), dir_(c->dir() + "/" + name), log_(c->dir() + "/" + name + ".log") {
    std::filesystem::create_directories(dir_);
    std::vector<std::string> argv = {TestCluster::Binary("CLFMOUNT", "clfmount"),
                                     c->cluster_file(), dir_, "-f", "-o", opts};
    tools::SpawnOptions so;
    so.stdout_path = log_;
    Result<pid_t> pid = tools::Spawn(argv, so);
    if (!pid.ok()) {
      error_ = pid.status().ToString();
      return;
    }
    pid_ = *pid;
    if (TestCluster::PollUntil([this] { return tools::IsMountRoot(dir_); }, 20000) < 0) {
      error_ = "mount did not appear";
    }
  }
  ~ExtraMount() {
    tools::UnmountFuse(dir_).IgnoreError();
    if (pid_ > 0 && !tools::WaitChild(pid_, kStopGraceMs)) tools::StopProcess(pid_, kStopGraceMs);
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      tools::WaitChild(pid_, kStopGraceMs);
      pid_ = 0;
    }
  }
  std::string LogTail() const {
    std::string s = ReadAll(log_);
    return s.size() > 3000 ? s.substr(s.size() - 3000) : s;
  }

 private:
  TestCluster* c_;
  std::string dir_, log_, error_;
  pid_t pid_ = 0;
};

int SetLk(int fd, int cmd, short type, off_t start, off_t len) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  return ::fcntl(fd, cmd, &fl) == 0 ? 0 : errno;
}

// A classic fcntl lock owner: a clf_mount_helper `locker` process with the file
// open, driven line by line through pipes. Killed by PID in the destructor.
class Locker {
 public:
  explicit Locker(const std::string& path) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::string bin = TestCluster::Binary("CLF_MOUNT_HELPER", "clf_mount_helper");
    std::string mode = "locker", p = path;
    char* argv[] = {bin.data(), mode.data(), p.data(), nullptr};
    if (::posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv, environ) != 0) pid_ = 0;
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (pid_ > 0) pid_reported_ = std::atoi(Ask("pid").c_str());
  }
  ~Locker() {
    if (to_ >= 0) ::close(to_);  // EOF: the helper closes the file and exits
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0 && !tools::WaitChild(pid_, kStopGraceMs)) tools::StopProcess(pid_, kStopGraceMs);
  }
  bool ok() const { return pid_ > 0 && pid_reported_ == pid_; }
  pid_t pid() const { return pid_; }
  std::string Ask(const std::string& cmd) {
    std::string line = cmd + "\n";
    if (::write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      return "write failed";
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string r = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return r;
      }
      char tmp[256];
      ssize_t n = ::read(from_, tmp, sizeof tmp);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return "eof";
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }
  // F_SETLK: "0" or the errno.
  std::string Set(char t, long long start, long long len) {
    return Ask(std::string("set ") + t + " " + std::to_string(start) + " " + std::to_string(len));
  }

 private:
  pid_t pid_ = 0;
  int pid_reported_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_;
};

class MountLockTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions o;
    o.servers = 2;
    o.mount = true;
    o.mount_options = kMountOpts;
    o.lock_grace_ms = 6000;
    cluster_ = new TestCluster(o);
    Status st = cluster_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    b_ = new ExtraMount(cluster_, "mnt_b", kMountOpts);
    ASSERT_TRUE(b_->ok()) << b_->error() << "\n" << b_->LogTail();
  }
  static void TearDownTestSuite() {
    delete b_;
    b_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  static std::string A(const std::string& rel) { return cluster_->mount_point() + "/" + rel; }
  static std::string B(const std::string& rel) { return b_->path(rel); }
  static int Open(const std::string& p) { return ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644); }

  // Waiting requests the servers hold on `path`'s file.
  static size_t Waiters(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return 999;
    auto lc = client::LockClient::Open(cluster_->config());
    if (!lc.ok()) return 999;
    Result<client::LockListing> l = (*lc)->ListLocks(st.st_ino, 0);
    if (!l.ok()) return 999;
    size_t n = 0;
    for (const client::LockHolderInfo& h : l->locks) n += h.waiting ? 1 : 0;
    return n;
  }

  static TestCluster* cluster_;
  static ExtraMount* b_;
};

TestCluster* MountLockTest::cluster_ = nullptr;
ExtraMount* MountLockTest::b_ = nullptr;

TEST_F(MountLockTest, FcntlLockBlocksOtherMountAndGetlkReportsIt) {
  int fa = Open(A("fcntl"));
  ASSERT_GE(fa, 0) << std::strerror(errno);
  int fb = Open(B("fcntl"));
  ASSERT_GE(fb, 0) << std::strerror(errno);
  ASSERT_EQ(SetLk(fa, F_SETLK, F_WRLCK, 0, 100), 0);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 50, 10), EAGAIN);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_RDLCK, 99, 0), EAGAIN);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_RDLCK, 100, 10), 0);  // past A's range

  struct flock probe {};
  probe.l_type = F_RDLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 10;
  probe.l_len = 1;
  ASSERT_EQ(::fcntl(fb, F_GETLK, &probe), 0) << std::strerror(errno);
  EXPECT_EQ(probe.l_type, F_WRLCK);
  EXPECT_EQ(probe.l_start, 0);
  EXPECT_EQ(probe.l_len, 100);
  EXPECT_EQ(probe.l_pid, ::getpid());

  // A partial unlock splits A's lock: [0, 50) is free, [50, 100) still A's.
  ASSERT_EQ(SetLk(fa, F_SETLK, F_UNLCK, 0, 50), 0);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 0, 50), 0);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 50, 50), EAGAIN);
  probe = {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 0;
  ASSERT_EQ(::fcntl(fa, F_GETLK, &probe), 0);
  EXPECT_EQ(probe.l_type, F_WRLCK);  // B's [0, 50) blocks A
  EXPECT_EQ(probe.l_start, 0);
  EXPECT_EQ(probe.l_len, 50);

  // Closing A's descriptor releases the process's locks through A.
  ::close(fa);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 50, 50), 0);
  ::close(fb);
}

TEST_F(MountLockTest, OfdLockAndFlockBlockOtherMount) {
  int fa = Open(A("ofd"));
  int fb = Open(B("ofd"));
  ASSERT_GE(fa, 0);
  ASSERT_GE(fb, 0);
  ASSERT_EQ(SetLk(fa, F_OFD_SETLK, F_WRLCK, 0, 0), 0);
  EXPECT_EQ(SetLk(fb, F_OFD_SETLK, F_RDLCK, 4096, 1), EAGAIN);
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(fb, F_OFD_GETLK, &probe), 0);
  EXPECT_EQ(probe.l_type, F_WRLCK);
  ::close(fa);  // the last close of the open file drops its OFD lock
  ASSERT_GE(TestCluster::PollUntil([&] { return SetLk(fb, F_OFD_SETLK, F_WRLCK, 0, 0) == 0; }, 5000), 0);
  ::close(fb);

  fa = Open(A("flock"));
  fb = Open(B("flock"));
  ASSERT_EQ(::flock(fa, LOCK_EX | LOCK_NB), 0) << std::strerror(errno);
  EXPECT_EQ(::flock(fb, LOCK_SH | LOCK_NB), -1);
  EXPECT_EQ(errno, EWOULDBLOCK);
  ASSERT_EQ(::flock(fa, LOCK_SH | LOCK_NB), 0);  // downgrade: readers may join
  EXPECT_EQ(::flock(fb, LOCK_SH | LOCK_NB), 0);
  EXPECT_EQ(::flock(fa, LOCK_UN), 0);
  ::close(fa);
  EXPECT_EQ(::flock(fb, LOCK_UN), 0);
  ::close(fb);
}

TEST_F(MountLockTest, KilledProcessReleasesItsLock) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const std::string pa = A("killed");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // only async-signal-safe calls: the parent has threads
    int fd = ::open(pa.c_str(), O_RDWR | O_CREAT, 0644);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    char ok = (fd >= 0 && ::fcntl(fd, F_SETLKW, &fl) == 0) ? 'y' : 'n';
    if (::write(pipefd[1], &ok, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(pipefd[1]);
  char ok = 0;
  ASSERT_EQ(::read(pipefd[0], &ok, 1), 1);
  ::close(pipefd[0]);
  ASSERT_EQ(ok, 'y');
  int fb = Open(B("killed"));
  ASSERT_GE(fb, 0);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 0, 0), EAGAIN);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // The dying process's close flushed its lock away: B gets it at once.
  EXPECT_EQ(SetLk(fb, F_SETLKW, F_WRLCK, 0, 0), 0);
  ::close(fb);
}

TEST_F(MountLockTest, InterruptedSetlkwReturnsEintr) {
  int fa = Open(A("intr"));
  ASSERT_GE(fa, 0);
  ASSERT_EQ(SetLk(fa, F_SETLK, F_WRLCK, 0, 0), 0);
  const std::string pb = B("intr");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};
    sa.sa_flags = 0;  // no SA_RESTART: the wait must end with EINTR
    ::sigaction(SIGALRM, &sa, nullptr);
    int fd = ::open(pb.c_str(), O_RDWR);
    if (fd < 0) ::_exit(3);
    ::alarm(1);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    int rc = ::fcntl(fd, F_SETLKW, &fl);
    ::_exit(rc == -1 && errno == EINTR ? 0 : 1);
  }
  int status = 0;
  ASSERT_TRUE(tools::WaitChild(child, 20000, &status));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "F_SETLKW did not end with EINTR";
  // The interrupted request was withdrawn on the server.
  EXPECT_GE(TestCluster::PollUntil([&] { return Waiters(A("intr")) == 0; }, 5000), 0);
  ::close(fa);
  int fb = Open(B("intr"));
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 0, 0), 0);
  ::close(fb);
}

TEST_F(MountLockTest, KilledMountLosesItsLocksAfterTheLease) {
  ExtraMount c(cluster_, "mnt_c", kMountOpts);
  ASSERT_TRUE(c.ok()) << c.error();
  int fc = Open(c.path("lease"));
  ASSERT_GE(fc, 0);
  ASSERT_EQ(SetLk(fc, F_SETLK, F_WRLCK, 0, 0), 0);
  int fb = Open(B("lease"));
  ASSERT_GE(fb, 0);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 0, 0), EAGAIN);
  // The lock outlives several lease periods while mount C lives (renewals):
  // what passes here is time, two of kMountOpts' 1 s leases and a half.
  constexpr auto kLockLease = std::chrono::milliseconds(1000);
  WaitPast(2 * kLockLease + kLockLease / 2);
  EXPECT_EQ(SetLk(fb, F_SETLK, F_WRLCK, 0, 0), EAGAIN);
  auto t0 = std::chrono::steady_clock::now();
  c.Kill();
  ASSERT_EQ(SetLk(fb, F_SETLKW, F_WRLCK, 0, 0), 0);  // granted when C's lease runs out
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::milliseconds(10000));
  ::close(fb);
  ::close(fc);  // a descriptor of the dead mount: ENOTCONN, nothing to release
}

TEST_F(MountLockTest, ClfLocksShowsHoldersAndWaiters) {
  int fa = Open(A("listed"));
  ASSERT_GE(fa, 0);
  ASSERT_EQ(SetLk(fa, F_SETLK, F_WRLCK, 100, 50), 0);
  const std::string pb = B("listed");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = ::open(pb.c_str(), O_RDWR);
    struct flock fl {};
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 120;
    fl.l_len = 1;
    ::fcntl(fd, F_SETLKW, &fl);
    ::_exit(0);
  }
  ASSERT_GE(TestCluster::PollUntil([&] { return Waiters(A("listed")) == 1; }, 5000), 0);
  const std::string clf = TestCluster::Binary("CLF", "clf");
  Result<tools::RunResult> text = tools::Run({clf, "locks", "--cluster", cluster_->cluster_file(), A("listed")}, 30000);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->exit_code, 0) << text->output;
  EXPECT_NE(text->output.find("1 held, 1 waiting"), std::string::npos) << text->output;
  EXPECT_NE(text->output.find("[100, 150)"), std::string::npos) << text->output;
  EXPECT_NE(text->output.find(cluster_->mount_point()), std::string::npos) << text->output;  // client name
  EXPECT_NE(text->output.find(b_->dir()), std::string::npos) << text->output;
  Result<tools::RunResult> json = tools::Run({clf, "locks", "--cluster", cluster_->cluster_file(), "--json", "/listed"}, 30000);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->exit_code, 0) << json->output;
  EXPECT_NE(json->output.find("\"state\":\"held\",\"kind\":\"fcntl\",\"mode\":\"exclusive\""), std::string::npos) << json->output;
  EXPECT_NE(json->output.find("\"state\":\"waiting\",\"kind\":\"fcntl\",\"mode\":\"shared\""), std::string::npos) << json->output;
  EXPECT_NE(json->output.find("\"pid\":" + std::to_string(::getpid())), std::string::npos) << json->output;
  Result<tools::RunResult> status = tools::Run({clf, "status", "--cluster", cluster_->cluster_file(), "--json"}, 30000);
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->output.find("\"locks_waiting\":1"), std::string::npos) << status->output;
  ::close(fa);  // the waiter gets its lock and exits
  int st = 0;
  ASSERT_TRUE(tools::WaitChild(child, 10000, &st));
  EXPECT_TRUE(WIFEXITED(st));
}

TEST_F(MountLockTest, SqliteWritersOnBothMounts) {
  const std::string sqlite = "sqlite3";
  ASSERT_TRUE(WriteAll(cluster_->dir() + "/init.sql",
                       "CREATE TABLE t(who TEXT, i INTEGER, pad TEXT);\n"));
  Result<tools::RunResult> init = tools::Run(
      {"/bin/sh", "-c", sqlite + " " + A("db.sqlite") + " < " + cluster_->dir() + "/init.sql"}, 30000);
  ASSERT_TRUE(init.ok());
  ASSERT_EQ(init->exit_code, 0) << init->output;
  constexpr int kRows = 150;
  for (const char* who : {"A", "B"}) {
    std::string sql = ".timeout 60000\n";
    for (int i = 0; i < kRows; ++i) {
      sql += "INSERT INTO t VALUES('" + std::string(who) + "', " + std::to_string(i) +
             ", hex(randomblob(300)));\n";
    }
    ASSERT_TRUE(WriteAll(cluster_->dir() + "/" + who + ".sql", sql));
  }
  std::vector<pid_t> writers;
  for (const char* who : {"A", "B"}) {
    std::string db = std::string(who) == "A" ? A("db.sqlite") : B("db.sqlite");
    tools::SpawnOptions so;
    so.stdout_path = cluster_->dir() + "/sqlite_" + who + ".log";
    Result<pid_t> p = tools::Spawn(
        {"/bin/sh", "-c", sqlite + " " + db + " < " + cluster_->dir() + "/" + who + ".sql"}, so);
    ASSERT_TRUE(p.ok());
    writers.push_back(*p);
  }
  for (pid_t p : writers) {
    int status = 0;
    ASSERT_TRUE(tools::WaitChild(p, 240000, &status));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << ReadAll(cluster_->dir() + "/sqlite_A.log") << "\n"
        << ReadAll(cluster_->dir() + "/sqlite_B.log");
  }
  for (const std::string& db : {A("db.sqlite"), B("db.sqlite")}) {
    Result<tools::RunResult> q = tools::Run(
        {sqlite, db,
         "SELECT who || ':' || count(*) || ':' || count(DISTINCT i) FROM t GROUP BY who ORDER BY who;"},
        30000);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->output, "A:150:150\nB:150:150\n") << db;
    Result<tools::RunResult> ic = tools::Run({sqlite, db, "PRAGMA integrity_check;"}, 30000);
    ASSERT_TRUE(ic.ok());
    EXPECT_EQ(ic->output, "ok\n") << db;
  }
}

// The POSIX lock sequences of locking/'s unit test (split, merge, upgrade,
// downgrade, to-EOF locks, conflicts) replayed with classic fcntl locks from
// separate processes (one owner each) on a file of the mount and on a file of a
// local directory: every F_SETLK result and every F_GETLK answer (type, range
// and holder) from a probe process and from each owner over every byte must be
// the same. When two locks cover a probed byte the kernel and clf may name
// different ones (both are right), so only the type is compared there.
TEST_F(MountLockTest, PosixSequencesMatchLocalDirectory) {
  constexpr int kOwners = 3;
  constexpr long long kSpan = 40, kModel = kSpan + 8;
  TempDir local("clf-lock-local");
  struct Side {
    std::vector<std::unique_ptr<Locker>> owners;
    std::unique_ptr<Locker> probe;
    std::map<std::string, int> owner_of_pid;
  };
  struct Step {
    int owner;
    char t;
    long long start, len;
  };
  auto make = [&](const std::string& path) {
    Side s;
    for (int i = 0; i < kOwners; ++i) {
      s.owners.push_back(std::make_unique<Locker>(path));
      s.owner_of_pid[std::to_string(s.owners.back()->pid())] = i;
    }
    s.probe = std::make_unique<Locker>(path);
    return s;
  };
  auto run = [&](const std::string& name, const std::vector<Step>& steps) {
    Side m = make(A("seq-" + name)), l = make(local.str() + "/seq-" + name);
    for (int i = 0; i < kOwners; ++i) {
      ASSERT_TRUE(m.owners[i]->ok() && l.owners[i]->ok());
    }
    ASSERT_TRUE(m.probe->ok() && l.probe->ok());
    std::vector<std::vector<char>> model(kOwners, std::vector<char>(kModel, 'u'));
    // "T START LEN PID" with the pid replaced by the owner index.
    auto norm = [](Side& s, const std::string& answer) {
      std::istringstream in(answer);
      std::string t, start, len, pid;
      in >> t >> start >> len >> pid;
      auto it = s.owner_of_pid.find(pid);
      return t + " " + start + " " + len + " " +
             (it == s.owner_of_pid.end() ? pid : std::to_string(it->second));
    };
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      const std::string rl = l.owners[st.owner]->Set(st.t, st.start, st.len);
      const std::string rm = m.owners[st.owner]->Set(st.t, st.start, st.len);
      ASSERT_EQ(rm, rl) << name << " step " << i;
      ASSERT_TRUE(rl == "0" || rl == std::to_string(EAGAIN)) << rl;
      if (rl == "0") {
        long long end = st.len == 0 ? kModel : std::min(kModel, st.start + st.len);
        for (long long b = st.start; b < end; ++b) model[st.owner][b] = st.t;
      }
      for (int viewer = -1; viewer < kOwners; ++viewer) {
        Locker& vl = viewer < 0 ? *l.probe : *l.owners[viewer];
        Locker& vm = viewer < 0 ? *m.probe : *m.owners[viewer];
        for (long long b = 0; b < kSpan + 2; ++b) {
          int covering = 0;
          for (int o = 0; o < kOwners; ++o) covering += o != viewer && model[o][b] != 'u';
          for (char t : viewer < 0 ? std::string("rw") : std::string("w")) {
            const std::string q = std::string("get ") + t + " " + std::to_string(b) + " 1";
            const std::string al = norm(l, vl.Ask(q)), am = norm(m, vm.Ask(q));
            if (covering <= 1) {
              ASSERT_EQ(am, al) << name << " after step " << i << ", viewer " << viewer << ", "
                                << q;
            } else {
              ASSERT_EQ(am.substr(0, 1), al.substr(0, 1))
                  << name << " after step " << i << ", viewer " << viewer << ", " << q;
            }
          }
        }
      }
    }
  };
  run("scripted", {
                      {0, 'r', 0, 10},   // A reads [0,10)
                      {0, 'r', 10, 5},   // adjacent read: merges into [0,15)
                      {0, 'u', 4, 2},    // split into [0,4) and [6,15)
                      {0, 'w', 8, 3},    // upgrade the middle: R[6,8) W[8,11) R[11,15)
                      {1, 'r', 6, 2},    // B may share A's read part
                      {1, 'r', 9, 1},    // but not A's write part
                      {0, 'r', 8, 3},    // downgrade: R[6,15) merged again
                      {1, 'r', 9, 1},    // now B can read there
                      {0, 'w', 20, 0},   // A writes [20, EOF)
                      {1, 'w', 30, 1},   // refused
                      {0, 'u', 25, 5},   // split the EOF lock
                      {1, 'w', 26, 1},   // now granted
                      {2, 'w', 3, 30},   // C is refused
                      {0, 'w', 0, 0},    // refused: B holds reads
                      {1, 'u', 0, 0},    // B drops everything
                      {0, 'w', 0, 0},    // A takes the whole file
                      {0, 'u', 10, 10},  // and punches a hole
                      {2, 'r', 12, 3},   // where C reads
                  });
  if (HasFatalFailure()) return;
  std::mt19937_64 rng(77);
  for (int seq = 0; seq < 4; ++seq) {
    std::vector<Step> steps;
    for (int i = 0; i < 25; ++i) {
      Step st;
      st.owner = static_cast<int>(rng() % kOwners);
      int r = static_cast<int>(rng() % 10);
      st.t = r < 4 ? 'r' : r < 7 ? 'w' : 'u';
      st.start = static_cast<long long>(rng() % kSpan);
      st.len = rng() % 8 == 0 ? 0 : 1 + static_cast<long long>(rng() % 12);
      steps.push_back(st);
    }
    run("random" + std::to_string(seq), steps);
    if (HasFatalFailure()) return;
  }
}

// A crash and restart of the file's lock server: mount A's fcntl lock is
// reclaimed during the grace period and still held after it (mount B is
// refused meanwhile, and afterwards by A's lock; F_GETLK on B names A's
// process); A's unlock then frees it for B.
TEST_F(MountLockTest, ZFcntlLockIsReclaimedAfterServerRestart) {
  const std::string name = "reclaim";
  int fd = Open(A(name));
  ASSERT_GE(fd, 0);
  ::close(fd);
  struct stat st;
  ASSERT_EQ(::stat(A(name).c_str(), &st), 0);
  const int s = static_cast<int>(ServerOf(st.st_ino));
  std::string free_name;  // another file with its locks on the same server
  for (int i = 0; free_name.empty(); ++i) {
    std::string n = "reclaim-free-" + std::to_string(i);
    int f = Open(A(n));
    ASSERT_GE(f, 0);
    ::close(f);
    ASSERT_EQ(::stat(A(n).c_str(), &st), 0);
    if (static_cast<int>(ServerOf(st.st_ino)) == s) free_name = n;
  }
  Locker holder(A(name));
  ASSERT_TRUE(holder.ok());
  ASSERT_EQ(holder.Set('w', 0, 100), "0");
  ASSERT_EQ(holder.Set('u', 40, 10), "0");  // split: [0,40) and [50,100)
  Locker other(B(name)), other_free(B(free_name));
  ASSERT_TRUE(other.ok() && other_free.ok());
  ASSERT_EQ(other.Set('w', 45, 1), "0");  // the hole is free
  ASSERT_EQ(other.Set('u', 0, 0), "0");
  // A third client's session on that server, which dies with it and never
  // comes back: A and B both finish reclaiming quickly, which would end the
  // grace period early (ReclaimComplete) and race B's first try below; a
  // listed session that never says it is done keeps the full grace period.
  {
    auto stub = v1::Lock::NewStub(grpc::CreateCustomChannel(
        cluster_->config().servers[s].address, grpc::InsecureChannelCredentials(),
        ClfChannelArgs()));
    Result<std::string> secret = ReadSecret(cluster_->config().secret_file);
    ASSERT_OK(secret.status());
    grpc::ClientContext ctx;
    ctx.AddMetadata(kSecretHeader, *secret);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::OpenSessionRequest req;
    req.set_lease_ms(120000);
    req.set_client_name("gone-with-the-server");
    v1::OpenSessionReply rep;
    ASSERT_OK(FromGrpc(stub->OpenSession(&ctx, req, &rep)));
  }

  ASSERT_OK(cluster_->KillServer(s, SIGKILL));
  ASSERT_OK(cluster_->RestartServer(s));
  // In the grace period a free range of another file is refused too (EAGAIN),
  // once B's channel to the restarted server reconnected (EIO until then).
  std::string r;
  ASSERT_GE(TestCluster::PollUntil(
                [&] { return (r = other_free.Set('w', 0, 1)) != std::to_string(EIO); }, 20000),
            0);
  EXPECT_EQ(r, std::to_string(EAGAIN));
  // The grace period ends: B's try on the free file succeeds.
  ASSERT_GE(TestCluster::PollUntil([&] { return other_free.Set('w', 0, 1) == "0"; }, 60000), 0)
      << cluster_->LogTail(s);
  // A's lock was reclaimed (with its split) and still holds.
  EXPECT_EQ(other.Set('w', 10, 1), std::to_string(EAGAIN));
  EXPECT_EQ(other.Set('w', 60, 1), std::to_string(EAGAIN));
  EXPECT_EQ(other.Set('w', 45, 1), "0");
  EXPECT_EQ(other.Set('u', 45, 1), "0");
  EXPECT_EQ(other.Ask("get w 10 1"), "w 0 40 " + std::to_string(holder.pid()));
  EXPECT_EQ(other.Ask("get w 70 1"), "w 50 50 " + std::to_string(holder.pid()));
  ASSERT_EQ(holder.Set('u', 0, 0), "0");
  EXPECT_EQ(other.Set('w', 0, 100), "0");
  EXPECT_EQ(other.Set('u', 0, 0), "0");
  EXPECT_EQ(other_free.Set('u', 0, 0), "0");
}

}  // namespace
}  // namespace clf::testing
