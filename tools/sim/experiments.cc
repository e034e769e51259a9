#include "tools/sim/experiments.h"

#include <algorithm>
#include <map>
#include <memory>

#include "scheduler/checker.h"
#include "scheduler/exact_solver.h"
#include "scheduler/rng.h"
#include "scheduler/scheduler.h"
#include "scheduler/workload.h"

namespace clf::tools::sim {

using scheduler::Problem;
using scheduler::Rng;
using scheduler::Schedule;
using scheduler::Scheduler;
using scheduler::Time;

namespace {

// A seed per (experiment point, run), independent of the order of the loops.
uint64_t Mix(uint64_t seed, uint64_t point, uint64_t run) {
  Rng rng(seed * 0x9e3779b97f4a7c15ULL ^ (point << 20) ^ run);
  return rng.Next();
}

Result<std::vector<std::unique_ptr<Scheduler>>> Make(const std::vector<std::string>& names,
                                                     uint64_t seed) {
  std::vector<std::unique_ptr<Scheduler>> all;
  for (const std::string& name : names) {
    CLF_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> s, scheduler::MakeScheduler(name, seed));
    all.push_back(std::move(s));
  }
  return all;
}

// Plans and checks: a simulator that reports an invalid schedule is useless.
Result<Time> PlanChecked(Scheduler& s, const Problem& p) {
  CLF_ASSIGN_OR_RETURN(Schedule schedule, s.Plan(p));
  CLF_RETURN_IF_ERROR(scheduler::CheckSchedule(p, schedule).WithContext(std::string(s.name())));
  return schedule.length;
}

}  // namespace

Result<std::vector<Paper001Row>> RunPaper001(const Paper001Options& o) {
  if (o.runs <= 0) return Invalid("--runs must be > 0");
  const std::vector<std::string>& names = scheduler::BatchSchedulerNames();
  std::vector<Paper001Row> rows;
  uint64_t point = 0;
  for (scheduler::RequestPattern pattern :
       {scheduler::RequestPattern::kRandom, scheduler::RequestPattern::kAllToAll}) {
    for (scheduler::SizeClass sizes :
         {scheduler::SizeClass::kUniform, scheduler::SizeClass::kVariable}) {
      for (int ratio : o.ratios) {
        for (int m : o.io_nodes) {
          ++point;
          std::vector<double> total(names.size(), 0);
          for (int run = 0; run < o.runs; ++run) {
            const uint64_t seed = Mix(o.seed, point, run);
            Rng rng(seed);
            const Problem p =
                scheduler::MakePaper001Problem({ratio * m, m, pattern, sizes, 2}, rng);
            CLF_ASSIGN_OR_RETURN(auto schedulers, Make(names, seed));
            for (size_t h = 0; h < names.size(); ++h) {
              CLF_ASSIGN_OR_RETURN(Time len, PlanChecked(*schedulers[h], p));
              total[h] += static_cast<double>(len);
            }
          }
          const size_t eatf = std::find(names.begin(), names.end(), "eatf") - names.begin();
          for (size_t h = 0; h < names.size(); ++h) {
            rows.push_back({std::string(scheduler::RequestPatternName(pattern)),
                            std::string(scheduler::SizeClassName(sizes)), ratio, m, names[h],
                            h == eatf ? 1.0 : total[h] / total[eatf]});
          }
        }
      }
    }
  }
  return rows;
}

