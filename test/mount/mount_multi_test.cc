// Two mounts of one cluster (two clfmount processes, A and B): close-to-open
// consistency. After a writer on A closes, an open that starts later on B
// sees A's bytes and size; repeated reads without a change stay cached.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

// Whole file through open/read/close.
std::string ReadAll(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return "<open failed: " + std::to_string(errno) + ">";
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// A mount's name cache (the kernel keeps a name for entry_timeout, clfmount's
// default 1 s): the other mount's changes show once it ran out. Waits poll
// what B sees for that long and a margin.
constexpr auto kEntryTimeout = std::chrono::seconds(1);
constexpr auto kNameCacheWait = kEntryTimeout + std::chrono::seconds(2);

bool Missing(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == -1 && errno == ENOENT;
}

// open(flags), pwrite at off (or append), close.
bool WriteClose(const std::string& path, const std::string& data, int flags, off_t off = 0) {
  int fd = ::open(path.c_str(), O_WRONLY | flags, 0644);
  if (fd < 0) return false;
  ssize_t n = (flags & O_APPEND) ? ::write(fd, data.data(), data.size())
                                 : ::pwrite(fd, data.data(), data.size(), off);
  return ::close(fd) == 0 && n == static_cast<ssize_t>(data.size());
}

class MountMultiTest : public ::testing::Test {
 protected:
  // Mounts A (the cluster's) and B (-o b_options, empty: defaults).
  void Start(const std::string& b_options) {
    ClusterOptions o;
    o.servers = 4;
    o.mount = true;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
    a_ = cluster_->mount_point();
    b_ = cluster_->dir() + "/mnt-b";
    std::filesystem::create_directories(b_);
    tools::SpawnOptions so;
    so.stdout_path = cluster_->dir() + "/clfmount-b.log";
    Result<pid_t> pid = tools::Spawn(
        b_options.empty()
            ? std::vector<std::string>{TestCluster::Binary("CLFMOUNT", "clfmount"),
                                       cluster_->cluster_file(), b_, "-f"}
            : std::vector<std::string>{TestCluster::Binary("CLFMOUNT", "clfmount"),
                                       cluster_->cluster_file(), b_, "-f", "-o", b_options},
        so);
    ASSERT_OK(pid);
    b_pid_ = *pid;
    ASSERT_GE(TestCluster::PollUntil([&] { return tools::IsMountRoot(b_); }, 10000), 0)
        << "second mount did not come up";
  }
  void TearDown() override {
    if (b_pid_ > 0) {
      tools::Run({"fusermount3", "-u", "-q", b_}, 10000).status().IgnoreError();
      if (::waitpid(b_pid_, nullptr, WNOHANG) == 0) {
        ::kill(b_pid_, SIGKILL);
        ::waitpid(b_pid_, nullptr, 0);
      }
      tools::Run({"umount", "-l", b_}, 10000).status().IgnoreError();
    }
  }
  std::unique_ptr<TestCluster> cluster_;
  std::string a_, b_;
  pid_t b_pid_ = 0;
};

// Names in one directory, sorted (readdir through the mount).
std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Directory leases (fuse/async_ns.h): A creates and unlinks under a lease,
// acknowledged before the servers have them; B's first request for the
// directory recalls the lease, so B sees exactly what A's calls returned.
TEST_F(MountMultiTest, DeferredCreatesAndUnlinksAreSeenByTheOtherMount) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  ASSERT_EQ(::mkdir((a_ + "/d").c_str(), 0755), 0);
  std::vector<std::string> want;
  for (int i = 0; i < 300; ++i) {
    const std::string name = "f" + std::to_string(i);
    ASSERT_TRUE(WriteClose(a_ + "/d/" + name, i % 3 == 0 ? "data " + name : "", O_CREAT | O_TRUNC))
        << name;
    want.push_back(name);
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(List(b_ + "/d"), want);  // B's readdir recalled A's lease
  // Contents and sizes, through B.
  EXPECT_EQ(ReadAll(b_ + "/d/f3"), "data f3");
  struct stat st;
  ASSERT_EQ(::stat((b_ + "/d/f4").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  // A chmods files it created (queued setattrs): B sees the modes.
  ASSERT_EQ(::chmod((a_ + "/d/f9").c_str(), 0600), 0);
  // Unlinks on A (the lease comes back to A at its first change).
  for (int i = 0; i < 300; i += 2) {
    ASSERT_EQ(::unlink((a_ + "/d/f" + std::to_string(i)).c_str()), 0) << i;
  }
  std::vector<std::string> left;
  for (int i = 1; i < 300; i += 2) left.push_back("f" + std::to_string(i));
  std::sort(left.begin(), left.end());
  EXPECT_EQ(List(b_ + "/d"), left);
  // B's kernel keeps the names it saw for entry_timeout, as without leases.
  auto mode_on_b = [&](const std::string& name) {
    struct stat s;
    return ::stat((b_ + "/d/" + name).c_str(), &s) == 0 ? s.st_mode & 07777 : 0u;
  };
  EXPECT_TRUE(WaitUntil([&] { return Missing(b_ + "/d/f6") && mode_on_b("f9") == 0600u; },
                        kNameCacheWait));
  EXPECT_TRUE(Missing(b_ + "/d/f6"));  // f6 was unlinked
  ASSERT_EQ(::stat((b_ + "/d/f9").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// Symbolic links made under A's lease (answered by A, committed later):
// A reads them back at once, B sees each with its target, owner and size,
// and A's unlinks of some of them reach B too.
TEST_F(MountMultiTest, DeferredSymlinksAreSeenByTheOtherMount) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  ASSERT_EQ(::mkdir((a_ + "/s").c_str(), 0755), 0);
  ASSERT_TRUE(WriteClose(a_ + "/s/target", "t", O_CREAT));  // A holds the lease now
  char buf[256];
  for (int i = 0; i < 50; ++i) {
    const std::string target = "target-of-" + std::to_string(i);
    const std::string link = a_ + "/s/l" + std::to_string(i);
    ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0) << i;
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf));
    ASSERT_EQ(std::string(buf, n > 0 ? n : 0), target) << i;
  }
  EXPECT_EQ(::symlink("again", (a_ + "/s/l7").c_str()), -1);
  EXPECT_EQ(errno, EEXIST);
  for (int i = 0; i < 50; ++i) {
    const std::string target = "target-of-" + std::to_string(i);
    const std::string link = b_ + "/s/l" + std::to_string(i);
    struct stat st;
    ASSERT_EQ(::lstat(link.c_str(), &st), 0) << i;
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << i;
    EXPECT_EQ(st.st_size, static_cast<off_t>(target.size())) << i;
    EXPECT_EQ(st.st_uid, ::geteuid()) << i;
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf));
    EXPECT_EQ(std::string(buf, n > 0 ? n : 0), target) << i;
  }
  // A link whose target exists resolves through B.
  ASSERT_EQ(::symlink("target", (a_ + "/s/to-target").c_str()), 0);
  EXPECT_EQ(ReadAll(b_ + "/s/to-target"), "t");
  for (int i = 0; i < 50; i += 2) {
    ASSERT_EQ(::unlink((a_ + "/s/l" + std::to_string(i)).c_str()), 0) << i;
  }
  std::vector<std::string> want = {"target", "to-target"};
  for (int i = 1; i < 50; i += 2) want.push_back("l" + std::to_string(i));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(List(b_ + "/s"), want);
}

