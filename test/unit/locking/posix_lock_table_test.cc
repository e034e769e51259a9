// POSIX semantics of PosixLockTable, checked against the Linux kernel: the same
// sequence runs on a tmpfs file with open-file-description locks (one fd per
// owner), and every outcome and every lock the kernel reports must match.
#include "locking/posix_lock_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "test/support/test_util.h"

namespace clf::locking {
namespace {

constexpr uint64_t kSpan = 40;  // bytes exercised; locks may also run to EOF

// A file on tmpfs (/dev/shm when present) with one open file description per owner.
class KernelFile {
 public:
  explicit KernelFile(int owners)
      : dir_(std::filesystem::exists("/dev/shm") ? "clf-posix" : "clf-posix") {
    path_ = std::filesystem::exists("/dev/shm")
                ? "/dev/shm/clf-lock-test-" + std::to_string(getpid())
                : dir_.str() + "/f";
    for (int i = 0; i <= owners; ++i) {  // the last fd is a probe that holds nothing
      int fd = open(path_.c_str(), O_RDWR | O_CREAT, 0600);
      EXPECT_GE(fd, 0) << path_;
      fds_.push_back(fd);
    }
  }
  ~KernelFile() {
    for (int fd : fds_) close(fd);
    unlink(path_.c_str());
  }
  int fd(int owner) const { return fds_[owner]; }
  int probe() const { return fds_.back(); }

  // F_OFD_SETLK: 0 or errno.
  int SetLock(int owner, PosixType type, uint64_t start, uint64_t len) const {
    struct flock fl = {};
    fl.l_type = type == PosixType::kRead ? F_RDLCK : type == PosixType::kWrite ? F_WRLCK : F_UNLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(start);
    fl.l_len = static_cast<off_t>(len);
    return fcntl(fds_[owner], F_OFD_SETLK, &fl) == 0 ? 0 : errno;
  }
  // F_OFD_GETLK from `fd`: the blocking lock's type/start/len, or type F_UNLCK.
  struct flock GetLock(int fd, short type, uint64_t start, uint64_t len) const {
    struct flock fl = {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(start);
    fl.l_len = static_cast<off_t>(len);
    EXPECT_EQ(fcntl(fd, F_OFD_GETLK, &fl), 0) << strerror(errno);
    return fl;
  }

