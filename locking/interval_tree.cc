#include "locking/interval_tree.h"

#include <algorithm>

#include "common/status.h"

namespace clf::locking {

IntervalTree::IntervalTree() = default;

void IntervalTree::Update(NodeId t) {
  Node& n = nodes_[t];
  uint64_t m = n.end;
  if (n.left != kNil) m = std::max(m, nodes_[n.left].max_end);
  if (n.right != kNil) m = std::max(m, nodes_[n.right].max_end);
  n.max_end = m;
}

// Splits t into keys < key (l) and keys >= key (r).
void IntervalTree::Split(NodeId t, NodeId key, NodeId* l, NodeId* r) {
  if (t == kNil) {
    *l = *r = kNil;
    return;
  }
  if (Less(t, key)) {
    Split(nodes_[t].right, key, &nodes_[t].right, r);
    *l = t;
  } else {
    Split(nodes_[t].left, key, l, &nodes_[t].left);
    *r = t;
  }
  Update(t);
}

// Every key of l is less than every key of r.
IntervalTree::NodeId IntervalTree::Merge(NodeId l, NodeId r) {
  if (l == kNil) return r;
  if (r == kNil) return l;
  if (Priority(l) > Priority(r)) {
    nodes_[l].right = Merge(nodes_[l].right, r);
    Update(l);
    return l;
  }
  nodes_[r].left = Merge(l, nodes_[r].left);
  Update(r);
  return r;
}

IntervalTree::NodeId IntervalTree::InsertAt(NodeId t, NodeId n) {
  if (t == kNil) return n;
  if (Priority(n) > Priority(t)) {
    Split(t, n, &nodes_[n].left, &nodes_[n].right);
    Update(n);
    return n;
  }
  if (Less(n, t)) {
    nodes_[t].left = InsertAt(nodes_[t].left, n);
  } else {
    nodes_[t].right = InsertAt(nodes_[t].right, n);
  }
  Update(t);
  return t;
}

IntervalTree::NodeId IntervalTree::EraseAt(NodeId t, NodeId key) {
  CLF_CHECK(t != kNil);
  if (t == key) return Merge(nodes_[t].left, nodes_[t].right);
  if (Less(key, t)) {
    nodes_[t].left = EraseAt(nodes_[t].left, key);
  } else {
    nodes_[t].right = EraseAt(nodes_[t].right, key);
  }
  Update(t);
  return t;
}

IntervalTree::NodeId IntervalTree::NewNode(uint64_t start, uint64_t end, uint64_t value) {
  CLF_CHECK(start < end);
  NodeId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    CLF_CHECK(nodes_.size() < kNil);
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
    values_.emplace_back();
  }
  nodes_[id] = Node{start, end, end, kNil, kNil};
  values_[id] = value;
  return id;
}

IntervalTree::NodeId IntervalTree::Insert(uint64_t start, uint64_t end, uint64_t value) {
  NodeId id = NewNode(start, end, value);
  root_ = InsertAt(root_, id);
  ++size_;
  return id;
}

// Cartesian-tree construction: a stack holds the right spine; each node pops
// the lower-priority nodes, which become its left subtree.
IntervalTree::NodeId IntervalTree::BuildSorted(const std::vector<NodeId>& sorted) {
  std::vector<NodeId> spine;
  for (NodeId n : sorted) {
    NodeId last = kNil;
    while (!spine.empty() && Priority(spine.back()) < Priority(n)) {
      last = spine.back();
      spine.pop_back();
      Update(last);
    }
    nodes_[n].left = last;
    if (!spine.empty()) nodes_[spine.back()].right = n;
    spine.push_back(n);
  }
  while (spine.size() > 1) {
    Update(spine.back());
    spine.pop_back();
  }
  Update(spine.front());
  return spine.front();
}

// Union of two treaps with disjoint key sets (keys interleave freely).
IntervalTree::NodeId IntervalTree::Union(NodeId a, NodeId b) {
  if (a == kNil) return b;
  if (b == kNil) return a;
  if (Priority(a) < Priority(b)) std::swap(a, b);
  NodeId l, r;
  Split(b, a, &l, &r);
  nodes_[a].left = Union(nodes_[a].left, l);
  nodes_[a].right = Union(nodes_[a].right, r);
  Update(a);
  return a;
}

void IntervalTree::Erase(NodeId id) {
  root_ = EraseAt(root_, id);
  nodes_[id].left = nodes_[id].right = kNil;
  free_.push_back(id);
  --size_;
}

// ids sorted by key, all in t. Splits the batch around t's key, recurses into
// both children, and merges t's children in place of t when t goes: one walk
// down the paths to the erased nodes.
IntervalTree::NodeId IntervalTree::EraseSortedAt(NodeId t, const NodeId* ids, size_t n) {
  if (n == 0) return t;
  CLF_CHECK(t != kNil);
  auto less = [this](NodeId a, NodeId b) { return Less(a, b); };
  size_t lo = static_cast<size_t>(std::lower_bound(ids, ids + n, t, less) - ids);
  bool self = lo < n && ids[lo] == t;
  size_t hi = self ? lo + 1 : lo;
  Node& nd = nodes_[t];
  nd.left = EraseSortedAt(nd.left, ids, lo);
  nd.right = EraseSortedAt(nd.right, ids + hi, n - hi);
  if (self) return Merge(nodes_[t].left, nodes_[t].right);
  Update(t);
  return t;
}

void IntervalTree::EraseBatch(std::vector<NodeId> ids) {
  auto less = [this](NodeId a, NodeId b) { return Less(a, b); };
  if (!std::is_sorted(ids.begin(), ids.end(), less)) std::sort(ids.begin(), ids.end(), less);
  root_ = EraseSortedAt(root_, ids.data(), ids.size());
  for (NodeId id : ids) {
    nodes_[id].left = nodes_[id].right = kNil;
    free_.push_back(id);
  }
  size_ -= ids.size();
}

void IntervalTree::Clear() {
  nodes_.clear();
  values_.clear();
  free_.clear();
  root_ = kNil;
  size_ = 0;
}

bool IntervalTree::AnyOverlap(uint64_t lo, uint64_t hi) const {
  // Walk down: the leftmost overlapping candidate is in the left subtree iff
  // that subtree reaches past lo.
  NodeId t = root_;
  while (t != kNil) {
    const Node& n = nodes_[t];
    if (n.max_end <= lo) return false;
    if (n.left != kNil && nodes_[n.left].max_end > lo) {
      t = n.left;
      continue;
    }
    if (n.start >= hi) return false;
    if (n.end > lo) return true;
    t = n.right;
  }
  return false;
}

int IntervalTree::CheckAt(NodeId t, uint64_t* max_end, size_t* count) const {
  if (t == kNil) return 0;
  const Node& n = nodes_[t];
  uint64_t m = n.end;
  for (NodeId c : {n.left, n.right}) {
    if (c == kNil) continue;
    if (Priority(c) > Priority(t)) return -1;
    uint64_t cm = 0;
    if (CheckAt(c, &cm, count) < 0) return -1;
    m = std::max(m, cm);
  }
  if (n.left != kNil && !Less(n.left, t)) return -1;
  if (n.right != kNil && !Less(t, n.right)) return -1;
  if (m != n.max_end) return -1;
  *max_end = m;
  ++*count;
  return 0;
}

bool IntervalTree::CheckInvariants() const {
  uint64_t m = 0;
  size_t count = 0;
  if (CheckAt(root_, &m, &count) < 0) return false;
  return count == size_;
}

}  // namespace clf::locking