// Hard links to a file A created under its lease (answered by A, committed
// after the create): the link count on A follows each link and unlink, and
// B sees the same file under every name with the same count.
TEST_F(MountMultiTest, DeferredHardLinksAreSeenByTheOtherMount) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  ASSERT_EQ(::mkdir((a_ + "/h").c_str(), 0755), 0);
  ASSERT_TRUE(WriteClose(a_ + "/h/warmup", "", O_CREAT));  // A holds the lease now
  ASSERT_TRUE(WriteClose(a_ + "/h/f", "contents", O_CREAT));
  struct stat st, sb;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(::link((a_ + "/h/f").c_str(), (a_ + "/h/l" + std::to_string(i)).c_str()), 0) << i;
    ASSERT_EQ(::stat((a_ + "/h/f").c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, static_cast<nlink_t>(i + 2));
  }
  EXPECT_EQ(::link((a_ + "/h/f").c_str(), (a_ + "/h/l3").c_str()), -1);
  EXPECT_EQ(errno, EEXIST);
  for (int i = 0; i < 20; i += 2) {
    ASSERT_EQ(::unlink((a_ + "/h/l" + std::to_string(i)).c_str()), 0) << i;
  }
  ASSERT_EQ(::lstat((a_ + "/h/l1").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 11u);
  for (int i = 1; i < 20; i += 2) {
    const std::string name = b_ + "/h/l" + std::to_string(i);
    ASSERT_EQ(::stat(name.c_str(), &sb), 0) << i;
    EXPECT_EQ(sb.st_nlink, 11u) << i;
    EXPECT_EQ(sb.st_ino, st.st_ino) << i;
    EXPECT_EQ(ReadAll(name), "contents") << i;
  }
  EXPECT_EQ(::stat((b_ + "/h/l0").c_str(), &sb), -1);
  EXPECT_EQ(errno, ENOENT);
}

