#include "scheduler/copy_plan.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "scheduler/scheduler.h"

namespace clf::scheduler {
namespace {

std::vector<CopyPick> InOrderOnSlot0(size_t count) {
  std::vector<CopyPick> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = CopyPick{i, 0};
  return out;
}

Time AvailableAt(const std::vector<Time>& io_available, ServerId s) {
  return s < io_available.size() ? io_available[s] : 0;
}

// One block: the copy whose server is free first (the lowest slot on a tie).
CopyPick EarliestCopy(const DataBlock& b, const Layout& l, uint32_t n,
                      const std::vector<Time>& io_available) {
  CopyPick best{0, 0};
  Time best_at = AvailableAt(io_available, ReplicaServer(b.server, 0, n));
  for (uint32_t slot = 1; slot < l.replicas; ++slot) {
    const Time at = AvailableAt(io_available, ReplicaServer(b.server, slot, n));
    if (at < best_at) best = CopyPick{0, slot}, best_at = at;
  }
  return best;
}

Problem ProblemOf(const std::vector<DataBlock>& blocks, const Layout& l, uint32_t n,
                  uint32_t lanes, const std::vector<Time>& io_available) {
  Problem p;
  p.num_compute_nodes = static_cast<int>(std::max<uint32_t>(1, lanes));
  p.num_io_nodes = static_cast<int>(n);
  if (io_available.size() == n) p.io_available = io_available;
  p.transfers.reserve(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    Transfer t;
    t.compute_node = static_cast<int>(i % static_cast<size_t>(p.num_compute_nodes));
    t.size = static_cast<Time>(std::max<uint64_t>(1, (blocks[i].bytes + kCopyPlanUnit - 1) /
                                                         kCopyPlanUnit));
    for (uint32_t slot = 0; slot < l.replicas; ++slot) {
      t.io_nodes.push_back(static_cast<int>(ReplicaServer(blocks[i].server, slot, n)));
    }
    p.transfers.push_back(std::move(t));
  }
  return p;
}

}  // namespace

Result<std::vector<CopyPick>> PlanCopies(const std::vector<DataBlock>& blocks, const Layout& l,
                                         uint32_t n, ReadSched policy, uint32_t lanes,
                                         const std::vector<Time>& io_available, uint64_t seed) {
  if (l.replicas <= 1 || policy == ReadSched::kPrimary || blocks.empty()) {
    return InOrderOnSlot0(blocks.size());
  }
  if (l.replicas > n) return Invalid("more copies than servers");
  if (blocks.size() == 1 && policy != ReadSched::kRandom) {
    return std::vector<CopyPick>{EarliestCopy(blocks[0], l, n, io_available)};
  }
  const Problem p = ProblemOf(blocks, l, n, lanes, io_available);
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> s, MakeScheduler(ReadSchedName(policy), seed));
  CLF_ASSIGN_OR_RETURN(Schedule plan, s->Plan(p));
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.placements[a].start < plan.placements[b].start;
  });
  std::vector<CopyPick> out;
  out.reserve(blocks.size());
  for (size_t i : order) {
    const std::vector<int>& copies = p.transfers[i].io_nodes;
    const auto at = std::find(copies.begin(), copies.end(), plan.placements[i].io_node);
    if (at == copies.end()) return Status(Code::kInternal, "schedule chose a server without a copy");
    out.push_back(CopyPick{i, static_cast<uint32_t>(at - copies.begin())});
  }
  return out;
}

}  // namespace clf::scheduler
