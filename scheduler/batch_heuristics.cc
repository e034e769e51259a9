#include "scheduler/batch_heuristics.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "scheduler/rng.h"

namespace clf::scheduler {
namespace {

using Order = std::vector<std::pair<int, int>>;  // (transfer, I/O node) in decision order

// at_io[j]: the transfers I/O node j can serve, in increasing transfer index.
std::vector<std::vector<int>> TransfersByIo(const Problem& p) {
  std::vector<std::vector<int>> at_io(p.num_io_nodes);
  for (size_t t = 0; t < p.transfers.size(); ++t) {
    for (int io : p.transfers[t].io_nodes) at_io[io].push_back(static_cast<int>(t));
  }
  return at_io;
}

// Pending-edge bookkeeping shared by the degree heuristics. Scheduling a
// transfer removes all of its edges (one per replica).
class Degrees {
 public:
  explicit Degrees(const Problem& p, const std::vector<std::vector<int>>& at_io)
      : p_(p), io_(p.num_io_nodes), cn_(p.num_compute_nodes), done_(p.transfers.size(), 0) {
    for (int j = 0; j < p.num_io_nodes; ++j) io_[j] = static_cast<int>(at_io[j].size());
    for (const Transfer& tr : p.transfers)
      cn_[tr.compute_node] += static_cast<int>(tr.io_nodes.size());
  }
  int io(int j) const { return io_[j]; }
  int cn(int c) const { return cn_[c]; }
  bool done(int t) const { return done_[t] != 0; }
  void Remove(int t) {
    const Transfer& tr = p_.transfers[t];
    done_[t] = 1;
    for (int io : tr.io_nodes) --io_[io];
    cn_[tr.compute_node] -= static_cast<int>(tr.io_nodes.size());
  }