 private:
  clf::testing::TempDir dir_;
  std::string path_;
  std::vector<int> fds_;
};

Owner OwnerOf(int i) { return Owner{100, static_cast<uint64_t>(i)}; }
const Owner kProbe{999, 0};

// How many locks (of any owner but `self`, if set) cover byte b in the table.
int Covering(const PosixLockTable& t, int owners, uint64_t b, int self) {
  int n = 0;
  for (int i = 0; i < owners; ++i) {
    if (i == self) continue;
    for (const PosixLockInfo& l : t.LocksOf(OwnerOf(i))) {
      uint64_t end = l.length == 0 ? kMaxOffset : l.start + l.length;
      if (l.start <= b && b < end) ++n;
    }
  }
  return n;
}

// Compares, byte by byte, what F_OFD_GETLK reports from the probe and from each
// owner against GetLock on the table. When exactly one lock covers the byte the
// reported range must match exactly: this checks merging and splitting.
void CompareWithKernel(const PosixLockTable& t, const KernelFile& k, int owners) {
  for (int viewer = -1; viewer < owners; ++viewer) {
    int fd = viewer < 0 ? k.probe() : k.fd(viewer);
    Owner who = viewer < 0 ? kProbe : OwnerOf(viewer);
    for (uint64_t b = 0; b < kSpan + 2; ++b) {
      for (PosixType type : {PosixType::kRead, PosixType::kWrite}) {
        struct flock fl = k.GetLock(fd, type == PosixType::kRead ? F_RDLCK : F_WRLCK, b, 1);
        std::optional<PosixLockInfo> mine = t.GetLock(who, type, b, 1);
        ASSERT_EQ(fl.l_type != F_UNLCK, mine.has_value()) << "viewer " << viewer << " byte " << b;
        if (!mine) continue;
        ASSERT_EQ(fl.l_type == F_WRLCK, mine->type == PosixType::kWrite) << "byte " << b;
        if (Covering(t, owners, b, viewer) == 1) {
          ASSERT_EQ(static_cast<uint64_t>(fl.l_start), mine->start)
              << "viewer " << viewer << " byte " << b;
          ASSERT_EQ(static_cast<uint64_t>(fl.l_len), mine->length)
              << "viewer " << viewer << " byte " << b;
        }
      }
    }
  }
}

struct Step {
  int owner;
  PosixType type;
  uint64_t start;
  uint64_t len;
};

void RunAgainstKernel(const std::vector<Step>& steps, int owners) {
  KernelFile k(owners);
  PosixLockTable t;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    int err = k.SetLock(s.owner, s.type, s.start, s.len);
    Status st = t.SetLock(OwnerOf(s.owner), s.type, s.start, s.len, nullptr);
    ASSERT_TRUE(err == 0 || err == EAGAIN) << strerror(err);
    ASSERT_EQ(st.ok(), err == 0) << "step " << i << ": " << st.ToString();
    if (!st.ok()) {
      ASSERT_EQ(st.code(), Code::kWouldBlock);
    }
    CompareWithKernel(t, k, owners);
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "after step " << i;
      return;
    }
  }
}

TEST(PosixLockTableTest, SplitMergeUpgradeMatchLinux) {
  using P = PosixType;
  RunAgainstKernel(
      {
          {0, P::kRead, 0, 10},    // A reads [0,10)
          {0, P::kRead, 10, 5},    // adjacent read: merges into [0,15)
          {0, P::kUnlock, 4, 2},   // split into [0,4) and [6,15)
          {0, P::kWrite, 8, 3},    // upgrade the middle: R[6,8) W[8,11) R[11,15)
          {1, P::kRead, 6, 2},     // B may share A's read part
          {1, P::kRead, 9, 1},     // but not A's write part
          {0, P::kRead, 8, 3},     // downgrade: R[6,15) merged again
          {1, P::kRead, 9, 1},     // now B can read there
          {0, P::kWrite, 20, 0},   // A writes [20, EOF)
          {1, P::kWrite, 30, 1},   // refused
          {0, P::kUnlock, 25, 5},  // split the EOF lock
          {1, P::kWrite, 26, 1},   // now granted
          {0, P::kWrite, 0, 0},    // refused: B holds reads
          {1, P::kUnlock, 0, 0},   // B drops everything
          {0, P::kWrite, 0, 0},    // A takes the whole file
      },
      2);
}

TEST(PosixLockTableTest, RandomSequencesMatchLinux) {
  std::mt19937_64 rng(2024);
  for (int seq = 0; seq < 60; ++seq) {
    std::vector<Step> steps;
    for (int i = 0; i < 40; ++i) {
      Step s;
      s.owner = static_cast<int>(rng() % 3);
      int r = static_cast<int>(rng() % 10);
      s.type = r < 4 ? PosixType::kRead : r < 7 ? PosixType::kWrite : PosixType::kUnlock;
      s.start = rng() % kSpan;
      s.len = rng() % 8 == 0 ? 0 : 1 + rng() % 12;
      steps.push_back(s);
    }
    RunAgainstKernel(steps, 3);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "sequence " << seq;
      return;
    }
  }
}

TEST(PosixLockTableTest, FlockMatchesLinux) {
  KernelFile k(3);
  PosixLockTable t;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 400; ++i) {
    int o = static_cast<int>(rng() % 3);
    int r = static_cast<int>(rng() % 3);
    FlockType type = r == 0   ? FlockType::kShared
                     : r == 1 ? FlockType::kExclusive
                              : FlockType::kUnlock;
    int op = (r == 0 ? LOCK_SH : r == 1 ? LOCK_EX : LOCK_UN) | LOCK_NB;
    int err = flock(k.fd(o), op) == 0 ? 0 : errno;
    Status s = t.Flock(OwnerOf(o), type, nullptr);
    ASSERT_EQ(s.ok(), err == 0) << "step " << i << " " << strerror(err);
    // flock locks are invisible to fcntl locks and the reverse.
    ASSERT_EQ(k.SetLock(o, PosixType::kWrite, 0, 0), 0);
    ASSERT_OK(t.SetLock(OwnerOf(o), PosixType::kWrite, 0, 0, nullptr));
    ASSERT_EQ(k.SetLock(o, PosixType::kUnlock, 0, 0), 0);
    ASSERT_OK(t.SetLock(OwnerOf(o), PosixType::kUnlock, 0, 0, nullptr));
  }
}