Result<std::vector<Paper000Row>> RunPaper000(const Paper000Options& o) {
  if (o.runs <= 0) return Invalid("--runs must be > 0");
  if (o.link_mb_s <= 0) return Invalid("--link-mb-s must be > 0");
  if (o.latency_us < 0) return Invalid("--latency-us must be >= 0");
  // Time unit: one byte at link speed. 1 MB/s moves one byte per microsecond.
  const double bytes_per_s = o.link_mb_s * 1e6;
  const Time latency_bytes = static_cast<Time>(o.latency_us * o.link_mb_s + 0.5);
  const double payload = static_cast<double>(o.bytes_per_client) * o.clients;
  std::vector<Paper000Row> rows;
  for (bool read : {false, true}) {
    for (const char* policy : {"first-ios", "random-ios", "hash-ios"}) {
      const std::string name = std::string(policy) + (read ? "-read" : "");
      for (int64_t b : o.block_bytes) {
        scheduler::StripedAccessConfig c{o.clients, o.servers, o.bytes_per_client, o.stripe_unit,
                                         b};
        CLF_ASSIGN_OR_RETURN(Problem p, scheduler::MakeStripedAccessProblem(c));
        for (scheduler::Transfer& t : p.transfers) t.size += latency_bytes;
        const int runs = std::string(policy) == "random-ios" ? o.runs : 1;
        double total = 0;
        for (int run = 0; run < runs; ++run) {
          CLF_ASSIGN_OR_RETURN(
              auto s, scheduler::MakeScheduler(name, Mix(o.seed, static_cast<uint64_t>(b), run)));
          CLF_ASSIGN_OR_RETURN(Time len, PlanChecked(*s, p));
          total += static_cast<double>(len);
        }
        const double seconds = total / runs / bytes_per_s;
        rows.push_back({name, b, seconds, payload / seconds / 1e6});
      }
    }
  }
  return rows;
}

Result<std::vector<OptimumRow>> RunOptimum(const OptimumOptions& o) {
  if (o.runs <= 0) return Invalid("--runs must be > 0");
  struct Family {
    std::string label;
    scheduler::Paper001Config config;
  };
  using scheduler::RequestPattern;
  using scheduler::SizeClass;
  const std::vector<Family> families = {
      {"all-to-all 3x3 uniform", {3, 3, RequestPattern::kAllToAll, SizeClass::kUniform, 2}},
      {"all-to-all 3x3 variable", {3, 3, RequestPattern::kAllToAll, SizeClass::kVariable, 2}},
      {"random 6x3 uniform", {6, 3, RequestPattern::kRandom, SizeClass::kUniform, 2}},
      {"random 6x3 variable", {6, 3, RequestPattern::kRandom, SizeClass::kVariable, 2}},
  };
  const std::vector<std::string>& names = scheduler::BatchSchedulerNames();
  std::vector<OptimumRow> rows;
  uint64_t point = 1000;
  for (const Family& f : families) {
    ++point;
    std::vector<double> sum(names.size(), 0), worst(names.size(), 1.0);
    std::vector<int> optimal(names.size(), 0);
    int done = 0;
    for (int run = 0; done < o.runs; ++run) {
      const uint64_t seed = Mix(o.seed, point, run);
      Rng rng(seed);
      const Problem p = scheduler::MakePaper001Problem(f.config, rng);
      if (p.transfers.size() > 12) continue;  // keep the exact search small
      CLF_ASSIGN_OR_RETURN(scheduler::ExactResult best, scheduler::SolveExact(p));
      if (!best.proven_optimal) return Internal("exact search ran out of budget");
      CLF_ASSIGN_OR_RETURN(auto schedulers, Make(names, seed));
      for (size_t h = 0; h < names.size(); ++h) {
        CLF_ASSIGN_OR_RETURN(Time len, PlanChecked(*schedulers[h], p));
        const double r = static_cast<double>(len) / static_cast<double>(best.schedule.length);
        sum[h] += r;
        worst[h] = std::max(worst[h], r);
        optimal[h] += len == best.schedule.length ? 1 : 0;
      }
      ++done;
    }
    for (size_t h = 0; h < names.size(); ++h) {
      rows.push_back({f.label, names[h], o.runs, sum[h] / o.runs, worst[h],
                      static_cast<double>(optimal[h]) / o.runs});
    }
  }
  return rows;
}

}  // namespace clf::tools::sim