 private:
  const Problem& p_;
  std::vector<int> io_;
  std::vector<int> cn_;
  std::vector<char> done_;
};

// I/O nodes with pending edges, by increasing degree, ties by index.
std::vector<int> IosByDegree(const Degrees& deg, int num_io) {
  std::vector<int> ios;
  for (int j = 0; j < num_io; ++j) {
    if (deg.io(j) > 0) ios.push_back(j);
  }
  std::sort(ios.begin(), ios.end(), [&deg](int a, int b) {
    return deg.io(a) != deg.io(b) ? deg.io(a) < deg.io(b) : a < b;
  });
  return ios;
}

// Position of `io` in t's replica list (for tie-breaking).
int ReplicaPos(const Transfer& tr, int io) {
  return static_cast<int>(std::find(tr.io_nodes.begin(), tr.io_nodes.end(), io) -
                          tr.io_nodes.begin());
}

}  // namespace

Schedule PlanLddf(const Problem& p) {
  const int n = static_cast<int>(p.transfers.size());
  const std::vector<std::vector<int>> at_io = TransfersByIo(p);
  Degrees deg(p, at_io);
  std::vector<size_t> head(p.num_io_nodes, 0);  // at_io[j][0..head) are all done
  std::vector<int> cn_round(p.num_compute_nodes, -1);
  Order order;
  order.reserve(n);
  for (int round = 0; static_cast<int>(order.size()) < n; ++round) {
    for (int j : IosByDegree(deg, p.num_io_nodes)) {
      const std::vector<int>& list = at_io[j];
      while (head[j] < list.size() && deg.done(list[head[j]])) ++head[j];
      for (size_t k = head[j]; k < list.size(); ++k) {
        const int t = list[k];
        const int c = p.transfers[t].compute_node;
        if (deg.done(t) || cn_round[c] == round) continue;
        cn_round[c] = round;
        deg.Remove(t);
        order.emplace_back(t, j);
        break;
      }
    }
  }
  return TimeInOrder(p, order);
}

Schedule PlanLdsdf(const Problem& p) {
  const int n = static_cast<int>(p.transfers.size());
  const std::vector<std::vector<int>> at_io = TransfersByIo(p);
  Degrees deg(p, at_io);
  std::vector<size_t> head(p.num_io_nodes, 0);
  std::vector<int> cn_round(p.num_compute_nodes, -1);
  Order order;
  order.reserve(n);
  for (int round = 0; static_cast<int>(order.size()) < n; ++round) {
    for (int j : IosByDegree(deg, p.num_io_nodes)) {
      const std::vector<int>& list = at_io[j];
      while (head[j] < list.size() && deg.done(list[head[j]])) ++head[j];
      int best = -1;
      int best_deg = 0;
      for (size_t k = head[j]; k < list.size(); ++k) {
        const int t = list[k];
        const int c = p.transfers[t].compute_node;
        if (deg.done(t) || cn_round[c] == round) continue;
        if (best < 0 || deg.cn(c) < best_deg) {  // strict: ties keep the lower index
          best = t;
          best_deg = deg.cn(c);
        }
      }
      if (best < 0) continue;
      cn_round[p.transfers[best].compute_node] = round;
      deg.Remove(best);
      order.emplace_back(best, j);
    }
  }
  return TimeInOrder(p, order);
}

Schedule PlanLcdf(const Problem& p) {
  const int n = static_cast<int>(p.transfers.size());
  const std::vector<std::vector<int>> at_io = TransfersByIo(p);
  Degrees deg(p, at_io);
  struct Edge {
    int t;
    int io;
    int cn;
  };
  std::vector<Edge> pending;  // live edges in (transfer, replica position) order
  for (int t = 0; t < n; ++t) {
    for (int io : p.transfers[t].io_nodes) pending.push_back({t, io, p.transfers[t].compute_node});
  }
  std::vector<Edge> sorted(pending.size());
  std::vector<int> key(pending.size());
  std::vector<int> count;
  std::vector<int> cn_round(p.num_compute_nodes, -1);
  std::vector<int> io_round(p.num_io_nodes, -1);
  Order order;
  order.reserve(n);
  for (int round = 0; static_cast<int>(order.size()) < n; ++round) {
    // Drop dead edges and key the rest by combined degree at the start of the round.
    size_t live = 0;
    int max_key = 0;
    for (const Edge& e : pending) {
      if (deg.done(e.t)) continue;
      const int k = deg.cn(e.cn) + deg.io(e.io);
      key[live] = k;
      max_key = std::max(max_key, k);
      pending[live++] = e;
    }
    pending.resize(live);
    // Stable counting sort by key.
    count.assign(max_key + 2, 0);
    for (size_t i = 0; i < live; ++i) ++count[key[i] + 1];
    for (int k = 0; k <= max_key; ++k) count[k + 1] += count[k];
    for (size_t i = 0; i < live; ++i) sorted[count[key[i]]++] = pending[i];
    // At most one transfer per compute node and per I/O node in a round; stop
    // early once every I/O node with edges has been used.
    int ios_left = 0;
    for (int j = 0; j < p.num_io_nodes; ++j) ios_left += deg.io(j) > 0 ? 1 : 0;
    for (size_t i = 0; i < live && ios_left > 0; ++i) {
      const Edge& e = sorted[i];
      const int c = e.cn;
      if (cn_round[c] == round || io_round[e.io] == round || deg.done(e.t)) continue;
      cn_round[c] = round;
      io_round[e.io] = round;
      --ios_left;
      deg.Remove(e.t);
      order.emplace_back(e.t, e.io);
    }
  }
  return TimeInOrder(p, order);
}

Schedule PlanSjf(const Problem& p) {
  const int n = static_cast<int>(p.transfers.size());
  std::vector<std::vector<int>> at_io = TransfersByIo(p);
  for (std::vector<int>& list : at_io) {
    std::stable_sort(list.begin(), list.end(),
                     [&p](int a, int b) { return p.transfers[a].size < p.transfers[b].size; });
  }
  std::vector<char> done(n, 0);
  std::vector<size_t> head(p.num_io_nodes, 0);
  std::vector<int> io_round(p.num_io_nodes, -1);
  Order order;
  order.reserve(n);
  for (int round = 0; static_cast<int>(order.size()) < n; ++round) {
    while (true) {
      int best_t = -1;
      int best_io = -1;
      for (int j = 0; j < p.num_io_nodes; ++j) {
        if (io_round[j] == round) continue;
        const std::vector<int>& list = at_io[j];
        while (head[j] < list.size() && done[list[head[j]]]) ++head[j];
        if (head[j] == list.size()) continue;
        const int t = list[head[j]];
        bool better = best_t < 0;
        if (!better) {
          const Time s = p.transfers[t].size;
          const Time bs = p.transfers[best_t].size;
          better =
              s < bs || (s == bs && t < best_t) ||
              (t == best_t && ReplicaPos(p.transfers[t], j) < ReplicaPos(p.transfers[t], best_io));
        }
        if (better) {
          best_t = t;
          best_io = j;
        }
      }
      if (best_t < 0) break;
      io_round[best_io] = round;
      done[best_t] = 1;
      order.emplace_back(best_t, best_io);
    }
  }
  return TimeInOrder(p, order);
}

Schedule PlanRandom(const Problem& p, uint64_t seed) {
  const int n = static_cast<int>(p.transfers.size());
  Rng rng(seed);
  std::vector<std::vector<int>> at_io = TransfersByIo(p);
  // where[base[t] + k]: index of t in at_io[transfers[t].io_nodes[k]].
  std::vector<size_t> base(n + 1, 0);
  for (int t = 0; t < n; ++t) base[t + 1] = base[t] + p.transfers[t].io_nodes.size();
  std::vector<size_t> where(base[n]);
  for (int j = 0; j < p.num_io_nodes; ++j) {
    for (size_t i = 0; i < at_io[j].size(); ++i) {
      const int t = at_io[j][i];
      where[base[t] + ReplicaPos(p.transfers[t], j)] = i;
    }
  }
  std::vector<int> io_round(p.num_io_nodes, -1);
  Order order;
  order.reserve(n);
  for (int round = 0; static_cast<int>(order.size()) < n; ++round) {
    while (true) {
      uint64_t total = 0;
      for (int j = 0; j < p.num_io_nodes; ++j) {
        if (io_round[j] != round) total += at_io[j].size();
      }
      if (total == 0) break;
      uint64_t r = rng.Uniform(total);
      int j = 0;
      for (;; ++j) {
        if (io_round[j] == round) continue;
        if (r < at_io[j].size()) break;
        r -= at_io[j].size();
      }
      const int t = at_io[j][r];
      io_round[j] = round;
      order.emplace_back(t, j);
      const Transfer& tr = p.transfers[t];
      for (size_t k = 0; k < tr.io_nodes.size(); ++k) {  // remove every edge of t
        std::vector<int>& list = at_io[tr.io_nodes[k]];
        const size_t i = where[base[t] + k];
        const int last = list.back();
        list[i] = last;
        where[base[last] + ReplicaPos(p.transfers[last], tr.io_nodes[k])] = i;
        list.pop_back();
      }
    }
  }
  return TimeInOrder(p, order);
}

namespace {

// PlanEatf's queues. A slot is one (I/O node, compute node) pair with
// pending transfers; its transfers sit in items_[head, end) sorted by (size,
// index). Each I/O node keeps the fronts of its non-empty slots in a compact
// array, kept current eagerly, so choosing a compute node is one tight scan.
class EatfQueues {
 public:
  struct Front {
    Time size;
    int t;
    int cn;
    int slot;
  };

