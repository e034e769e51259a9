// The exact solver against brute force, the lower bound and every heuristic.
#include "scheduler/exact_solver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "scheduler/checker.h"
#include "scheduler/scheduler.h"
#include "test/support/test_util.h"
#include "test/unit/scheduler/test_problems.h"

namespace clf::scheduler {
namespace {

// Every order of the transfers times every replica choice, appended as soon
// as possible: the search space without any pruning.
Time BruteForce(const Problem& p) {
  const int n = static_cast<int>(p.transfers.size());
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Time best = -1;
  do {
    std::vector<size_t> choice(n, 0);
    while (true) {
      std::vector<std::pair<int, int>> order;
      for (int t : perm) order.emplace_back(t, p.transfers[t].io_nodes[choice[t]]);
      const Time len = TimeInOrder(p, order).length;
      if (best < 0 || len < best) best = len;
      int k = 0;
      while (k < n && ++choice[k] == p.transfers[k].io_nodes.size()) choice[k++] = 0;
      if (k == n) break;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  return n == 0 ? 0 : best;
}

TEST(ExactSolver, MatchesBruteForceOnTinyInstances) {
  Rng rng(5150);
  testing::RandomShape shape;
  shape.max_compute_nodes = 3;
  shape.max_io_nodes = 3;
  shape.max_transfers = 6;
  shape.max_size = 6;
  shape.max_replicas = 2;
  for (int i = 0; i < 150; ++i) {
    const Problem p = testing::RandomProblem(rng, shape);
    Result<ExactResult> r = SolveExact(p);
    ASSERT_OK(r);
    ASSERT_TRUE(r->proven_optimal);
    ASSERT_OK(CheckSchedule(p, r->schedule));
    ASSERT_EQ(r->schedule.length, BruteForce(p)) << "instance " << i;
  }
}

TEST(ExactSolver, HeuristicsNeverBeatTheOptimum) {
  Rng rng(8086);
  testing::RandomShape shape;
  shape.max_compute_nodes = 4;
  shape.max_io_nodes = 3;
  shape.max_transfers = 11;
  shape.max_size = 9;
  shape.max_replicas = 2;
  int strictly_better = 0;
  for (int i = 0; i < 300; ++i) {
    const Problem p = testing::RandomProblem(rng, shape);
    Result<ExactResult> r = SolveExact(p);
    ASSERT_OK(r);
    ASSERT_TRUE(r->proven_optimal) << "instance " << i;
    ASSERT_OK(CheckSchedule(p, r->schedule));
    ASSERT_GE(r->schedule.length, LowerBound(p));
    Time best_heuristic = -1;
    for (const std::string& name : SchedulerNames()) {
      if (name == "exact") continue;
      auto s = MakeScheduler(name, 1);
      ASSERT_OK(s);
      Result<Schedule> h = (*s)->Plan(p);
      ASSERT_OK(h);
      ASSERT_GE(h->length, r->schedule.length) << name << " instance " << i;
      if (best_heuristic < 0 || h->length < best_heuristic) best_heuristic = h->length;
    }
    if (!p.transfers.empty() && r->schedule.length < best_heuristic) ++strictly_better;
  }
  // The search finds better schedules than every heuristic on some instances,
  // so it does more than return its seed.
  EXPECT_GT(strictly_better, 0);
}

TEST(ExactSolver, RejectsLargeProblems) {
  Problem p;
  p.num_compute_nodes = 1;
  p.num_io_nodes = 1;
  for (int t = 0; t <= kMaxExactTransfers; ++t) p.transfers.push_back({0, 1, {0}});
  EXPECT_STATUS(Code::kInvalid, SolveExact(p));
}

TEST(ExactSolver, ReportsBudgetExhaustion) {
  Rng rng(1);
  testing::RandomShape shape;
  shape.max_compute_nodes = 6;
  shape.max_io_nodes = 4;
  shape.max_transfers = 16;
  Problem p;
  do {
    p = testing::RandomProblem(rng, shape);
  } while (p.transfers.size() < 14);
  ExactOptions tiny;
  tiny.max_nodes = 5;
  Result<ExactResult> r = SolveExact(p, tiny);
  ASSERT_OK(r);
  EXPECT_FALSE(r->proven_optimal);
  EXPECT_OK(CheckSchedule(p, r->schedule));  // still the best heuristic schedule
}

}  // namespace
}  // namespace clf::scheduler
