// Exact minimum-length schedules for small instances, by branch and bound,
// so that every heuristic's distance from the optimum can be measured.
//
// Search space: a schedule is built by appending transfers one at a time, each
// on one of its allowed I/O nodes, at the earliest time both of its nodes are
// free. Every valid schedule can be turned into one of these with no larger
// length, and into one where the appended start times never decrease
// (ties in increasing transfer index), so only those orders are explored.
// Identical transfers (same compute node, size and replica set) are placed
// in index order. Bounds: the LowerBound terms of the remaining work, seeded
// with the best of the batch heuristics as the first incumbent.
//
// Pure function; thread safe.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "scheduler/problem.h"

namespace clf::scheduler {

struct ExactOptions {
  // Give up proving optimality after this many search nodes.
  int64_t max_nodes = 20'000'000;
};

struct ExactResult {
  Schedule schedule;            // the best schedule found
  bool proven_optimal = false;  // false if max_nodes ran out first
  int64_t nodes = 0;            // search nodes visited
};

// At most kMaxExactTransfers transfers; Invalid for larger or invalid problems.
inline constexpr int kMaxExactTransfers = 20;
Result<ExactResult> SolveExact(const Problem& problem, const ExactOptions& options = {});

}  // namespace clf::scheduler