// Renames between two directories A holds leases on (answered by A,
// committed later): A and B see every file under its last name with its
// contents; a rename onto a taken name (the server's) replaces it.
TEST_F(MountMultiTest, DeferredRenamesAreSeenByTheOtherMount) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  ASSERT_EQ(::mkdir((a_ + "/p").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((a_ + "/q").c_str(), 0755), 0);
  ASSERT_TRUE(WriteClose(a_ + "/p/warmup", "", O_CREAT));  // A holds both leases now
  ASSERT_TRUE(WriteClose(a_ + "/q/warmup", "", O_CREAT));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(WriteClose(a_ + "/p/f" + std::to_string(i), "file " + std::to_string(i), O_CREAT));
  }
  // Each file goes p -> q -> p -> q under new names; the last hop of the
  // odd ones is back into p.
  for (int i = 0; i < 10; ++i) {
    const std::string k = std::to_string(i);
    ASSERT_EQ(::rename((a_ + "/p/f" + k).c_str(), (a_ + "/q/g" + k).c_str()), 0) << i;
    ASSERT_EQ(::rename((a_ + "/q/g" + k).c_str(), (a_ + "/p/h" + k).c_str()), 0) << i;
    const std::string last = (i % 2 ? "/p/j" : "/q/j") + k;
    ASSERT_EQ(::rename((a_ + "/p/h" + k).c_str(), (a_ + last).c_str()), 0) << i;
    struct stat st;
    EXPECT_EQ(::stat((a_ + "/p/h" + k).c_str(), &st), -1);
    EXPECT_EQ(errno, ENOENT);
    EXPECT_EQ(ReadAll(a_ + last), "file " + k);
  }
  EXPECT_EQ(::rename((a_ + "/p/nothing").c_str(), (a_ + "/q/x").c_str()), -1);
  EXPECT_EQ(errno, ENOENT);
  // Onto a taken name: the server replaces it.
  ASSERT_EQ(::rename((a_ + "/q/j0").c_str(), (a_ + "/q/j2").c_str()), 0);
  std::vector<std::string> p = {"j1", "j3", "j5", "j7", "j9", "warmup"};
  std::vector<std::string> q = {"j2", "j4", "j6", "j8", "warmup"};
  EXPECT_EQ(List(b_ + "/p"), p);
  EXPECT_EQ(List(b_ + "/q"), q);
  EXPECT_EQ(ReadAll(b_ + "/q/j2"), "file 0");
  EXPECT_EQ(ReadAll(b_ + "/p/j9"), "file 9");
  EXPECT_EQ(List(a_ + "/p"), p);
  EXPECT_EQ(List(a_ + "/q"), q);
}

// O_EXCL stays exact across mounts: a name A created (deferred) exists for B
// at once, and a name B created exists for A.
TEST_F(MountMultiTest, ExclusiveCreateAcrossMountsUnderLeases) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  ASSERT_EQ(::mkdir((a_ + "/x").c_str(), 0755), 0);
  ASSERT_TRUE(WriteClose(a_ + "/x/warmup", "", O_CREAT));  // A holds the lease now
  ASSERT_TRUE(WriteClose(a_ + "/x/taken", "A", O_CREAT | O_EXCL));
  int fd = ::open((b_ + "/x/taken").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, EEXIST);
  if (fd >= 0) ::close(fd);
  ASSERT_TRUE(WriteClose(b_ + "/x/fromb", "B", O_CREAT | O_EXCL));  // B's change in A's directory
  fd = ::open((a_ + "/x/fromb").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, EEXIST);
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(ReadAll(a_ + "/x/fromb"), "B");
  EXPECT_EQ(ReadAll(b_ + "/x/taken"), "A");
  // A creates again after B's change (a new lease, a fresh listing).
  ASSERT_TRUE(WriteClose(a_ + "/x/again", "A2", O_CREAT | O_EXCL));
  EXPECT_EQ(ReadAll(b_ + "/x/again"), "A2");
}

