// Every policy's output on thousands of random instances (fixed seeds) is a
// valid schedule no shorter than the lower bound; same seed, same schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/checker.h"
#include "scheduler/scheduler.h"
#include "scheduler/workload.h"
#include "test/support/test_util.h"
#include "test/unit/scheduler/test_problems.h"

namespace clf::scheduler {
namespace {

std::vector<std::unique_ptr<Scheduler>> AllButExact(uint64_t seed) {
  std::vector<std::unique_ptr<Scheduler>> all;
  for (const std::string& name : SchedulerNames()) {
    if (name == "exact") continue;
    Result<std::unique_ptr<Scheduler>> s = MakeScheduler(name, seed);
    EXPECT_TRUE(s.ok()) << name;
    all.push_back(std::move(*s));
  }
  return all;
}

bool SameSchedule(const Schedule& a, const Schedule& b) {
  if (a.length != b.length || a.placements.size() != b.placements.size()) return false;
  for (size_t t = 0; t < a.placements.size(); ++t) {
    if (a.placements[t].io_node != b.placements[t].io_node ||
        a.placements[t].start != b.placements[t].start) {
      return false;
    }
  }
  return true;
}

TEST(Property, RandomInstancesAreValidAndAboveLowerBound) {
  Rng rng(20240601);
  auto schedulers = AllButExact(3);
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const Problem p = testing::RandomProblem(rng, {});
    ASSERT_OK(p.Validate());
    const Time lb = LowerBound(p);
    for (auto& s : schedulers) {
      Result<Schedule> schedule = s->Plan(p);
      ASSERT_OK(schedule);
      const Status valid = CheckSchedule(p, *schedule);
      ASSERT_TRUE(valid.ok()) << s->name() << " instance " << i << ": " << valid.ToString();
      ASSERT_GE(schedule->length, lb) << s->name() << " instance " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3000 * 12);
}

TEST(Property, Paper001WorkloadsAreValidAndAboveLowerBound) {
  Rng rng(77);
  auto schedulers = AllButExact(5);
  for (RequestPattern pattern : {RequestPattern::kRandom, RequestPattern::kAllToAll}) {
    for (SizeClass sizes : {SizeClass::kUniform, SizeClass::kVariable}) {
      for (int m : {4, 12, 20}) {
        for (int ratio : {1, 2, 4}) {
          Paper001Config c{ratio * m, m, pattern, sizes, 2};
          for (int run = 0; run < 3; ++run) {
            const Problem p = MakePaper001Problem(c, rng);
            const Time lb = LowerBound(p);
            for (auto& s : schedulers) {
              Result<Schedule> schedule = s->Plan(p);
              ASSERT_OK(schedule);
              const Status valid = CheckSchedule(p, *schedule);
              ASSERT_TRUE(valid.ok()) << s->name() << ": " << valid.ToString();
              ASSERT_GE(schedule->length, lb) << s->name();
            }
          }
        }
      }
    }
  }
}

TEST(Property, DegreeHeuristicsRoundsAreMaximal) {
  // Unit sizes, no availability times. In every round of LDDF, LCDF and
  // LDSDF a pending transfer t is passed over only if its compute node c is
  // already used in the round (at most n_c - 1 rounds: each uses another of
  // c's transfers) or every I/O node that could serve it is (at most
  // deg_j - 1 rounds for any one of them). So t is placed by round
  // n_c + min_j deg_j - 1, and with unit sizes a round-k transfer ends by k.
  Rng rng(99);
  testing::RandomShape shape;
  shape.max_size = 1;
  shape.availability = false;
  for (int i = 0; i < 500; ++i) {
    const Problem p = testing::RandomProblem(rng, shape);
    std::vector<Time> per_cn(p.num_compute_nodes, 0);
    std::vector<Time> per_io(p.num_io_nodes, 0);
    for (const Transfer& t : p.transfers) {
      ++per_cn[t.compute_node];
      for (int io : t.io_nodes) ++per_io[io];
    }
    Time bound = 0;
    for (const Transfer& t : p.transfers) {
      Time io_min = per_io[t.io_nodes[0]];
      for (int io : t.io_nodes) io_min = std::min(io_min, per_io[io]);
      bound = std::max(bound, per_cn[t.compute_node] + io_min - 1);
    }
    for (const char* name : {"lddf", "lcdf", "ldsdf"}) {
      auto s = MakeScheduler(name);
      ASSERT_OK(s);
      Result<Schedule> schedule = (*s)->Plan(p);
      ASSERT_OK(schedule);
      ASSERT_LE(schedule->length, bound) << name << " instance " << i;
    }
  }
}

TEST(Determinism, SameSeedSameSchedule) {
  Rng rng(4242);
  int differs = 0;
  for (int i = 0; i < 200; ++i) {
    const Problem p = testing::RandomProblem(rng, {});
    for (const std::string& name : SchedulerNames()) {
      if (name == "exact") continue;
      auto a = MakeScheduler(name, 11);
      auto b = MakeScheduler(name, 11);
      ASSERT_OK(a);
      ASSERT_OK(b);
      Result<Schedule> sa = (*a)->Plan(p);
      Result<Schedule> sb = (*b)->Plan(p);
      Result<Schedule> sa2 = (*a)->Plan(p);  // re-planning restarts from the seed
      ASSERT_OK(sa);
      ASSERT_OK(sb);
      ASSERT_OK(sa2);
      EXPECT_TRUE(SameSchedule(*sa, *sb)) << name;
      EXPECT_TRUE(SameSchedule(*sa, *sa2)) << name;
      if (name == "random") {
        auto c = MakeScheduler(name, 12);
        ASSERT_OK(c);
        Result<Schedule> sc = (*c)->Plan(p);
        ASSERT_OK(sc);
        differs += SameSchedule(*sa, *sc) ? 0 : 1;
      }
    }
  }
  EXPECT_GT(differs, 50);  // the seed does matter
}

TEST(MakeScheduler, KnowsEveryNameAndRejectsOthers) {
  for (const std::string& name : SchedulerNames()) {
    auto s = MakeScheduler(name);
    ASSERT_OK(s);
    EXPECT_EQ((*s)->name(), name);
  }
  EXPECT_STATUS(Code::kInvalid, MakeScheduler("fastest"));
  EXPECT_STATUS(Code::kInvalid, MakeScheduler("-read"));
  auto s = MakeScheduler("eatf");
  ASSERT_OK(s);
  Problem bad;
  bad.num_compute_nodes = 1;
  bad.num_io_nodes = 1;
  bad.transfers = {{0, 1, {3}}};
  EXPECT_STATUS(Code::kInvalid, (*s)->Plan(bad));
}

}  // namespace
}  // namespace clf::scheduler
