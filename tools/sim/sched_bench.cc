// clf-sched-bench: how long planning takes, per heuristic and problem size.
// Problems: random requests from 4 compute nodes per I/O node (at most 256),
// 2 replicas (primary and the next I/O node), sizes uniform in 1..1024.
// Target (issue 3): 10,000 transfers over 64 I/O nodes with EATF or LCDF in
// under 10 ms.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "scheduler/problem.h"
#include "scheduler/rng.h"
#include "scheduler/scheduler.h"

namespace clf::scheduler {
namespace {

Problem MakeProblem(int transfers, int io_nodes) {
  Rng rng(12345);
  Problem p;
  p.num_io_nodes = io_nodes;
  p.num_compute_nodes = std::min(4 * io_nodes, 256);
  for (int t = 0; t < transfers; ++t) {
    const int primary = static_cast<int>(rng.Uniform(io_nodes));
    p.transfers.push_back({static_cast<int>(rng.Uniform(p.num_compute_nodes)),
                           rng.Range(1, 1024),
                           {primary, (primary + 1) % io_nodes}});
  }
  return p;
}

void BM_Plan(benchmark::State& state, const std::string& name) {
  const int transfers = static_cast<int>(state.range(0));
  const int io_nodes = static_cast<int>(state.range(1));
  const Problem p = MakeProblem(transfers, io_nodes);
  auto s = MakeScheduler(name, 1);
  if (!s.ok()) {
    state.SkipWithError(s.status().ToString().c_str());
    return;
  }
  Time length = 0;
  for (auto _ : state) {
    Result<Schedule> schedule = (*s)->Plan(p);
    if (!schedule.ok()) {
      state.SkipWithError(schedule.status().ToString().c_str());
      return;
    }
    length = schedule->length;
    benchmark::DoNotOptimize(length);
  }
  state.counters["length"] = static_cast<double>(length);
  state.SetItemsProcessed(state.iterations() * transfers);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int n : {1'000, 10'000, 100'000}) b->Args({n, 64});
  b->Args({10'000, 16});
  b->Args({10'000, 256});
  b->Unit(benchmark::kMillisecond);
}

#define CLF_SCHED_BENCH(name, label) \
  BENCHMARK_CAPTURE(BM_Plan, label, std::string(name))->Apply(Sizes)

CLF_SCHED_BENCH("eatf", eatf);
CLF_SCHED_BENCH("lcdf", lcdf);
CLF_SCHED_BENCH("lddf", lddf);
CLF_SCHED_BENCH("ldsdf", ldsdf);
CLF_SCHED_BENCH("sjf", sjf);
CLF_SCHED_BENCH("random", random);
CLF_SCHED_BENCH("first-ios", first_ios);
CLF_SCHED_BENCH("hash-ios", hash_ios);
CLF_SCHED_BENCH("random-ios", random_ios);

}  // namespace
}  // namespace clf::scheduler

BENCHMARK_MAIN();
