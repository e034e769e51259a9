// The differential gates (test/torture: clf_torture) on a real 4-server
// cluster against a real tmpfs, with a fixed budget; and the regression tests
// of the cases they were built for (a truncate after a write in one open,
// permission decisions from stale state), each compared with tmpfs.
#include <fcntl.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

constexpr uid_t kUser1 = 61001, kUser2 = 61002;

// A tmpfs of its own (the reference file system), unmounted at the end.
class Tmpfs {
 public:
  Tmpfs() : dir_("clf-torture-tmpfs") {
    ok_ = ::mount("tmpfs", dir_.str().c_str(), "tmpfs", 0, "size=1g,mode=0755") == 0;
    err_ = ok_ ? "" : std::strerror(errno);
  }
  ~Tmpfs() {
    if (ok_) ::umount2(dir_.str().c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return err_; }
  std::string str() const { return dir_.str(); }

 private:
  TempDir dir_;
  bool ok_ = false;
  std::string err_;
};

class MountTortureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions o;
    o.servers = 4;
    o.stripe_size = 64 * 1024;  // a file of a few hundred KiB spans every server
    o.mount = true;
    cluster_ = new TestCluster(o);
    start_ = new Status(cluster_->Start());
    tmpfs_ = new Tmpfs();
  }
  static void TearDownTestSuite() {
    delete tmpfs_;
    delete cluster_;
    delete start_;
    tmpfs_ = nullptr;
    cluster_ = nullptr;
    start_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(start_->ok()) << start_->ToString();
    ASSERT_TRUE(tmpfs_->ok()) << "tmpfs: " << tmpfs_->error();
  }
  // A fresh directory of `name` on the mount and on tmpfs (mode 0755).
  static std::pair<std::string, std::string> Dirs(const std::string& name) {
    const std::string a = cluster_->mount_point() + "/" + name, b = tmpfs_->str() + "/" + name;
    EXPECT_EQ(::mkdir(a.c_str(), 0755), 0) << a << ": " << std::strerror(errno);
    EXPECT_EQ(::mkdir(b.c_str(), 0755), 0) << b << ": " << std::strerror(errno);
    return {a, b};
  }
  static tools::RunResult Torture(std::vector<std::string> args, int timeout_ms) {
    args.insert(args.begin(), TestCluster::Binary("CLF_TORTURE", "clf_torture"));
    Result<tools::RunResult> r = tools::Run(args, timeout_ms);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) std::printf("%s", r->output.c_str());  // the run's summary in the test log
    return r.ok() ? *r : tools::RunResult{};
  }

  static TestCluster* cluster_;
  static Status* start_;
  static Tmpfs* tmpfs_;
};
TestCluster* MountTortureTest::cluster_ = nullptr;
Status* MountTortureTest::start_ = nullptr;
Tmpfs* MountTortureTest::tmpfs_ = nullptr;

// Runs `fn` in a child as `uid` (gid the same number, no other groups);
// returns the errno it gave (0: success).
int AsUser(uid_t uid, const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      ::_exit(255);
    }
    const int rc = fn();
    ::_exit(rc < 0 ? errno : 0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 254;
}

// ---- the gates ------------------------------------------------------------

