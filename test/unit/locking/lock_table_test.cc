#include "locking/lock_table.h"

#include <gtest/gtest.h>

#include "test/support/test_util.h"

namespace clf::locking {
namespace {

const Owner kA{1, 1};
const Owner kB{2, 1};
const Owner kC{3, 1};

ExtentList List(std::vector<Extent> e) { return *ExtentList::FromExtents(std::move(e)); }

TEST(LockTableTest, SharedLocksCoexistExclusiveConflicts) {
  LockTable t;
  ASSERT_OK(t.TryAcquire(1, kA, LockMode::kShared, LockRequest::Range(0, 100)));
  ASSERT_OK(t.TryAcquire(2, kB, LockMode::kShared, LockRequest::Range(50, 100)));
  ASSERT_STATUS(Code::kWouldBlock,
                t.TryAcquire(3, kC, LockMode::kExclusive, LockRequest::Range(99, 1)));
  ASSERT_OK(t.TryAcquire(4, kC, LockMode::kExclusive, LockRequest::Range(150, 10)));
  // The same owner never conflicts with itself.
  ASSERT_OK(t.TryAcquire(5, kA, LockMode::kExclusive, LockRequest::Range(0, 10)));
  ASSERT_STATUS(Code::kExists, t.TryAcquire(5, kA, LockMode::kShared, LockRequest::Range(500, 1)));
  ASSERT_STATUS(Code::kInvalid, t.TryAcquire(0, kA, LockMode::kShared, LockRequest::Range(500, 1)));
  ASSERT_STATUS(Code::kInvalid,
                t.TryAcquire(6, kA, LockMode::kShared, LockRequest::List(ExtentList())));
  std::optional<LockConflict> c =
      t.FindConflict(kC, LockMode::kExclusive, LockRequest::Range(60, 5));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->id, 1u);
  EXPECT_EQ(c->owner, kA);
  EXPECT_EQ(t.granted_locks(), 4u);
}

TEST(LockTableTest, ListLocksInterleaveWithoutConflict) {
  // The paper's example: two processes writing 10 bytes and skipping 10.
  LockTable t;
  StridedPattern even = *StridedPattern::Make({{0, 10, 20, 100}});
  StridedPattern odd = *StridedPattern::Make({{10, 10, 20, 100}});
  ASSERT_OK(t.TryAcquire(1, kA, LockMode::kExclusive, LockRequest::Pattern(even)));
  ASSERT_OK(t.TryAcquire(2, kB, LockMode::kExclusive, LockRequest::Pattern(odd)));
  EXPECT_EQ(t.granted_extents(), 200u);
  // Byte-range locks over the same accesses would conflict.
  ASSERT_STATUS(Code::kWouldBlock,
                t.TryAcquire(3, kC, LockMode::kExclusive, LockRequest::Range(0, 1990)));
  std::vector<LockId> woken;
  ASSERT_OK(t.Release(1, &woken));
  ASSERT_OK(t.Release(2, &woken));
  EXPECT_TRUE(woken.empty());
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.granted_extents(), 0u);
}

TEST(LockTableTest, ListIsAllOrNothingAndHoldsNothingWhileWaiting) {
  LockTable t;
  ASSERT_OK(t.TryAcquire(1, kA, LockMode::kExclusive, LockRequest::Range(50, 10)));
  Result<AcquireOutcome> r = t.Acquire(2, kB, LockMode::kExclusive,
                                       LockRequest::List(List({{0, 10}, {55, 1}, {100, 10}})));
  ASSERT_OK(r);
  EXPECT_EQ(*r, AcquireOutcome::kQueued);
  EXPECT_EQ(t.granted_extents(), 1u);  // nothing of the list is held
  // A request that does not conflict with the waiter or the holder passes.
  ASSERT_OK(t.TryAcquire(3, kC, LockMode::kExclusive, LockRequest::Range(20, 10)));
  // One that conflicts with the waiter waits behind it.
  ASSERT_STATUS(Code::kWouldBlock,
                t.TryAcquire(4, kC, LockMode::kExclusive, LockRequest::Range(5, 1)));
  std::vector<LockId> woken;
  ASSERT_OK(t.Release(1, &woken));
  EXPECT_EQ(woken, (std::vector<LockId>{2}));
  EXPECT_TRUE(t.IsGranted(2));
  EXPECT_EQ(t.granted_extents(), 4u);
}

