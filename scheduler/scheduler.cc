#include "scheduler/scheduler.h"

#include <memory>
#include <utility>

#include "scheduler/batch_heuristics.h"
#include "scheduler/decentralized_run.h"
#include "scheduler/exact_solver.h"
#include "scheduler/order_policy.h"

namespace clf::scheduler {
namespace {

class BatchScheduler final : public Scheduler {
 public:
  using PlanFn = Schedule (*)(const Problem&, uint64_t);
  BatchScheduler(std::string name, PlanFn fn, uint64_t seed)
      : name_(std::move(name)), fn_(fn), seed_(seed) {}
  std::string_view name() const override { return name_; }
  Result<Schedule> Plan(const Problem& problem) override {
    CLF_RETURN_IF_ERROR(problem.Validate());
    return fn_(problem, seed_);
  }

 private:
  std::string name_;
  PlanFn fn_;
  uint64_t seed_;
};

class ExactScheduler final : public Scheduler {
 public:
  std::string_view name() const override { return "exact"; }
  Result<Schedule> Plan(const Problem& problem) override {
    CLF_ASSIGN_OR_RETURN(ExactResult r, SolveExact(problem));
    return std::move(r.schedule);
  }
};

// Paper 000: senders order their own transfers with an OrderPolicy and the
// orders run decentralized. Writes: compute nodes send to I/O nodes. Reads:
// I/O nodes send to compute nodes.
class DecentralizedScheduler final : public Scheduler {
 public:
  DecentralizedScheduler(std::string name, OrderPolicy policy, bool read, uint64_t seed)
      : name_(std::move(name)), policy_(policy), read_(read), seed_(seed) {}
  std::string_view name() const override { return name_; }

  Result<Schedule> Plan(const Problem& p) override {
    CLF_RETURN_IF_ERROR(p.Validate());
    const int senders = read_ ? p.num_io_nodes : p.num_compute_nodes;
    const int receivers = read_ ? p.num_compute_nodes : p.num_io_nodes;
    // Each sender's transfers, in Problem order (= file offset order).
    std::vector<std::vector<int>> mine(senders);
    for (size_t t = 0; t < p.transfers.size(); ++t) {
      const Transfer& tr = p.transfers[t];
      mine[read_ ? tr.io_nodes[0] : tr.compute_node].push_back(static_cast<int>(t));
    }
    std::vector<std::vector<OutgoingBlock>> sequences(senders);
    std::vector<std::vector<int>> sent(senders);  // transfer index per sequence slot
    for (int s = 0; s < senders; ++s) {
      std::vector<ScheduleBlock> blocks;
      blocks.reserve(mine[s].size());
      for (int t : mine[s]) {
        const Transfer& tr = p.transfers[t];
        blocks.push_back({read_ ? tr.compute_node : tr.io_nodes[0], t, 0, tr.size});
      }
      // One seed per sender: each decides alone.
      const uint64_t seed = seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(s) + 1;
      for (int k : OrderBlocks(policy_, s, receivers, blocks, seed)) {
        sequences[s].push_back({blocks[k].peer, blocks[k].bytes});
        sent[s].push_back(mine[s][k]);
      }
    }
    const DecentralizedRun run =
        RunDecentralized(receivers, sequences, read_ ? p.io_available : p.compute_available,
                         read_ ? p.compute_available : p.io_available);
    Schedule schedule;
    schedule.placements.resize(p.transfers.size());
    for (int s = 0; s < senders; ++s) {
      for (size_t k = 0; k < sent[s].size(); ++k) {
        const int t = sent[s][k];
        schedule.placements[t] = Placement{p.transfers[t].io_nodes[0], run.start[s][k]};
      }
    }
    schedule.length = run.length;
    return schedule;
  }

 private:
  std::string name_;
  OrderPolicy policy_;
  bool read_;
  uint64_t seed_;
};

Schedule Lddf(const Problem& p, uint64_t) { return PlanLddf(p); }
Schedule Lcdf(const Problem& p, uint64_t) { return PlanLcdf(p); }
Schedule Ldsdf(const Problem& p, uint64_t) { return PlanLdsdf(p); }
Schedule Sjf(const Problem& p, uint64_t) { return PlanSjf(p); }
Schedule Eatf(const Problem& p, uint64_t) { return PlanEatf(p); }
Schedule Random(const Problem& p, uint64_t seed) { return PlanRandom(p, seed); }

}  // namespace

const std::vector<std::string>& BatchSchedulerNames() {
  static const std::vector<std::string> names = {"lddf", "lcdf", "ldsdf", "sjf", "eatf", "random"};
  return names;
}

const std::vector<std::string>& SchedulerNames() {
  static const std::vector<std::string> names = {
      "lddf",     "lcdf",           "ldsdf",           "sjf",
      "eatf",     "random",         "first-ios",       "random-ios",
      "hash-ios", "first-ios-read", "random-ios-read", "hash-ios-read",
      "exact"};
  return names;
}

Result<std::unique_ptr<Scheduler>> MakeScheduler(std::string_view name, uint64_t seed) {
  struct Entry {
    std::string_view name;
    BatchScheduler::PlanFn fn;
  };
  static constexpr Entry kBatch[] = {{"lddf", Lddf}, {"lcdf", Lcdf}, {"ldsdf", Ldsdf},
                                     {"sjf", Sjf},   {"eatf", Eatf}, {"random", Random}};
  for (const Entry& e : kBatch) {
    if (name == e.name) {
      std::unique_ptr<Scheduler> s =
          std::make_unique<BatchScheduler>(std::string(name), e.fn, seed);
      return s;
    }
  }
  if (name == "exact") {
    std::unique_ptr<Scheduler> s = std::make_unique<ExactScheduler>();
    return s;
  }
  std::string_view policy_name = name;
  bool read = false;
  constexpr std::string_view kReadSuffix = "-read";
  if (policy_name.size() > kReadSuffix.size() && policy_name.ends_with(kReadSuffix)) {
    policy_name.remove_suffix(kReadSuffix.size());
    read = true;
  }
  Result<OrderPolicy> policy = ParseOrderPolicy(policy_name);
  if (!policy.ok()) {
    return Invalid("unknown scheduler '" + std::string(name) +
                   "' (want lddf, lcdf, ldsdf, sjf, eatf, random, first-ios, random-ios, "
                   "hash-ios, the same three with -read, or exact)");
  }
  std::unique_ptr<Scheduler> s =
      std::make_unique<DecentralizedScheduler>(std::string(name), *policy, read, seed);
  return s;
}

}  // namespace clf::scheduler