// rm -rf on A of a tree B made, then B's view.
TEST_F(MountMultiTest, DeferredRemovalOfATreeMadeElsewhere) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  for (int d = 0; d < 5; ++d) {
    const std::string dir = b_ + "/t" + std::to_string(d);
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    for (int i = 0; i < 40; ++i)
      ASSERT_TRUE(WriteClose(dir + "/f" + std::to_string(i), "x", O_CREAT));
  }
  for (int d = 0; d < 5; ++d) {
    std::error_code ec;
    EXPECT_EQ(std::filesystem::remove_all(a_ + "/t" + std::to_string(d), ec), 41u) << ec.message();
  }
  EXPECT_TRUE(List(b_).empty());
  auto gone_on_b = [&] {
    for (int d = 0; d < 5; ++d) {
      if (!Missing(b_ + "/t" + std::to_string(d))) return false;
    }
    return true;
  };
  EXPECT_TRUE(WaitUntil(gone_on_b, kNameCacheWait)) << "B still sees a removed directory";
}

// A readdir takes the directory's lease with the entries' attributes, a walk
// prefetches the next subdirectories' leases, and a second listing soon
// after is served from the lease: another mount's change in between must
// still show in A's next listing (its request recalled A's lease first).
TEST_F(MountMultiTest, ListingsUnderLeasesSeeTheOtherMountsChanges) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  for (int d = 0; d < 6; ++d) {
    const std::string dir = b_ + "/w" + std::to_string(d);
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(WriteClose(dir + "/f" + std::to_string(i), "x", O_CREAT));
  }
  // A lists the top (its lease, and prefetched leases of w0..w3), then w0.
  std::vector<std::string> top = {"w0", "w1", "w2", "w3", "w4", "w5"};
  ASSERT_EQ(List(a_), top);
  const std::vector<std::string> five = {"f0", "f1", "f2", "f3", "f4"};
  ASSERT_EQ(List(a_ + "/w0"), five);
  // Within A's names window: B adds to w0 and to a prefetched w2, removes from w1.
  ASSERT_TRUE(WriteClose(b_ + "/w0/new", "b", O_CREAT | O_EXCL));
  ASSERT_TRUE(WriteClose(b_ + "/w2/new", "b", O_CREAT | O_EXCL));
  ASSERT_EQ(::unlink((b_ + "/w1/f0").c_str()), 0);
  std::vector<std::string> with_new = five;
  with_new.push_back("new");
  std::sort(with_new.begin(), with_new.end());
  EXPECT_EQ(List(a_ + "/w0"), with_new);
  EXPECT_EQ(List(a_ + "/w2"), with_new);
  EXPECT_EQ(List(a_ + "/w1"), std::vector<std::string>({"f1", "f2", "f3", "f4"}));
  // stat through A: sizes as B wrote them (attributes of a listing served
  // from a grant are the server's).
  struct stat st;
  ASSERT_EQ(::stat((a_ + "/w2/new").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1);
  EXPECT_EQ(ReadAll(a_ + "/w2/new"), "b");
  // A removes the whole tree (listings from prefetched leases), B sees it gone.
  std::error_code ec;
  EXPECT_EQ(std::filesystem::remove_all(a_ + "/w0", ec), 7u) << ec.message();
  for (int d = 1; d < 6; ++d) std::filesystem::remove_all(a_ + "/w" + std::to_string(d), ec);
  EXPECT_TRUE(List(a_).empty());
  EXPECT_TRUE(List(b_).empty());
}

