#include "scheduler/checker.h"

#include <algorithm>
#include <string>
#include <utility>

namespace clf::scheduler {
namespace {

// (start, end, transfer) per node; checks that they do not overlap.
Status CheckNoOverlap(std::vector<std::vector<std::pair<Time, int>>>& per_node,
                      const Problem& problem, const char* kind) {
  for (size_t n = 0; n < per_node.size(); ++n) {
    auto& v = per_node[n];
    std::sort(v.begin(), v.end());
    for (size_t k = 1; k < v.size(); ++k) {
      const int prev = v[k - 1].second;
      const Time prev_end = v[k - 1].first + problem.transfers[prev].size;
      if (v[k].first < prev_end) {
        return Invalid(std::string(kind) + " node " + std::to_string(n) + " runs transfers " +
                       std::to_string(prev) + " and " + std::to_string(v[k].second) +
                       " at the same time");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckSchedule(const Problem& problem, const Schedule& schedule) {
  if (schedule.placements.size() != problem.transfers.size()) {
    return Invalid("schedule has " + std::to_string(schedule.placements.size()) +
                   " placements for " + std::to_string(problem.transfers.size()) + " transfers");
  }
  std::vector<std::vector<std::pair<Time, int>>> by_cn(problem.num_compute_nodes);
  std::vector<std::vector<std::pair<Time, int>>> by_io(problem.num_io_nodes);
  Time length = 0;
  for (size_t t = 0; t < problem.transfers.size(); ++t) {
    const Transfer& tr = problem.transfers[t];
    const Placement& p = schedule.placements[t];
    const std::string which = "transfer " + std::to_string(t) + ": ";
    if (std::find(tr.io_nodes.begin(), tr.io_nodes.end(), p.io_node) == tr.io_nodes.end()) {
      return Invalid(which + "served by I/O node " + std::to_string(p.io_node) +
                     ", which holds no replica");
    }
    if (p.start < problem.ComputeAvailable(tr.compute_node)) {
      return Invalid(which + "starts before its compute node is available");
    }
    if (p.start < problem.IoAvailable(p.io_node)) {
      return Invalid(which + "starts before its I/O node is available");
    }
    by_cn[tr.compute_node].emplace_back(p.start, static_cast<int>(t));
    by_io[p.io_node].emplace_back(p.start, static_cast<int>(t));
    length = std::max(length, p.start + tr.size);
  }
  CLF_RETURN_IF_ERROR(CheckNoOverlap(by_cn, problem, "compute"));
  CLF_RETURN_IF_ERROR(CheckNoOverlap(by_io, problem, "I/O"));
  if (length != schedule.length) {
    return Invalid("schedule says length " + std::to_string(schedule.length) +
                   " but the last transfer ends at " + std::to_string(length));
  }
  return Status::Ok();
}

Time LowerBound(const Problem& problem) {
  Time bound = 0;
  std::vector<Time> cn_load(problem.num_compute_nodes);
  std::vector<Time> io_forced(problem.num_io_nodes);
  std::vector<bool> io_used(problem.num_io_nodes, false);
  Time total = 0;
  for (const Transfer& tr : problem.transfers) {
    Time earliest_io = problem.IoAvailable(tr.io_nodes[0]);
    for (int io : tr.io_nodes) {
      earliest_io = std::min(earliest_io, problem.IoAvailable(io));
      io_used[io] = true;
    }
    bound =
        std::max(bound, std::max(problem.ComputeAvailable(tr.compute_node), earliest_io) + tr.size);
    cn_load[tr.compute_node] += tr.size;
    if (tr.io_nodes.size() == 1) io_forced[tr.io_nodes[0]] += tr.size;
    total += tr.size;
  }
  for (int c = 0; c < problem.num_compute_nodes; ++c) {
    if (cn_load[c] > 0) bound = std::max(bound, problem.ComputeAvailable(c) + cn_load[c]);
  }
  std::vector<Time> avail;
  for (int j = 0; j < problem.num_io_nodes; ++j) {
    if (io_forced[j] > 0) bound = std::max(bound, problem.IoAvailable(j) + io_forced[j]);
    if (io_used[j]) avail.push_back(problem.IoAvailable(j));
  }
  if (total > 0) {
    // Smallest T with sum_j max(0, T - avail_j) >= total.
    std::sort(avail.begin(), avail.end());
    Time prefix = 0;
    for (size_t k = 1; k <= avail.size(); ++k) {
      prefix += avail[k - 1];
      const Time n = static_cast<Time>(k);
      const Time level = (total + prefix + n - 1) / n;
      if (k == avail.size() || level <= avail[k]) {
        bound = std::max(bound, level);
        break;
      }
    }
  }
  return bound;
}

}  // namespace clf::scheduler
