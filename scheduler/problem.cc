#include "scheduler/problem.h"

#include <algorithm>
#include <string>

namespace clf::scheduler {

Status Problem::Validate() const {
  if (num_compute_nodes < 0 || num_io_nodes < 0) return Invalid("negative node count");
  if (!compute_available.empty() &&
      compute_available.size() != static_cast<size_t>(num_compute_nodes)) {
    return Invalid("compute_available must be empty or have one entry per compute node");
  }
  if (!io_available.empty() && io_available.size() != static_cast<size_t>(num_io_nodes)) {
    return Invalid("io_available must be empty or have one entry per I/O node");
  }
  for (Time t : compute_available) {
    if (t < 0) return Invalid("negative compute node availability");
  }
  for (Time t : io_available) {
    if (t < 0) return Invalid("negative I/O node availability");
  }
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& tr = transfers[i];
    const std::string which = "transfer " + std::to_string(i) + ": ";
    if (tr.compute_node < 0 || tr.compute_node >= num_compute_nodes) {
      return Invalid(which + "compute node out of range");
    }
    if (tr.size <= 0) return Invalid(which + "size must be > 0");
    if (tr.io_nodes.empty()) return Invalid(which + "no I/O node can serve it");
    for (size_t k = 0; k < tr.io_nodes.size(); ++k) {
      const int io = tr.io_nodes[k];
      if (io < 0 || io >= num_io_nodes) return Invalid(which + "I/O node out of range");
      if (std::find(tr.io_nodes.begin(), tr.io_nodes.begin() + k, io) != tr.io_nodes.begin() + k) {
        return Invalid(which + "I/O node listed twice");
      }
    }
  }
  return Status::Ok();
}

Schedule TimeInOrder(const Problem& problem, const std::vector<std::pair<int, int>>& order) {
  std::vector<Time> cn_free(problem.num_compute_nodes);
  std::vector<Time> io_free(problem.num_io_nodes);
  for (int c = 0; c < problem.num_compute_nodes; ++c) cn_free[c] = problem.ComputeAvailable(c);
  for (int j = 0; j < problem.num_io_nodes; ++j) io_free[j] = problem.IoAvailable(j);
  Schedule s;
  s.placements.resize(problem.transfers.size());
  for (const auto& [t, io] : order) {
    const Transfer& tr = problem.transfers[t];
    const Time start = std::max(cn_free[tr.compute_node], io_free[io]);
    const Time end = start + tr.size;
    cn_free[tr.compute_node] = end;
    io_free[io] = end;
    s.placements[t] = Placement{io, start};
    s.length = std::max(s.length, end);
  }
  return s;
}

}  // namespace clf::scheduler
