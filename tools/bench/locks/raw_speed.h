// Raw speed of the lock table: acquire + release of a 1-extent lock and of a
// 10,000-extent list lock (explicit list and strided pattern) while the table
// already holds n granted locks, for growing n. Single thread, LockTable
// directly (no manager mutex). Times are the calling thread's CPU time, so a
// loaded machine does not count descheduled time. Not thread safe; starts no
// threads.
#pragma once

#include <cstddef>
#include <vector>

namespace clf::tools::bench {

struct RawSpeedRow {
  size_t table_locks = 0;
  double single_ns = 0;              // per acquire + release of one extent
  double list_ns_per_extent = 0;     // explicit 10,000-extent list
  double pattern_ns_per_extent = 0;  // the same list as a strided pattern
};

std::vector<RawSpeedRow> RunRawSpeed(const std::vector<size_t>& sizes, size_t list_extents,
                                     int single_iterations, int list_iterations);

}  // namespace clf::tools::bench