TEST(PosixLockTableTest, BlockingRequestWaitsThenIsGranted) {
  PosixLockTable t;
  Owner a = OwnerOf(0), b = OwnerOf(1);
  ASSERT_OK(t.SetLock(a, PosixType::kWrite, 0, 10, nullptr));
  Result<PosixWaitResult> w = t.SetLockWait(b, PosixType::kRead, 5, 10, nullptr);
  ASSERT_OK(w);
  ASSERT_FALSE(w->granted);
  std::vector<WaitTicket> granted;
  ASSERT_OK(t.SetLock(a, PosixType::kUnlock, 0, 4, &granted));  // not enough
  EXPECT_TRUE(granted.empty());
  ASSERT_OK(t.SetLock(a, PosixType::kRead, 4, 6, &granted));  // downgrade unblocks
  EXPECT_EQ(granted, (std::vector<WaitTicket>{w->ticket}));
  EXPECT_EQ(t.LocksOf(b), (std::vector<PosixLockInfo>{{b, PosixType::kRead, 5, 10}}));
}

TEST(PosixLockTableTest, DeadlockIsDetected) {
  PosixLockTable t;
  Owner a = OwnerOf(0), b = OwnerOf(1), c = OwnerOf(2);
  ASSERT_OK(t.SetLock(a, PosixType::kWrite, 0, 1, nullptr));
  ASSERT_OK(t.SetLock(b, PosixType::kWrite, 1, 1, nullptr));
  ASSERT_OK(t.SetLock(c, PosixType::kWrite, 2, 1, nullptr));
  Result<PosixWaitResult> wa = t.SetLockWait(a, PosixType::kWrite, 1, 1, nullptr);  // a -> b
  ASSERT_OK(wa);
  ASSERT_FALSE(wa->granted);
  Result<PosixWaitResult> wb = t.SetLockWait(b, PosixType::kWrite, 2, 1, nullptr);  // b -> c
  ASSERT_OK(wb);
  ASSERT_STATUS(Code::kDeadlock, t.SetLockWait(c, PosixType::kWrite, 0, 1, nullptr));  // c -> a
  // Two readers upgrading the same range deadlock too.
  PosixLockTable u;
  ASSERT_OK(u.SetLock(a, PosixType::kRead, 0, 10, nullptr));
  ASSERT_OK(u.SetLock(b, PosixType::kRead, 0, 10, nullptr));
  ASSERT_OK(u.SetLockWait(a, PosixType::kWrite, 0, 10, nullptr));
  ASSERT_STATUS(Code::kDeadlock, u.SetLockWait(b, PosixType::kWrite, 0, 10, nullptr));
  // c waits behind both readers without closing a cycle; closing a drops a's
  // lock and wait, closing b then lets c in.
  std::vector<WaitTicket> granted;
  Result<PosixWaitResult> wc = u.SetLockWait(c, PosixType::kWrite, 0, 1, nullptr);
  ASSERT_OK(wc);
  ASSERT_FALSE(wc->granted);
  u.ReleaseOwner(a, &granted);
  EXPECT_TRUE(granted.empty());
  u.ReleaseOwner(b, &granted);
  EXPECT_EQ(granted, (std::vector<WaitTicket>{wc->ticket}));
  EXPECT_EQ(u.waiting(), 0u);
}

TEST(PosixLockTableTest, SessionExpiryDropsLocksAndWaits) {
  PosixLockTable t;
  Owner a{1, 1}, a2{1, 2}, b{2, 1};
  ASSERT_OK(t.SetLock(a, PosixType::kWrite, 0, 0, nullptr));
  ASSERT_OK(t.Flock(a2, FlockType::kExclusive, nullptr));
  Result<PosixWaitResult> wb = t.SetLockWait(b, PosixType::kRead, 0, 1, nullptr);
  Result<PosixWaitResult> fb = t.FlockWait(b, FlockType::kShared, nullptr);
  Result<PosixWaitResult> wa = t.SetLockWait(a2, PosixType::kRead, 0, 1, nullptr);  // a2 waits on a
  ASSERT_OK(wa);
  ASSERT_FALSE(wa->granted);
  std::vector<WaitTicket> granted, cancelled;
  t.ReleaseSession(1, &granted, &cancelled);
  EXPECT_EQ(granted, (std::vector<WaitTicket>{wb->ticket, fb->ticket}));
  EXPECT_EQ(cancelled, (std::vector<WaitTicket>{wa->ticket}));
  EXPECT_EQ(t.FlockOf(b), FlockType::kShared);
  ASSERT_STATUS(Code::kOverflow, t.SetLock(a, PosixType::kRead, kMaxOffset - 2, 5, nullptr));
}

}  // namespace
}  // namespace clf::locking