TEST(LockTableTest, BigListIsNotStarvedBySmallRequests) {
  LockTable t;
  LockId next = 1;
  std::vector<LockId> held;
  // Readers keep arriving over the whole region, each overlapping the last.
  ASSERT_OK(t.TryAcquire(next, kA, LockMode::kShared, LockRequest::Range(0, 10)));
  held.push_back(next++);
  StridedPattern big = *StridedPattern::Make({{0, 1, 2, 5000}});
  LockId big_id = next++;
  ASSERT_EQ(*t.Acquire(big_id, kB, LockMode::kExclusive, LockRequest::Pattern(big)),
            AcquireOutcome::kQueued);
  std::vector<LockId> woken;
  for (int i = 0; i < 100; ++i) {
    Owner o{10 + static_cast<uint64_t>(i), 1};
    Result<AcquireOutcome> r =
        t.Acquire(next, o, LockMode::kShared, LockRequest::Range(i * 10, 10));
    ASSERT_OK(r);
    EXPECT_EQ(*r, AcquireOutcome::kQueued);  // behind the big request
    ++next;
  }
  ASSERT_OK(t.Release(held[0], &woken));
  ASSERT_FALSE(woken.empty());
  EXPECT_EQ(woken[0], big_id);
  // Readers whose range holds no odd-or-even conflict with the list still wait;
  // every one of them overlaps a byte of the big pattern.
  EXPECT_EQ(woken.size(), 1u);
  woken.clear();
  ASSERT_OK(t.Release(big_id, &woken));
  EXPECT_EQ(woken.size(), 100u);
}

TEST(LockTableTest, CancelAndSessionRelease) {
  LockTable t;
  ASSERT_OK(t.TryAcquire(1, kA, LockMode::kExclusive, LockRequest::WholeFile()));
  ASSERT_EQ(*t.Acquire(2, kB, LockMode::kShared, LockRequest::Range(0, 5)),
            AcquireOutcome::kQueued);
  ASSERT_EQ(*t.Acquire(3, kC, LockMode::kExclusive, LockRequest::Range(0, 5)),
            AcquireOutcome::kQueued);
  ASSERT_EQ(*t.Acquire(4, kB, LockMode::kShared, LockRequest::Range(100, 5)),
            AcquireOutcome::kQueued);
  std::vector<LockId> woken;
  ASSERT_STATUS(Code::kBusy, t.Cancel(1, &woken));
  ASSERT_OK(t.Cancel(2, &woken));
  EXPECT_TRUE(woken.empty());
  std::vector<LockId> cancelled;
  t.ReleaseSession(kA.session, &woken, &cancelled);
  EXPECT_EQ(woken, (std::vector<LockId>{3, 4}));
  EXPECT_TRUE(cancelled.empty());
  woken.clear();
  t.ReleaseSession(kC.session, &woken, &cancelled);
  EXPECT_TRUE(t.IsGranted(4));
  ASSERT_STATUS(Code::kNotFound, t.Release(3, &woken));
}

TEST(LockTableTest, WholeFileCoversEverything) {
  LockTable t;
  ASSERT_OK(t.TryAcquire(1, kA, LockMode::kShared, LockRequest::WholeFile()));
  ASSERT_STATUS(Code::kWouldBlock,
                t.TryAcquire(2, kB, LockMode::kExclusive, LockRequest::Range(kMaxOffset - 10, 5)));
  ASSERT_OK(t.TryAcquire(3, kB, LockMode::kShared, LockRequest::Range(kMaxOffset - 10, 5)));
}

TEST(LockTableTest, HugePatternsAreRefusedBeforeTheyAreWalked) {
  LockTable t(LockTableOptions{1000});
  // 2^40 contiguous 10-byte blocks: one extent, but 2^40 steps to find that out.
  StridedPattern huge = *StridedPattern::Make({{0, 1, 10, uint64_t{1} << 40}, {0, 10, 10, 1}});
  ASSERT_STATUS(Code::kTooBig,
                t.TryAcquire(1, kA, LockMode::kExclusive, LockRequest::Pattern(huge)));
  // A contiguous leaf counts once.
  StridedPattern run = *StridedPattern::Make({{0, 10, 10, uint64_t{1} << 40}});
  ASSERT_OK(t.TryAcquire(2, kA, LockMode::kExclusive, LockRequest::Pattern(run)));
  EXPECT_EQ(t.granted_extents(), 1u);
}

}  // namespace
}  // namespace clf::locking