  explicit EatfQueues(const Problem& p)
      : p_(p),
        fronts_(p.num_io_nodes),
        pending_(p.num_io_nodes, 0),
        base_(p.transfers.size() + 1, 0),
        done_(p.transfers.size(), 0) {
    const int n = static_cast<int>(p.transfers.size());
    for (int t = 0; t < n; ++t) base_[t + 1] = base_[t] + p.transfers[t].io_nodes.size();
    edge_slot_.resize(base_[n]);
    std::vector<std::vector<int>> at_io = TransfersByIo(p);
    for (int j = 0; j < p.num_io_nodes; ++j) AddIoNode(j, &at_io[j]);
  }

  const std::vector<Front>& fronts(int j) const { return fronts_[j]; }
  // The I/O node with pending transfers that is free first (-1: none).
  int FirstFreeIo(const std::vector<Time>& io_free) const {
    int j = -1;
    for (int k = 0; k < p_.num_io_nodes; ++k) {
      if (pending_[k] > 0 && (j < 0 || io_free[k] < io_free[j])) j = k;
    }
    return j;
  }
  // Drops t from every I/O node that could serve it; refreshes fronts it led.
  void Remove(int t) {
    done_[t] = 1;
    const Transfer& tr = p_.transfers[t];
    for (size_t k = 0; k < tr.io_nodes.size(); ++k) {
      const int io = tr.io_nodes[k];
      --pending_[io];
      const int id = edge_slot_[base_[t] + k];
      Slot& slot = slots_[id];
      if (items_[slot.head] != t) continue;  // not the front: skipped when it gets there
      while (slot.head < slot.end && done_[items_[slot.head]]) ++slot.head;
      std::vector<Front>& fr = fronts_[io];
      const int pos = front_pos_[id];
      if (slot.head == slot.end) {
        fr[pos] = fr.back();
        front_pos_[fr[pos].slot] = pos;
        fr.pop_back();
      } else {
        const int next = items_[slot.head];
        fr[pos].t = next;
        fr[pos].size = p_.transfers[next].size;
      }
    }
  }