// Both mounts with the defaults (no kernel writeback cache, the mount's own
// write-behind): every open on B after a close on A sees A's bytes and size,
// including a shrink.
TEST_F(MountMultiTest, CloseToOpen) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  const std::string fa = a_ + "/shared.txt", fb = b_ + "/shared.txt";
  ASSERT_TRUE(WriteClose(fa, "first line\n", O_CREAT | O_TRUNC));
  EXPECT_EQ(ReadAll(fb), "first line\n");
  EXPECT_EQ(ReadAll(fb), "first line\n");  // cached on B now

  // Append on A, close: the next open on B sees the new line and size.
  ASSERT_TRUE(WriteClose(fa, "second line\n", O_APPEND));
  EXPECT_EQ(ReadAll(fb), "first line\nsecond line\n");
  struct stat st;
  ASSERT_EQ(::stat(fb.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 23);

  // Same-size overwrite in place (size unchanged, mtime changes).
  ASSERT_TRUE(WriteClose(fa, "FIRST", 0, 0));
  EXPECT_EQ(ReadAll(fb), "FIRST line\nsecond line\n");

  // Shortened on A: B's next open sees the new size.
  ASSERT_EQ(::truncate(fa.c_str(), 5), 0);
  EXPECT_EQ(ReadAll(fb), "FIRST");
  ASSERT_EQ(::stat(fb.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 5);

  // Replaced by rename on A: once B's name cache (entry_timeout) has
  // passed, B opens the new file.
  ASSERT_TRUE(WriteClose(a_ + "/shared.tmp", "replacement\n", O_CREAT | O_TRUNC));
  ASSERT_EQ(::rename((a_ + "/shared.tmp").c_str(), fa.c_str()), 0);
  EXPECT_TRUE(WaitUntil([&] { return ReadAll(fb) == "replacement\n"; }, kNameCacheWait));
  EXPECT_EQ(ReadAll(fb), "replacement\n");

  // And the other way round: B writes, A reads.
  ASSERT_TRUE(WriteClose(fb, "from B\n", O_APPEND));
  EXPECT_EQ(ReadAll(fa), "replacement\nfrom B\n");
}

// B with the kernel's writeback cache (-o writeback): the kernel keeps its own
// size for a cached file, so appends and overwrites made elsewhere are seen
// at open (the mount revalidates), a shrink is not (docs/fuse.md).
TEST_F(MountMultiTest, CloseToOpenKernelWriteback) {
  ASSERT_NO_FATAL_FAILURE(Start("writeback"));
  const std::string fa = a_ + "/shared.txt", fb = b_ + "/shared.txt";
  ASSERT_TRUE(WriteClose(fa, "first line\n", O_CREAT | O_TRUNC));
  EXPECT_EQ(ReadAll(fb), "first line\n");
  ASSERT_TRUE(WriteClose(fa, "second line\n", O_APPEND));
  EXPECT_EQ(ReadAll(fb), "first line\nsecond line\n");
  ASSERT_TRUE(WriteClose(fa, "FIRST", 0, 0));
  EXPECT_EQ(ReadAll(fb), "FIRST line\nsecond line\n");
  ASSERT_TRUE(WriteClose(fb, "from B\n", O_APPEND));
  EXPECT_EQ(ReadAll(fa), "FIRST line\nsecond line\nfrom B\n");
}

// Bytes of `n` 4 KiB pieces, piece i filled with a value derived from i and `seed`.
std::string Pieces(int n, int seed) {
  std::string out;
  for (int i = 0; i < n; ++i) out.append(4096, static_cast<char>('a' + (i * 7 + seed) % 26));
  return out;
}

// Write-behind of a file this mount did not create (fuse/async_ns.h): B
// (attr_timeout=0, so every stat asks the mount) writes a file A made, in 4 KiB
// pieces from two interleaved streams, as w2 does. The writes are answered
// before their bytes reach the servers; still, a stat on B never shows the
// file shorter than what was written, A sees every byte once B closed, and
// bytes written under an fcntl lock are on the servers when B unlocks.
TEST_F(MountMultiTest, WriteBehindOfAFileMadeElsewhere) {
  ASSERT_NO_FATAL_FAILURE(Start("attr_timeout=0"));
  const std::string fa = a_ + "/wb.bin", fb = b_ + "/wb.bin";
  ASSERT_TRUE(WriteClose(fa, "", O_CREAT | O_TRUNC));

  const int kPieces = 256;  // 1 MiB per stream
  const std::string s0 = Pieces(kPieces, 0), s1 = Pieces(kPieces, 3);
  int fd = ::open(fb.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << strerror(errno);
  const off_t second = static_cast<off_t>(s0.size());
  for (int i = 0; i < kPieces; ++i) {
    const off_t o = static_cast<off_t>(i) * 4096;
    ASSERT_EQ(::pwrite(fd, s0.data() + o, 4096, o), 4096);
    ASSERT_EQ(::pwrite(fd, s1.data() + o, 4096, second + o), 4096);
    if (i % 64 == 63) {
      struct stat st;
      ASSERT_EQ(::fstat(fd, &st), 0);
      EXPECT_EQ(st.st_size, second + o + 4096) << "after piece " << i;
    }
  }
  ASSERT_EQ(::close(fd), 0);
  EXPECT_TRUE(ReadAll(fa) == s0 + s1) << "A does not see B's bytes after B's close";

  // Under a lock, without a close: B locks, writes, unlocks; A then locks and reads.
  fd = ::open(fb.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  struct flock lk {};
  lk.l_type = F_WRLCK;
  lk.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(fd, F_SETLKW, &lk), 0) << strerror(errno);
  const std::string s2 = Pieces(64, 11);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(::pwrite(fd, s2.data() + i * 4096, 4096, i * 4096), 4096);
  lk.l_type = F_UNLCK;
  ASSERT_EQ(::fcntl(fd, F_SETLK, &lk), 0);
  int fa_fd = ::open(fa.c_str(), O_RDWR);
  ASSERT_GE(fa_fd, 0);
  struct flock la {};
  la.l_type = F_RDLCK;
  la.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(fa_fd, F_SETLKW, &la), 0) << strerror(errno);
  std::string got(s2.size(), '\0');
  ASSERT_EQ(::pread(fa_fd, got.data(), got.size(), 0), static_cast<ssize_t>(got.size()));
  EXPECT_TRUE(got == s2) << "A under the lock does not see what B wrote under it";
  la.l_type = F_UNLCK;
  ::fcntl(fa_fd, F_SETLK, &la);
  ::close(fa_fd);
  ::close(fd);
}

// Reads `n` bytes at `off` through an O_DIRECT descriptor in 4 KiB reads.
std::string DirectRead(int fd, off_t off, size_t n) {
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, 4096) != 0) return "<no memory>";
  std::string out;
  for (size_t done = 0; done < n; done += 4096) {
    ssize_t r = ::pread(fd, buf, 4096, off + static_cast<off_t>(done));
    if (r <= 0) break;
    out.append(static_cast<const char*>(buf), static_cast<size_t>(r));
  }
  free(buf);
  return out;
}