TEST_F(MountTortureTest, FileSequencesMatchTmpfs) {
  auto [a, b] = Dirs("file");
  // 20 seeds x 2,000 operations, mmap on (the long runs: scripts/torture.sh).
  tools::RunResult r =
      Torture({"file", a, b, "--seed", "1", "--seeds", "20", "--ops", "2000"}, 600000);
  EXPECT_EQ(r.exit_code, 0) << r.output << "\nmount log:\n" << cluster_->LogTail(-1);
  EXPECT_NE(r.output.find("20 of 20 seeds clean"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mmap on"), std::string::npos) << r.output;
}

// 20 seeds x 5,000 calls as root and two users (100,000 in all).
TEST_F(MountTortureTest, PermissionSequencesMatchTmpfs) {
  auto [a, b] = Dirs("perm");
  tools::RunResult r =
      Torture({"perm", a, b, "--seed", "1", "--seeds", "20", "--ops", "5000"}, 600000);
  EXPECT_EQ(r.exit_code, 0) << r.output << "\nmount log:\n" << cluster_->LogTail(-1);
  EXPECT_NE(r.output.find("20 of 20 seeds clean"), std::string::npos) << r.output;
}

// A writer on this mount, a reader on a second mount of the same cluster:
// after each last close, an open on the second sees exactly tmpfs's bytes.
TEST_F(MountTortureTest, TwoMountsCloseToOpen) {
  auto [a, b] = Dirs("two");
  const std::string mnt_b = cluster_->dir() + "/mnt-b";
  std::filesystem::create_directories(mnt_b);
  tools::SpawnOptions so;
  so.stdout_path = cluster_->dir() + "/clfmount-b.log";
  Result<pid_t> pid = tools::Spawn(
      {TestCluster::Binary("CLFMOUNT", "clfmount"), cluster_->cluster_file(), mnt_b, "-f"}, so);
  ASSERT_OK(pid);
  auto stop_b = [&] {
    tools::Run({"fusermount3", "-u", "-q", mnt_b}, 10000).status().IgnoreError();
    if (::waitpid(*pid, nullptr, WNOHANG) == 0) {
      ::kill(*pid, SIGKILL);
      ::waitpid(*pid, nullptr, 0);
    }
    tools::Run({"umount", "-l", mnt_b}, 10000).status().IgnoreError();
  };
  if (TestCluster::PollUntil([&] { return tools::IsMountRoot(mnt_b); }, 10000) < 0) {
    stop_b();
    FAIL() << "second mount did not come up";
  }
  tools::RunResult r = Torture({"file", a, b, "--seed", "101", "--seeds", "5", "--ops", "1500",
                                "--reader", mnt_b + "/two"},
                               600000);
  stop_b();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 of 5 seeds clean"), std::string::npos) << r.output;
}

// ---- a truncate after a write ----------------------------------------------

// open, pwrite 1000 bytes at 5000, ftruncate to 3000: size 3000 through the
// same open, after close, and 3000 bytes read back; on the mount and tmpfs.
void TruncateAfterWrite(const std::string& dir, bool exists, bool by_path,
                        std::vector<std::string>* seen) {
  const std::string p = dir + "/t" + std::to_string(exists) + std::to_string(by_path);
  if (exists) {
    const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "abc", 3, 0), 3);
    ::close(fd);
  }
  const int fd = ::open(p.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const std::string x(1000, 'x');
  ASSERT_EQ(::pwrite(fd, x.data(), x.size(), 5000), 1000);
  ASSERT_EQ(by_path ? ::truncate(p.c_str(), 3000) : ::ftruncate(fd, 3000), 0);
  struct stat st;
  ASSERT_EQ(::fstat(fd, &st), 0);
  seen->push_back("fstat " + std::to_string(st.st_size));
  ASSERT_EQ(::close(fd), 0);
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  seen->push_back("stat after close " + std::to_string(st.st_size));
  const int r = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(r, 0);
  std::string buf(10000, '\0');
  seen->push_back("read " + std::to_string(::read(r, buf.data(), buf.size())));
  ::close(r);
}

TEST_F(MountTortureTest, TruncateAfterWriteInOneOpenIsKept) {
  auto [a, b] = Dirs("trunc");
  for (bool exists : {false, true}) {
    for (bool by_path : {false, true}) {
      std::vector<std::string> got, want;
      TruncateAfterWrite(a, exists, by_path, &got);
      TruncateAfterWrite(b, exists, by_path, &want);
      EXPECT_EQ(got, want) << "existing file " << exists << ", truncate(path) " << by_path;
      EXPECT_EQ(want, (std::vector<std::string>{"fstat 3000", "stat after close 3000", "read 3000"}));
    }
  }
}

// O_TRUNC on a second open while the first open's writes are not yet
// reported to the metadata server (its size there is still 0).
TEST_F(MountTortureTest, OTruncOfAFileWrittenThroughAnotherOpen) {
  auto [a, b] = Dirs("otrunc");
  for (const std::string& d : {a, b}) {
    const std::string p = d + "/f";
    const int w = ::open(p.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    ASSERT_GE(w, 0);
    ASSERT_EQ(::pwrite(w, "0123456789", 10, 0), 10);
    // Not cached in the kernel: the O_CREAT|O_TRUNC open reaches the mount as CREATE.
    const int t = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(t, 0);
    ::close(t);
    ::close(w);
    struct stat st;
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 0) << d;
  }
}

// ---- permission decisions from the current state --------------------------

// A chmod of a directory through this mount reaches names below it that the
// kernel has cached (root walked them first).
TEST_F(MountTortureTest, DirectoryChmodRevokesAtOnce) {
  auto [a, b] = Dirs("revoke");
  for (const std::string& d : {a, b}) {
    ASSERT_EQ(::chmod(d.c_str(), 0777), 0);
    const std::string sub = d + "/d", f = sub + "/f";
    ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
    const int fd = ::open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    ASSERT_GE(fd, 0);
    ::close(fd);
    ASSERT_EQ(::chmod(f.c_str(), 0666), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::open(f.c_str(), O_RDONLY); }), 0) << d;
    struct stat st;
    ASSERT_EQ(::stat(f.c_str(), &st), 0);  // cached names
    ASSERT_EQ(::chmod(sub.c_str(), 0644), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::open(f.c_str(), O_RDONLY); }), EACCES) << d;
    EXPECT_EQ(AsUser(kUser1, [&] { return ::truncate(f.c_str(), 0); }), EACCES) << d;
    EXPECT_EQ(AsUser(kUser1, [&] { return ::chmod(f.c_str(), 0600); }), EACCES) << d;
    EXPECT_EQ(AsUser(kUser1, [&] { return ::link(f.c_str(), (d + "/l").c_str()); }), EACCES) << d;
  }
}

