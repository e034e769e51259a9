#include "tools/bench/locks/raw_speed.h"

#include <time.h>

#include <chrono>
#include <random>

#include "common/status.h"
#include "locking/lock_table.h"

namespace clf::tools::bench {

using locking::ExtentList;
using locking::LockId;
using locking::LockMode;
using locking::LockRequest;
using locking::LockTable;
using locking::Owner;

namespace {

constexpr uint64_t kSlot = 16;  // granted lock i covers [i*16, i*16 + 8); the gaps stay free

// CPU time of this thread: on a shared machine, time spent descheduled is not
// the table's cost.
double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

}  // namespace

std::vector<RawSpeedRow> RunRawSpeed(const std::vector<size_t>& sizes, size_t list_extents,
                                     int single_iterations, int list_iterations) {
  std::vector<RawSpeedRow> rows;
  LockTable table;
  std::mt19937_64 rng(1);
  size_t filled = 0;
  LockId next = 1;
  const Owner probe{1u << 20, 1};
  for (size_t n : sizes) {
    for (; filled < n; ++filled) {
      Owner o{1 + filled % 1024, 1};
      CLF_CHECK(
          table.TryAcquire(next++, o, LockMode::kExclusive, LockRequest::Range(filled * kSlot, 8))
              .ok());
    }
    RawSpeedRow row;
    row.table_locks = n;
    std::vector<LockId> woken;
    // One extent in a random gap.
    double t0 = ThreadCpuNs();
    for (int i = 0; i < single_iterations; ++i) {
      uint64_t j = rng() % n;
      LockId id = next++;
      CLF_CHECK(
          table.TryAcquire(id, probe, LockMode::kExclusive, LockRequest::Range(j * kSlot + 8, 8))
              .ok());
      CLF_CHECK(table.Release(id, &woken).ok());
    }
    row.single_ns = (ThreadCpuNs() - t0) / single_iterations;
    // A list of gaps spread over the whole table.
    uint64_t step = std::max<uint64_t>(1, n / list_extents);
    double list_ns = 0, pattern_ns = 0;
    for (int i = 0; i < list_iterations; ++i) {
      uint64_t j0 = rng() % step;
      std::vector<Extent> ext;
      ext.reserve(list_extents);
      for (size_t t = 0; t < list_extents; ++t) ext.push_back({(j0 + t * step) * kSlot + 8, 8});
      Result<locking::StridedPattern> pattern =
          locking::StridedPattern::Make({{j0 * kSlot + 8, 8, step * kSlot, list_extents}});
      CLF_CHECK(pattern.ok());
      // The client's list arrives as offsets and lengths: building the request
      // (sort check + coalesce) is part of the cost.
      t0 = ThreadCpuNs();
      Result<ExtentList> list = ExtentList::FromExtents(std::move(ext));
      CLF_CHECK(list.ok());
      LockId id = next++;
      CLF_CHECK(
          table.TryAcquire(id, probe, LockMode::kExclusive, LockRequest::List(std::move(*list)))
              .ok());
      CLF_CHECK(table.Release(id, &woken).ok());
      list_ns += (ThreadCpuNs() - t0);
      t0 = ThreadCpuNs();
      id = next++;
      CLF_CHECK(
          table.TryAcquire(id, probe, LockMode::kExclusive, LockRequest::Pattern(*pattern)).ok());
      CLF_CHECK(table.Release(id, &woken).ok());
      pattern_ns += (ThreadCpuNs() - t0);
    }
    row.list_ns_per_extent = list_ns / (static_cast<double>(list_iterations) * list_extents);
    row.pattern_ns_per_extent = pattern_ns / (static_cast<double>(list_iterations) * list_extents);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace clf::tools::bench
