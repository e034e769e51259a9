// The parallel I/O scheduling problem of papers 000 (Isaila et al.) and 001
// (Chen & Wu): compute nodes and I/O nodes joined by transfers. Each transfer
// moves `size` units between one compute node and one of the I/O nodes allowed
// to serve it (one without replication, several with). A node takes part in
// at most one transfer at a time. Nodes become available at given times.
//
// Time model: a transfer's duration equals its size (paper 001 §2.1 writes the
// cost of a transfer as m_ij, the amount of data, because start-up cost is
// negligible). Callers pick the unit (bytes, MB, blocks) and scale to seconds
// with a link speed themselves. All times are integers, so results are exact.
//
// Values only; no shared state. Thread safety: as for any value type.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/status.h"

namespace clf::scheduler {

using Time = int64_t;

struct Transfer {
  int compute_node = 0;
  Time size = 1;  // duration, > 0
  // I/O nodes holding a replica, in preference order (the first is the primary
  // copy). Ties in the heuristics are broken by this order.
  std::vector<int> io_nodes;
};

struct Problem {
  int num_compute_nodes = 0;
  int num_io_nodes = 0;
  std::vector<Transfer> transfers;
  // Earliest time each node may start a transfer. Empty means all zero;
  // otherwise one entry per node.
  std::vector<Time> compute_available;
  std::vector<Time> io_available;

  Time ComputeAvailable(int node) const {
    return compute_available.empty() ? 0 : compute_available[node];
  }
  Time IoAvailable(int node) const { return io_available.empty() ? 0 : io_available[node]; }

  // Node indices in range, sizes > 0, every transfer has at least one distinct
  // allowed I/O node, availability vectors empty or full and non-negative.
  Status Validate() const;
};

// Where and when one transfer runs.
struct Placement {
  int io_node = -1;
  Time start = 0;
};

struct Schedule {
  // placements[t] is for problem.transfers[t].
  std::vector<Placement> placements;
  // Finish time of the last transfer (absolute; 0 for an empty problem).
  Time length = 0;
};

// Times a sequence of (transfer, I/O node) decisions as soon as possible in
// the given order: each transfer starts when both of its nodes have finished
// everything placed before it (no back-filling of earlier holes). This is how
// the round-based heuristics (LDDF, LCDF, LDSDF, SJF, Random) turn their
// iteration order into start times. `order` must name every transfer once.
Schedule TimeInOrder(const Problem& problem, const std::vector<std::pair<int, int>>& order);

}  // namespace clf::scheduler