 private:
  struct Slot {
    int head;
    int end;
  };
  // I/O node j's slots from `list`, its transfers (sorted here).
  void AddIoNode(int j, std::vector<int>* list) {
    const Problem& p = p_;
    pending_[j] = static_cast<int>(list->size());
    std::sort(list->begin(), list->end(), [&p](int a, int b) {
      const Transfer& x = p.transfers[a];
      const Transfer& y = p.transfers[b];
      if (x.compute_node != y.compute_node) return x.compute_node < y.compute_node;
      if (x.size != y.size) return x.size < y.size;
      return a < b;
    });
    for (size_t i = 0; i < list->size(); ++i) {
      const int t = (*list)[i];
      const int c = p.transfers[t].compute_node;
      if (i == 0 || p.transfers[(*list)[i - 1]].compute_node != c) {
        const int id = static_cast<int>(slots_.size());
        slots_.push_back({static_cast<int>(items_.size()), static_cast<int>(items_.size())});
        front_pos_.push_back(static_cast<int>(fronts_[j].size()));
        fronts_[j].push_back({p.transfers[t].size, t, c, id});
      }
      items_.push_back(t);
      ++slots_.back().end;
      edge_slot_[base_[t] + ReplicaPos(p.transfers[t], j)] = static_cast<int>(slots_.size()) - 1;
    }
  }

  const Problem& p_;
  std::vector<Slot> slots_;
  std::vector<std::vector<Front>> fronts_;
  std::vector<int> front_pos_;  // slot -> index in fronts_[its I/O node]
  std::vector<int> items_;
  std::vector<int> pending_;
  // edge_slot_[base_[t] + k]: the slot of t's k-th replica.
  std::vector<size_t> base_;
  std::vector<int> edge_slot_;
  std::vector<char> done_;
};

}  // namespace

Schedule PlanEatf(const Problem& p) {
  const int n = static_cast<int>(p.transfers.size());
  const int m = p.num_io_nodes;
  EatfQueues q(p);
  std::vector<Time> io_free(m);
  std::vector<Time> cn_free(p.num_compute_nodes);
  for (int j = 0; j < m; ++j) io_free[j] = p.IoAvailable(j);
  for (int c = 0; c < p.num_compute_nodes; ++c) cn_free[c] = p.ComputeAvailable(c);
  Schedule s;
  s.placements.resize(n);
  for (int remaining = n; remaining > 0; --remaining) {
    const int j = q.FirstFreeIo(io_free);
    // Earliest-available compute node; ties: shorter transfer, lower index.
    const EatfQueues::Front* best = nullptr;
    Time best_avail = 0;
    for (const EatfQueues::Front& f : q.fronts(j)) {
      const Time avail = cn_free[f.cn];
      if (best == nullptr || avail < best_avail ||
          (avail == best_avail &&
           (f.size < best->size || (f.size == best->size && f.t < best->t)))) {
        best = &f;
        best_avail = avail;
      }
    }
    const int t = best->t;
    const Transfer& tr = p.transfers[t];
    const Time start = std::max(io_free[j], cn_free[tr.compute_node]);
    io_free[j] = cn_free[tr.compute_node] = start + tr.size;
    s.placements[t] = Placement{j, start};
    s.length = std::max(s.length, start + tr.size);
    q.Remove(t);
  }
  return s;
}

}  // namespace clf::scheduler