// The mount's read-ahead for small reads (fuse/read_windows.h): O_DIRECT 4 KiB
// reads of a sequential stream come from windows the mount fetched, yet an
// open on B after A's close sees A's bytes, and B's own write is read back.
TEST_F(MountMultiTest, SmallReadWindowsStayCoherent) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  const std::string fa = a_ + "/ra.bin", fb = b_ + "/ra.bin";
  const std::string base = Pieces(768, 1);  // 3 MiB
  ASSERT_TRUE(WriteClose(fa, base, O_CREAT | O_TRUNC));

  int fd = ::open(fb.c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(DirectRead(fd, 0, 1 << 20) == base.substr(0, 1 << 20));
  ::close(fd);

  // A rewrites a range B's windows may hold, and closes; B's next open reads it.
  const std::string patch = Pieces(16, 9);
  ASSERT_TRUE(WriteClose(fa, patch, 0, 1 << 19));
  std::string want = base;
  want.replace(1 << 19, patch.size(), patch);
  fd = ::open(fb.c_str(), O_RDWR | O_DIRECT);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(DirectRead(fd, 0, want.size()) == want) << "B read stale bytes after A's close";

  // B's own write, then a read of it through the same descriptor.
  void* buf = nullptr;
  ASSERT_EQ(posix_memalign(&buf, 4096, 4096), 0);
  std::memset(buf, 'Z', 4096);
  ASSERT_EQ(::pwrite(fd, buf, 4096, 8192), 4096);
  free(buf);
  want.replace(8192, 4096, std::string(4096, 'Z'));
  EXPECT_TRUE(DirectRead(fd, 0, 64 * 1024) == want.substr(0, 64 * 1024))
      << "B's own write not read back";
  ::close(fd);
  EXPECT_TRUE(ReadAll(fa) == want);
}