TEST_F(MountTortureTest, FifoOpensFollowTheirMode) {
  auto [a, b] = Dirs("fifo");
  for (const std::string& d : {a, b}) {
    const std::string p = d + "/q";
    ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
    ASSERT_EQ(::chown(p.c_str(), kUser1, kUser1), 0);
    ASSERT_EQ(::chmod(p.c_str(), 0477), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::open(p.c_str(), O_RDWR | O_NONBLOCK); }), EACCES) << d;
    EXPECT_EQ(AsUser(kUser1, [&] { return ::open(p.c_str(), O_RDONLY | O_NONBLOCK); }), 0) << d;
    EXPECT_EQ(AsUser(kUser2, [&] { return ::open(p.c_str(), O_RDONLY | O_NONBLOCK); }), 0) << d;
    EXPECT_EQ(AsUser(kUser2, [&] { return ::open(p.c_str(), O_RDWR | O_NONBLOCK); }), 0) << d;
    ASSERT_EQ(::chmod(p.c_str(), 0470), 0);
    EXPECT_EQ(AsUser(kUser2, [&] { return ::open(p.c_str(), O_RDONLY | O_NONBLOCK); }), EACCES) << d;
  }
}

// The sticky rule after root chowned the directory (through this mount) from
// user 1 to root: user 1 may no longer move root's directory out of it.
TEST_F(MountTortureTest, StickyRuleUsesTheNewOwner) {
  auto [a, b] = Dirs("sticky");
  for (const std::string& d : {a, b}) {
    const std::string s = d + "/s", sub = s + "/rootdir";
    ASSERT_EQ(::mkdir(s.c_str(), 0777), 0);
    ASSERT_EQ(::chown(s.c_str(), kUser1, kUser1), 0);
    ASSERT_EQ(::chmod(s.c_str(), 01777), 0);
    ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
    struct stat st;
    ASSERT_EQ(::stat(sub.c_str(), &st), 0);
    ASSERT_EQ(::chown(s.c_str(), 0, 0), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::rename(sub.c_str(), (s + "/moved").c_str()); }), EPERM)
        << d;
    EXPECT_EQ(::stat(sub.c_str(), &st), 0) << d;
  }
}

TEST_F(MountTortureTest, NonOwnerChownThatChangesNothingIsRefused) {
  auto [a, b] = Dirs("chown");
  for (const std::string& d : {a, b}) {
    ASSERT_EQ(::chmod(d.c_str(), 0777), 0);
    const std::string p = d + "/f";
    const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    ASSERT_GE(fd, 0);
    ::close(fd);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::chown(p.c_str(), 0, 0); }), EPERM) << d;
  }
}

// pjdfstest link/06: links refused for want of search permission leave no
// trace; both directories are removable afterwards.
TEST_F(MountTortureTest, RefusedLinksLeaveNoTrace) {
  auto [a, b] = Dirs("link06");
  for (const std::string& d : {a, b}) {
    const std::string n1 = d + "/n1", n2 = d + "/n2", n3 = n1 + "/n3";
    ASSERT_EQ(::mkdir(n1.c_str(), 0755), 0);
    ASSERT_EQ(::chown(n1.c_str(), kUser1, kUser1), 0);
    ASSERT_EQ(::mkdir(n2.c_str(), 0755), 0);
    ASSERT_EQ(::chown(n2.c_str(), kUser1, kUser1), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::close(::open(n3.c_str(), O_CREAT | O_WRONLY, 0644)); }), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::link(n3.c_str(), (n2 + "/n4").c_str()); }), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::unlink((n2 + "/n4").c_str()); }), 0);
    ASSERT_EQ(::chmod(n1.c_str(), 0644), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::link(n3.c_str(), (n1 + "/n4").c_str()); }), EACCES) << d;
    EXPECT_EQ(AsUser(kUser1, [&] { return ::link(n3.c_str(), (n2 + "/n4").c_str()); }), EACCES) << d;
    ASSERT_EQ(::chmod(n1.c_str(), 0755), 0);
    ASSERT_EQ(::chmod(n2.c_str(), 0644), 0);
    EXPECT_EQ(AsUser(kUser1, [&] { return ::link(n3.c_str(), (n2 + "/n4").c_str()); }), EACCES) << d;
    EXPECT_EQ(::unlink(n3.c_str()), 0) << d;
    EXPECT_EQ(::rmdir(n1.c_str()), 0) << d << ": " << std::strerror(errno);
    EXPECT_EQ(::rmdir(n2.c_str()), 0) << d << ": " << std::strerror(errno);
  }
}

// fchmod through an open file, then access(X_OK) by root sees the new mode.
TEST_F(MountTortureTest, AccessSeesAFchmodAtOnce) {
  auto [a, b] = Dirs("fchmod");
  for (const std::string& d : {a, b}) {
    const std::string p = d + "/f";
    const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0777);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fchmod(fd, 0777), 0);
    EXPECT_EQ(::access(p.c_str(), X_OK), 0) << d;
    ASSERT_EQ(::fchmod(fd, 0600), 0);
    errno = 0;
    EXPECT_EQ(::access(p.c_str(), X_OK), -1) << d;
    EXPECT_EQ(errno, EACCES) << d;
    ::close(fd);
  }
}

}  // namespace
}  // namespace clf::testing
