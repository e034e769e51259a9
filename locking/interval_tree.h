// IntervalTree: a balanced (randomized treap) search tree of half-open byte
// intervals [start, end), ordered by start and augmented with the largest end
// in each subtree, so that all intervals overlapping a query range are found
// without scanning the others.
//
// Balance comes from treap priorities that are a hash of the node's slot, so
// it does not depend on the order of inserts.
// Complexity (n intervals): Insert and Erase O(log n) expected. ForEachOverlap
// visits O(log n + k) nodes when the k reported intervals do not hide each other
// (the lock-table case: granted extents of different owners are disjoint or
// shared); the worst case for deeply nested intervals is O((k + 1) log n).
//
// Nodes live in one vector and are named by a NodeId that stays valid until the
// node is erased. Thread safety: none; the owner serializes access.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace clf::locking {

class IntervalTree {
 public:
  using NodeId = uint32_t;
  static constexpr NodeId kNil = 0xffffffffu;

  IntervalTree();

  // Adds [start, end) (start < end) carrying `value`. Duplicates are allowed.
  NodeId Insert(uint64_t start, uint64_t end, uint64_t value);
  // Inserts intervals sorted by start (non-decreasing), all carrying `value`,
  // and appends their NodeIds to *ids in the same order. Builds a treap of the
  // batch in O(m) and unions it in: O(m log(n/m + 1)) expected instead of
  // O(m log n) for m single inserts.
  template <typename Range>
  void InsertSorted(const Range& intervals, uint64_t value, std::vector<NodeId>* ids);
  // Removes a node returned by Insert and not yet erased.
  void Erase(NodeId id);
  // Removes many nodes at once: O(m log(n/m + 1)) expected.
  void EraseBatch(std::vector<NodeId> ids);
  void Clear();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  uint64_t start(NodeId id) const { return nodes_[id].start; }
  uint64_t end(NodeId id) const { return nodes_[id].end; }
  uint64_t value(NodeId id) const { return values_[id]; }

  // Calls fn(NodeId) for each interval overlapping [lo, hi), in start order,
  // until fn returns false. Returns false iff fn stopped the walk. fn must not
  // modify the tree.
  template <typename Fn>
  bool ForEachOverlap(uint64_t lo, uint64_t hi, Fn&& fn) const {
    return Visit(root_, lo, hi, fn);
  }
  // Like ForEachOverlap for many query ranges at once: `queries` (anything
  // with .offset and .end()) sorted by offset and disjoint. Each overlapping
  // interval is reported once, in start order. The walk splits the queries
  // around each node, O(m log(n/m + 1) + k) for m queries.
  template <typename Query, typename Fn>
  bool ForEachOverlapSorted(const std::vector<Query>& queries, Fn&& fn) const {
    return VisitSorted(root_, queries.data(), queries.size(), fn);
  }
  // True iff some interval overlaps [lo, hi). O(log n).
  bool AnyOverlap(uint64_t lo, uint64_t hi) const;

  // Checks the treap and augmentation invariants; for tests. O(n).
  bool CheckInvariants() const;

 private:
  // 32 bytes, two to a cache line: the value lives apart (read only on a
  // hit) and the treap priority is a hash of the NodeId (never stored).
  struct Node {
    uint64_t start;
    uint64_t end;
    uint64_t max_end;
    NodeId left;
    NodeId right;
  };
  static uint32_t Priority(NodeId id) {
    uint32_t h = id * 0x9e3779b1u;  // murmur3 finalizer over a Weyl step
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
  }

  // Nodes are ordered by (start, id), which makes every key unique.
  bool Less(NodeId a, NodeId b) const {
    return nodes_[a].start < nodes_[b].start || (nodes_[a].start == nodes_[b].start && a < b);
  }
  void Update(NodeId t);
  void Split(NodeId t, NodeId key, NodeId* l, NodeId* r);
  NodeId Merge(NodeId l, NodeId r);
  NodeId InsertAt(NodeId t, NodeId n);
  NodeId Union(NodeId a, NodeId b);
  NodeId NewNode(uint64_t start, uint64_t end, uint64_t value);
  // Builds a treap from nodes already sorted by key; returns its root.
  NodeId BuildSorted(const std::vector<NodeId>& sorted);
  NodeId EraseAt(NodeId t, NodeId key);
  int CheckAt(NodeId t, uint64_t* max_end, size_t* count) const;
  NodeId EraseSortedAt(NodeId t, const NodeId* ids, size_t n);

  template <typename Query, typename Fn>
  bool VisitSorted(NodeId t, const Query* q, size_t n, Fn& fn) const {
    while (t != kNil && n != 0) {
      const Node& nd = nodes_[t];
      if (nd.max_end <= q[0].offset) return true;
      if (nd.left != kNil) {
        uint64_t lm = nodes_[nd.left].max_end;
        size_t p = static_cast<size_t>(
            std::partition_point(q, q + n, [lm](const Query& e) { return e.offset < lm; }) - q);
        if (!VisitSorted(nd.left, q, p, fn)) return false;
      }
      uint64_t s = nd.start;
      size_t k = static_cast<size_t>(
          std::partition_point(q, q + n, [s](const Query& e) { return e.end() <= s; }) - q);
      if (k < n && q[k].offset < nd.end && !fn(t)) return false;
      q += k;
      n -= k;
      t = nd.right;
    }
    return true;
  }

  template <typename Fn>
  bool Visit(NodeId t, uint64_t lo, uint64_t hi, Fn& fn) const {
    while (t != kNil) {
      const Node& n = nodes_[t];
      if (n.max_end <= lo) return true;
      if (!Visit(n.left, lo, hi, fn)) return false;
      if (n.start >= hi) return true;
      if (n.end > lo && !fn(t)) return false;
      t = n.right;  // tail call by hand
    }
    return true;
  }

  std::vector<Node> nodes_;
  std::vector<uint64_t> values_;
  std::vector<NodeId> free_;
  NodeId root_ = kNil;
  size_t size_ = 0;
};

template <typename Range>
void IntervalTree::InsertSorted(const Range& intervals, uint64_t value, std::vector<NodeId>* ids) {
  size_t first = ids->size();
  for (const auto& iv : intervals) ids->push_back(NewNode(iv.offset, iv.end(), value));
  if (ids->size() == first) return;
  std::vector<NodeId> batch(ids->begin() + static_cast<std::ptrdiff_t>(first), ids->end());
  auto less = [this](NodeId a, NodeId b) { return Less(a, b); };
  if (!std::is_sorted(batch.begin(), batch.end(), less)) {
    std::sort(batch.begin(), batch.end(), less);
  }
  root_ = Union(root_, BuildSorted(batch));
  size_ += batch.size();
}

}  // namespace clf::locking