// Reads `n` bytes at `off` through an O_DIRECT descriptor in 1 MiB reads.
std::string DirectReadLarge(int fd, off_t off, size_t n) {
  constexpr size_t kBlock = 1 << 20;
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, kBlock) != 0) return "<no memory>";
  std::string out;
  for (size_t done = 0; done < n; done += kBlock) {
    ssize_t r = ::pread(fd, buf, std::min(kBlock, n - done), off + static_cast<off_t>(done));
    if (r <= 0) break;
    out.append(static_cast<const char*>(buf), static_cast<size_t>(r));
  }
  free(buf);
  return out;
}

// The mount's read-ahead for large O_DIRECT reads (fuse/read_windows.h): B's
// sequential 1 MiB reads are served from blocks fetched ahead (its log says
// "ahead"), yet an open on B after A's close sees A's bytes, and B's own write
// into a block already fetched ahead is read back.
TEST_F(MountMultiTest, LargeDirectReadAheadStaysCoherent) {
  ASSERT_NO_FATAL_FAILURE(Start("loglevel=debug"));
  const std::string fa = a_ + "/big.bin", fb = b_ + "/big.bin";
  const std::string base = Pieces(256 * 6 + 3, 2);  // 6 MiB and 12 KiB: the last block is short
  ASSERT_TRUE(WriteClose(fa, base, O_CREAT | O_TRUNC));

  int fd = ::open(fb.c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(DirectReadLarge(fd, 0, base.size()) == base)
      << "B's large reads differ from A's bytes";
  ::close(fd);
  const std::string log = ReadAll(cluster_->dir() + "/clfmount-b.log");
  size_t ahead = 0;
  for (size_t p = log.find(": ahead"); p != std::string::npos; p = log.find(": ahead", p + 1))
    ++ahead;
  EXPECT_GE(ahead, 5u) << "B's sequential 1 MiB reads were not served by read-ahead";

  // A rewrites the middle and closes; B's next open reads it.
  const std::string patch = Pieces(300, 7);  // 1.17 MiB across blocks 2 and 3
  const off_t at = (2 << 20) + 4096;
  ASSERT_TRUE(WriteClose(fa, patch, 0, at));
  std::string want = base;
  want.replace(static_cast<size_t>(at), patch.size(), patch);
  fd = ::open(fb.c_str(), O_RDWR | O_DIRECT);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(DirectReadLarge(fd, 0, 2 << 20) == want.substr(0, 2 << 20));
  // Blocks 2 and 3 are fetched ahead by now; B writes into block 3, then reads on.
  void* buf = nullptr;
  ASSERT_EQ(posix_memalign(&buf, 4096, 4096), 0);
  std::memset(buf, 'Q', 4096);
  ASSERT_EQ(::pwrite(fd, buf, 4096, (3 << 20) + 8192), 4096);
  free(buf);
  want.replace((3 << 20) + 8192, 4096, std::string(4096, 'Q'));
  EXPECT_TRUE(DirectReadLarge(fd, 2 << 20, want.size() - (2 << 20)) == want.substr(2 << 20))
      << "B read stale bytes after A's close, or missed its own write";
  ::close(fd);
  EXPECT_TRUE(ReadAll(fa) == want);
}

// Reads [off, off+n) through `fd` in 1 MiB reads into a buffer 16 bytes past
// a page boundary, as malloc hands out large buffers: the kernel cuts each
// read of a direct-I/O open in two (1 MiB - 16 bytes, then 16).
std::string ReadUnaligned(int fd, off_t off, size_t n) {
  constexpr size_t kBlock = 1 << 20;
  void* raw = nullptr;
  if (posix_memalign(&raw, 4096, kBlock + 4096) != 0) return "<no memory>";
  char* buf = static_cast<char*>(raw) + 16;
  std::string out;
  for (size_t done = 0; done < n;) {
    ssize_t r = ::pread(fd, buf, std::min(kBlock, n - done), off + static_cast<off_t>(done));
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
    done += static_cast<size_t>(r);
  }
  free(raw);
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// A read-only open of a file of direct_read_min bytes or more reads around
// the page cache, from the mount's read-ahead chunks (fuse/read_windows.h):
// B's plain (not O_DIRECT) 1 MiB reads into an unaligned buffer reach the
// mount whole (max_pages), are served by read-ahead and return A's bytes; after A rewrites part of the file and
// closes, B's next open reads the new bytes. Once B read the file in 4 KiB
// requests, its next plain open uses the page cache; so does any open of a
// smaller file (no read-ahead answers their reads).
TEST_F(MountMultiTest, LargeReadOnlyOpenReadsFromReadAhead) {
  ASSERT_NO_FATAL_FAILURE(Start("loglevel=debug,direct_read_min=8M"));
  const std::string fa = a_ + "/large.bin", fb = b_ + "/large.bin";
  const std::string base = Pieces(256 * 10 + 5, 3);  // 10 MiB and 20 KiB
  ASSERT_TRUE(WriteClose(fa, base, O_CREAT | O_TRUNC));
  const std::string small = Pieces(256 * 4, 4);  // 4 MiB: below direct_read_min
  ASSERT_TRUE(WriteClose(a_ + "/small.bin", small, O_CREAT | O_TRUNC));

  int fd = ::open(fb.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(ReadUnaligned(fd, 0, base.size()) == base) << "B's reads differ from A's bytes";
  ::close(fd);
  const std::string log_path = cluster_->dir() + "/clfmount-b.log";
  const std::string log = ReadAll(log_path);
  // 11 reads: the first fetches its own bytes, the others come from chunks.
  EXPECT_GE(Count(log, ": ahead"), 9u) << "B's sequential reads of the large file were not served by read-ahead";
  // With -o max_pages (default 1024) a 1 MiB read into a buffer 16 bytes
  // past a page boundary (257 pages) is one request, not 1 MiB - 16 and 16.
  EXPECT_EQ(Count(log, "requests of up to 1024 pages"), 1u) << "clfmount did not set max_pages in its INIT reply";
  std::ifstream limit_file("/proc/sys/fs/fuse/max_pages_limit");
  unsigned limit = 0;
  if (limit_file >> limit && limit >= 257) {
    EXPECT_EQ(Count(log, "len 1048560"), 0u) << "the kernel still cut 1 MiB reads at 256 pages";
  } else {
    std::printf("fs.fuse.max_pages_limit absent or below 257: the kernel cuts 1 MiB reads; not checked\n");
  }

  // A rewrites 1.5 MiB across chunks 3 and 4 and closes; B's next open sees it.
  const std::string patch = Pieces(384, 9);
  const off_t at = (3 << 20) + 512 * 1024;
  ASSERT_TRUE(WriteClose(fa, patch, 0, at));
  std::string want = base;
  want.replace(static_cast<size_t>(at), patch.size(), patch);
  fd = ::open(fb.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(ReadUnaligned(fd, 0, want.size()) == want) << "B read stale bytes after A's close";
  ::close(fd);

  // B reads the large file in 4 KiB O_DIRECT reads: a file read mostly in
  // small requests, so B's next plain open of it uses the page cache.
  fd = ::open(fb.c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(DirectRead(fd, 0, 2 << 20) == want.substr(0, 2 << 20));
  ::close(fd);
  size_t before = Count(ReadAll(log_path), ": ahead");
  fd = ::open(fb.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(ReadUnaligned(fd, 0, want.size()) == want);
  ::close(fd);
  EXPECT_EQ(Count(ReadAll(log_path), ": ahead"), before)
      << "a file read in small requests was opened around the page cache again";

  // The small file: read through the page cache.
  before = Count(ReadAll(log_path), ": ahead");
  fd = ::open((b_ + "/small.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_TRUE(ReadUnaligned(fd, 0, small.size()) == small);
  ::close(fd);
  EXPECT_EQ(Count(ReadAll(log_path), ": ahead"), before)
      << "reads of a file below direct_read_min came from read-ahead, not the page cache";
}

}  // namespace
}  // namespace clf::testing
