#include "locking/interval_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "locking/lock_types.h"

namespace clf::locking {
namespace {

TEST(IntervalTreeTest, FindsOverlapsInStartOrder) {
  IntervalTree t;
  t.Insert(10, 20, 1);
  t.Insert(0, 5, 2);
  t.Insert(15, 100, 3);
  t.Insert(30, 40, 4);
  std::vector<uint64_t> got;
  t.ForEachOverlap(18, 31, [&](IntervalTree::NodeId n) {
    got.push_back(t.value(n));
    return true;
  });
  EXPECT_EQ(got, (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_TRUE(t.AnyOverlap(4, 6));
  EXPECT_FALSE(t.AnyOverlap(5, 10));
  EXPECT_FALSE(t.AnyOverlap(100, 200));
  EXPECT_TRUE(t.CheckInvariants());
}

// Random inserts and erases against a brute-force list of intervals.
TEST(IntervalTreeTest, MatchesBruteForce) {
  std::mt19937_64 rng(42);
  IntervalTree t;
  std::map<IntervalTree::NodeId, std::pair<uint64_t, uint64_t>> model;
  for (int step = 0; step < 12000; ++step) {
    if (rng() % 10 == 0) {  // a sorted batch, with duplicate starts at times
      struct Iv {
        uint64_t offset, len;
        uint64_t end() const { return offset + len; }
      };
      std::vector<Iv> batch;
      uint64_t s = rng() % 1000;
      for (size_t k = 0, n = 1 + rng() % 20; k < n; ++k) {
        batch.push_back({s, 1 + rng() % 30});
        s += rng() % 3 == 0 ? 0 : rng() % 40;
      }
      std::vector<IntervalTree::NodeId> ids;
      t.InsertSorted(batch, 3, &ids);
      ASSERT_EQ(ids.size(), batch.size());
      for (size_t k = 0; k < ids.size(); ++k) {
        ASSERT_EQ(t.start(ids[k]), batch[k].offset);
        model[ids[k]] = {batch[k].offset, batch[k].end()};
      }
      if (step % 20 == 0) {
        ASSERT_TRUE(t.CheckInvariants());
      }
    } else if (model.empty() || rng() % 3 != 0) {
      uint64_t s = rng() % 1000;
      uint64_t e = s + 1 + rng() % 50;
      model[t.Insert(s, e, s * 7)] = {s, e};
    } else if (rng() % 8 == 0) {  // erase a random batch
      std::vector<IntervalTree::NodeId> batch;
      for (auto it = model.begin(); it != model.end();) {
        if (rng() % 4 == 0) {
          batch.push_back(it->first);
          it = model.erase(it);
        } else {
          ++it;
        }
      }
      std::shuffle(batch.begin(), batch.end(), rng);
      t.EraseBatch(batch);
    } else {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      t.Erase(it->first);
      model.erase(it);
    }
    uint64_t lo = rng() % 1050;
    uint64_t hi = lo + 1 + rng() % 60;
    std::set<IntervalTree::NodeId> want;
    for (const auto& [id, iv] : model) {
      if (iv.first < hi && iv.second > lo) want.insert(id);
    }
    std::set<IntervalTree::NodeId> got;
    uint64_t last_start = 0;
    t.ForEachOverlap(lo, hi, [&](IntervalTree::NodeId n) {
      EXPECT_GE(t.start(n), last_start);
      last_start = t.start(n);
      got.insert(n);
      return true;
    });
    ASSERT_EQ(got, want) << "step " << step;
    ASSERT_EQ(t.AnyOverlap(lo, hi), !want.empty());
    // Several sorted disjoint queries at once.
    std::vector<Extent> queries;
    for (uint64_t q = rng() % 40; q < 1100; q += 1 + rng() % 120) {
      uint64_t len = 1 + rng() % 30;
      queries.push_back({q, len});
      q += len;
    }
    std::set<IntervalTree::NodeId> want_multi;
    for (const auto& [id, iv] : model) {
      for (const Extent& q : queries) {
        if (iv.first < q.end() && iv.second > q.offset) want_multi.insert(id);
      }
    }
    std::vector<IntervalTree::NodeId> got_multi;
    t.ForEachOverlapSorted(queries, [&](IntervalTree::NodeId n) {
      got_multi.push_back(n);
      return true;
    });
    ASSERT_EQ(std::set<IntervalTree::NodeId>(got_multi.begin(), got_multi.end()), want_multi);
    ASSERT_EQ(got_multi.size(), want_multi.size()) << "reported twice";
    ASSERT_EQ(t.size(), model.size());
    if (step % 1000 == 0) {
      ASSERT_TRUE(t.CheckInvariants());
    }
  }
  ASSERT_TRUE(t.CheckInvariants());
}

}  // namespace
}  // namespace clf::locking
