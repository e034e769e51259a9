#include "scheduler/exact_solver.h"

#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/batch_heuristics.h"

namespace clf::scheduler {
namespace {

class Search {
 public:
  Search(const Problem& p, const ExactOptions& options) : p_(p), options_(options) {
    const int n = static_cast<int>(p.transfers.size());
    cn_free_.resize(p.num_compute_nodes);
    io_free_.resize(p.num_io_nodes);
    for (int c = 0; c < p.num_compute_nodes; ++c) cn_free_[c] = p.ComputeAvailable(c);
    for (int j = 0; j < p.num_io_nodes; ++j) io_free_[j] = p.IoAvailable(j);
    cn_left_.assign(p.num_compute_nodes, 0);
    placed_.assign(n, 0);
    twin_.assign(n, -1);
    current_.placements.resize(n);
    for (int t = 0; t < n; ++t) {
      const Transfer& a = p.transfers[t];
      cn_left_[a.compute_node] += a.size;
      for (int u = t - 1; u >= 0; --u) {
        const Transfer& b = p.transfers[u];
        if (a.compute_node == b.compute_node && a.size == b.size && a.io_nodes == b.io_nodes) {
          twin_[t] = u;
          break;
        }
      }
    }
  }

  void Seed(const Schedule& s) {
    if (best_.placements.empty() || s.length < best_.length) best_ = s;
  }

  ExactResult Run() {
    Dfs(0, 0, -1, 0);
    return ExactResult{best_, !out_of_budget_, nodes_};
  }

 private:
  // Lower bound on the length of any completion of the current partial
  // schedule in which nothing starts before `floor`.
  Time Bound(Time floor) const {
    Time bound = 0;
    Time total = 0;
    for (int c = 0; c < p_.num_compute_nodes; ++c) {
      if (cn_left_[c] > 0) bound = std::max(bound, std::max(cn_free_[c], floor) + cn_left_[c]);
    }
    forced_.assign(p_.num_io_nodes, 0);
    used_.assign(p_.num_io_nodes, 0);
    for (size_t t = 0; t < p_.transfers.size(); ++t) {
      if (placed_[t]) continue;
      const Transfer& tr = p_.transfers[t];
      Time io_min = io_free_[tr.io_nodes[0]];
      for (int io : tr.io_nodes) {
        io_min = std::min(io_min, io_free_[io]);
        used_[io] = 1;
      }
      bound = std::max(bound, std::max({cn_free_[tr.compute_node], io_min, floor}) + tr.size);
      if (tr.io_nodes.size() == 1) forced_[tr.io_nodes[0]] += tr.size;
      total += tr.size;
    }
    levels_.clear();
    for (int j = 0; j < p_.num_io_nodes; ++j) {
      if (forced_[j] > 0) bound = std::max(bound, std::max(io_free_[j], floor) + forced_[j]);
      if (used_[j]) levels_.push_back(std::max(io_free_[j], floor));
    }
    if (total > 0) {
      std::sort(levels_.begin(), levels_.end());
      Time prefix = 0;
      for (size_t k = 1; k <= levels_.size(); ++k) {
        prefix += levels_[k - 1];
        const Time n = static_cast<Time>(k);
        const Time level = (total + prefix + n - 1) / n;
        if (k == levels_.size() || level <= levels_[k]) {
          bound = std::max(bound, level);
          break;
        }
      }
    }
    return bound;
  }

  void Dfs(int depth, Time last_start, int last_t, Time length) {
    if (out_of_budget_) return;
    if (++nodes_ > options_.max_nodes) {
      out_of_budget_ = true;
      return;
    }
    const int n = static_cast<int>(p_.transfers.size());
    if (depth == n) {
      if (best_.placements.empty() || length < best_.length) {
        best_ = current_;
        best_.length = length;
      }
      return;
    }
    if (!best_.placements.empty() && std::max(length, Bound(last_start)) >= best_.length) return;
    // Children in increasing start time, so good schedules come early.
    struct Child {
      Time start;
      int t;
      int io;
    };
    std::vector<Child> children;
    for (int t = 0; t < n; ++t) {
      if (placed_[t] || (twin_[t] >= 0 && !placed_[twin_[t]])) continue;
      const Transfer& tr = p_.transfers[t];
      for (int io : tr.io_nodes) {
        const Time start = std::max(cn_free_[tr.compute_node], io_free_[io]);
        if (start < last_start || (start == last_start && t < last_t)) continue;
        children.push_back({start, t, io});
      }
    }
    std::stable_sort(children.begin(), children.end(),
                     [](const Child& a, const Child& b) { return a.start < b.start; });
    for (const Child& ch : children) {
      const Transfer& tr = p_.transfers[ch.t];
      const Time end = ch.start + tr.size;
      const Time saved_cn = cn_free_[tr.compute_node];
      const Time saved_io = io_free_[ch.io];
      cn_free_[tr.compute_node] = end;
      io_free_[ch.io] = end;
      cn_left_[tr.compute_node] -= tr.size;
      placed_[ch.t] = 1;
      current_.placements[ch.t] = Placement{ch.io, ch.start};
      Dfs(depth + 1, ch.start, ch.t, std::max(length, end));
      placed_[ch.t] = 0;
      cn_left_[tr.compute_node] += tr.size;
      cn_free_[tr.compute_node] = saved_cn;
      io_free_[ch.io] = saved_io;
      if (out_of_budget_) return;
    }
  }

  const Problem& p_;
  const ExactOptions options_;
  std::vector<Time> cn_free_;
  std::vector<Time> io_free_;
  std::vector<Time> cn_left_;
  std::vector<char> placed_;
  std::vector<int> twin_;  // previous identical transfer, or -1
  Schedule current_;
  Schedule best_;
  int64_t nodes_ = 0;
  bool out_of_budget_ = false;
  // Scratch for Bound().
  mutable std::vector<Time> forced_;
  mutable std::vector<char> used_;
  mutable std::vector<Time> levels_;
};

}  // namespace

Result<ExactResult> SolveExact(const Problem& problem, const ExactOptions& options) {
  CLF_RETURN_IF_ERROR(problem.Validate());
  if (problem.transfers.size() > static_cast<size_t>(kMaxExactTransfers)) {
    return Invalid("exact solver takes at most " + std::to_string(kMaxExactTransfers) +
                   " transfers, got " + std::to_string(problem.transfers.size()));
  }
  if (problem.transfers.empty()) return ExactResult{Schedule{}, true, 0};
  Search search(problem, options);
  search.Seed(PlanEatf(problem));
  search.Seed(PlanLcdf(problem));
  search.Seed(PlanLddf(problem));
  search.Seed(PlanLdsdf(problem));
  search.Seed(PlanSjf(problem));
  return search.Run();
}

}  // namespace clf::scheduler
