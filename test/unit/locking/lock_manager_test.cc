#include "locking/lock_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "test/support/test_util.h"

namespace clf::locking {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

LockManager::Deadline In(milliseconds d) { return std::chrono::steady_clock::now() + d; }

class LockManagerTest : public ::testing::Test {
 protected:
  LockManagerTest() : mgr_(&clock_) {}
  Owner NewOwner() {
    Result<SessionId> s = mgr_.OpenSession(seconds(10));
    EXPECT_TRUE(s.ok());
    return Owner{*s, 1};
  }
  // Waits (really) until `file` has `n` waiting requests.
  void AwaitWaiters(FileId file, size_t n) {
    for (int i = 0; i < 5000 && mgr_.WaitingRequests(file) != n; ++i) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    ASSERT_EQ(mgr_.WaitingRequests(file), n);
  }
  ManualClock clock_;
  LockManager mgr_;
};

TEST_F(LockManagerTest, BlockingLockWaitsForUnlock) {
  Owner a = NewOwner(), b = NewOwner();
  Result<LockId> la = mgr_.TryLock(7, a, LockMode::kExclusive, LockRequest::Range(0, 100));
  ASSERT_OK(la);
  ASSERT_STATUS(Code::kWouldBlock,
                mgr_.TryLock(7, b, LockMode::kShared, LockRequest::Range(50, 1)));
  // Other files are independent.
  ASSERT_OK(mgr_.TryLock(8, b, LockMode::kExclusive, LockRequest::Range(0, 100)));
  std::atomic<bool> got{false};
  std::thread t([&] {
    Result<LockId> lb =
        mgr_.Lock(7, b, LockMode::kShared, LockRequest::Range(50, 1), In(seconds(20)));
    EXPECT_OK(lb);
    got = true;
  });
  AwaitWaiters(7, 1);
  EXPECT_FALSE(got.load());
  ASSERT_OK(mgr_.Unlock(*la));
  t.join();
  EXPECT_TRUE(got.load());
  ASSERT_STATUS(Code::kNotFound, mgr_.Unlock(*la));
}

TEST_F(LockManagerTest, DeadlineWithdrawsTheRequest) {
  Owner a = NewOwner(), b = NewOwner(), c = NewOwner();
  ASSERT_OK(mgr_.TryLock(1, a, LockMode::kExclusive, LockRequest::Range(0, 10)));
  // b waits for [0, 20); c's [15, 20) would queue behind b while b waits.
  ASSERT_STATUS(Code::kTimedOut, mgr_.Lock(1, b, LockMode::kExclusive, LockRequest::Range(0, 20),
                                           In(milliseconds(30))));
  EXPECT_EQ(mgr_.WaitingRequests(1), 0u);
  ASSERT_OK(mgr_.TryLock(1, c, LockMode::kExclusive, LockRequest::Range(15, 5)));
}

TEST_F(LockManagerTest, CancelWakesTheWaiterWithCancelled) {
  Owner a = NewOwner(), b = NewOwner();
  ASSERT_OK(mgr_.TryLock(1, a, LockMode::kExclusive, LockRequest::WholeFile()));
  std::atomic<Code> code{Code::kOk};
  Result<LockId> id = mgr_.LockAsync(1, b, LockMode::kShared, LockRequest::Range(0, 1),
                                     [&](Status s) { code = s.code(); });
  ASSERT_OK(id);
  EXPECT_EQ(code.load(), Code::kOk);  // not called yet
  ASSERT_OK(mgr_.Cancel(*id));
  EXPECT_EQ(code.load(), Code::kCancelled);
  ASSERT_STATUS(Code::kNotFound, mgr_.Cancel(*id));
}

TEST_F(LockManagerTest, AsyncCallbackRunsOnGrant) {
  Owner a = NewOwner(), b = NewOwner();
  Result<LockId> la = mgr_.TryLock(1, a, LockMode::kExclusive, LockRequest::WholeFile());
  int calls = 0;
  Status got(Code::kInternal, "not called");
  Result<LockId> lb =
      mgr_.LockAsync(1, b, LockMode::kExclusive, LockRequest::Range(5, 5), [&](Status s) {
        ++calls;
        got = s;
        // The callback may call back into the manager.
        EXPECT_EQ(mgr_.GrantedLocks(1), 1u);
      });
  ASSERT_OK(lb);
  EXPECT_EQ(calls, 0);
  ASSERT_OK(mgr_.Unlock(*la));
  EXPECT_EQ(calls, 1);
  EXPECT_OK(got);
  ASSERT_OK(mgr_.Unlock(*lb));
}

TEST_F(LockManagerTest, ExpiredLeaseReleasesLocksAndWakesWaiters) {
  Result<SessionId> sa = mgr_.OpenSession(seconds(5));
  Result<SessionId> sb = mgr_.OpenSession(seconds(60));
  ASSERT_OK(sa);
  ASSERT_OK(sb);
  Owner a{*sa, 1}, b{*sb, 1};
  Result<LockId> la = mgr_.TryLock(1, a, LockMode::kExclusive, LockRequest::Range(0, 10));
  ASSERT_OK(la);
  Result<LockId> la_wait = Status(Code::kInternal, "not run");
  std::thread waiter_a;  // a also waits for something b holds: it must fail with kStale
  ASSERT_OK(mgr_.TryLock(2, b, LockMode::kExclusive, LockRequest::WholeFile()));
  waiter_a = std::thread([&] {
    la_wait = mgr_.Lock(2, a, LockMode::kShared, LockRequest::Range(0, 1), In(seconds(20)));
  });
  std::thread waiter_b([&] {
    EXPECT_OK(mgr_.Lock(1, b, LockMode::kShared, LockRequest::Range(5, 1), In(seconds(20))));
  });
  AwaitWaiters(1, 1);
  AwaitWaiters(2, 1);
  clock_.Advance(seconds(3));
  ASSERT_OK(mgr_.RenewSession(a.session));  // renewal extends to t=8
  clock_.Advance(seconds(4));
  EXPECT_EQ(mgr_.ExpireSessions(), 0u);
  clock_.Advance(seconds(2));
  EXPECT_EQ(mgr_.ExpireSessions(), 1u);
  waiter_b.join();
  waiter_a.join();
  EXPECT_EQ(la_wait.status().code(), Code::kStale);
  ASSERT_STATUS(Code::kNotFound, mgr_.Unlock(*la));
  ASSERT_STATUS(Code::kStale, mgr_.RenewSession(a.session));
  ASSERT_STATUS(Code::kStale, mgr_.TryLock(1, a, LockMode::kShared, LockRequest::Range(0, 1)));
}

TEST_F(LockManagerTest, CloseSessionReleasesEverything) {
  Owner a = NewOwner(), b = NewOwner();
  ASSERT_OK(mgr_.TryLock(1, a, LockMode::kExclusive, LockRequest::WholeFile()));
  ASSERT_OK(mgr_.TryLock(2, a, LockMode::kExclusive, LockRequest::WholeFile()));
  ASSERT_OK(mgr_.CloseSession(a.session));
  ASSERT_OK(mgr_.TryLock(1, b, LockMode::kExclusive, LockRequest::WholeFile()));
  ASSERT_OK(mgr_.TryLock(2, b, LockMode::kExclusive, LockRequest::WholeFile()));
}

// Many threads hammer one file with overlapping exclusive range locks; the
// holders of a byte must never overlap in time.
TEST_F(LockManagerTest, ConcurrentExclusiveHoldersNeverOverlap) {
  constexpr int kThreads = 6;
  std::vector<std::atomic<int>> holders(64);
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  std::vector<Owner> owners;
  for (int i = 0; i < kThreads; ++i) owners.push_back(NewOwner());
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 rng(i);
      for (int k = 0; k < 300; ++k) {
        uint64_t off = rng() % 60, len = 1 + rng() % 4;
        Result<LockId> id = mgr_.Lock(3, owners[i], LockMode::kExclusive,
                                      LockRequest::Range(off, len), In(seconds(30)));
        if (!id.ok()) {
          bad = true;
          return;
        }
        for (uint64_t b = off; b < off + len; ++b) {
          if (holders[b].fetch_add(1) != 0) bad = true;
        }
        std::this_thread::yield();
        for (uint64_t b = off; b < off + len; ++b) holders[b].fetch_sub(1);
        if (!mgr_.Unlock(*id).ok()) bad = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(mgr_.GrantedLocks(3), 0u);
}

}  // namespace
}  // namespace clf::locking
