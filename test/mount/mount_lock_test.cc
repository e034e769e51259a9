// Locks across two (or three) real clfmount processes of one cluster: fcntl,
// OFD and flock locks taken through one mount block the other; F_GETLK on one
// reports the other's lock; a killed process's locks go at its close; a killed
// mount's locks go when its lease runs out; an interrupted F_SETLKW answers
// EINTR and leaves no waiter behind; SQLite writers on both mounts lose no row.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "clf/lock_client.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

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

class MountLockTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions o;
    o.servers = 2;
    o.mount = true;
    o.mount_options = kMountOpts;
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
  // The lock outlives several lease periods while mount C lives (renewals).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
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

}  // namespace
}  // namespace clf::testing
