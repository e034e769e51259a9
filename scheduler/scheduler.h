// One interface over every scheduling policy of the library, so the data
// path, the simulator and the benchmarks pick a policy by name.
//
// Names:
//   "lddf", "lcdf", "ldsdf"            paper 001, uniform-length heuristics
//   "sjf", "eatf", "random"            paper 001, variable-length heuristics
//   "first-ios", "random-ios", "hash-ios"
//                                      paper 000, decentralized, writes: each
//                                      compute node orders its own transfers
//   "first-ios-read", "random-ios-read", "hash-ios-read"
//                                      paper 000, decentralized, reads: each
//                                      I/O node orders the transfers it serves
//   "exact"                            branch and bound (small problems only)
//
// For the paper 000 policies a Problem is read as the paper's setting: the
// order of a node's transfers in `Problem::transfers` is their file-offset
// order, a transfer goes to its primary replica (io_nodes[0]; paper 000 has no
// replication), and the orders are executed with RunDecentralized.
//
// A Scheduler is not thread safe; use one per thread. Plan() is deterministic:
// a randomized policy restarts from its seed on every call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/problem.h"

namespace clf::scheduler {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::string_view name() const = 0;
  // A valid schedule of `problem`, or Invalid if the problem is malformed (or,
  // for "exact", too large).
  virtual Result<Schedule> Plan(const Problem& problem) = 0;
};

// Invalid for an unknown name. `seed` feeds the randomized policies.
Result<std::unique_ptr<Scheduler>> MakeScheduler(std::string_view name, uint64_t seed = 1);

// Every name MakeScheduler accepts, in the order listed above.
const std::vector<std::string>& SchedulerNames();

// The paper 001 batch heuristics only (no decentralized policies, no exact).
const std::vector<std::string>& BatchSchedulerNames();

}  // namespace clf::scheduler
