// Random problem generators for the scheduler tests (fixed seeds).
#pragma once

#include <algorithm>
#include <vector>

#include "scheduler/problem.h"
#include "scheduler/rng.h"

namespace clf::scheduler::testing {

struct RandomShape {
  int max_compute_nodes = 6;
  int max_io_nodes = 5;
  int max_transfers = 30;
  int max_size = 20;
  int max_replicas = 3;
  bool availability = true;  // sometimes give random availability times
};

inline Problem RandomProblem(Rng& rng, const RandomShape& shape) {
  Problem p;
  p.num_compute_nodes = static_cast<int>(rng.Range(1, shape.max_compute_nodes));
  p.num_io_nodes = static_cast<int>(rng.Range(1, shape.max_io_nodes));
  const int n = static_cast<int>(rng.Range(0, shape.max_transfers));
  for (int t = 0; t < n; ++t) {
    Transfer tr;
    tr.compute_node = static_cast<int>(rng.Uniform(p.num_compute_nodes));
    tr.size = rng.Range(1, shape.max_size);
    const int replicas =
        static_cast<int>(rng.Range(1, std::min(shape.max_replicas, p.num_io_nodes)));
    std::vector<int> ios(p.num_io_nodes);
    for (int j = 0; j < p.num_io_nodes; ++j) ios[j] = j;
    for (int k = 0; k < replicas; ++k) {  // partial Fisher-Yates
      const int pick = k + static_cast<int>(rng.Uniform(p.num_io_nodes - k));
      std::swap(ios[k], ios[pick]);
      tr.io_nodes.push_back(ios[k]);
    }
    p.transfers.push_back(std::move(tr));
  }
  if (shape.availability && rng.Chance(1, 3)) {
    for (int c = 0; c < p.num_compute_nodes; ++c) p.compute_available.push_back(rng.Range(0, 30));
    for (int j = 0; j < p.num_io_nodes; ++j) p.io_available.push_back(rng.Range(0, 30));
  }
  return p;
}

}  // namespace clf::scheduler::testing
