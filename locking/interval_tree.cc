#include "locking/interval_tree.h"

#include <algorithm>

#include "common/status.h"

namespace clf::locking {

IntervalTree::IntervalTree() : rng_(0x9e3779b9u) {}

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
  if (nodes_[l].priority > nodes_[r].priority) {
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
  if (nodes_[n].priority > nodes_[t].priority) {
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
  }
  nodes_[id] = Node{start, end, end, value, kNil, kNil, static_cast<uint32_t>(rng_())};
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
    while (!spine.empty() && nodes_[spine.back()].priority < nodes_[n].priority) {
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
  if (nodes_[a].priority < nodes_[b].priority) std::swap(a, b);
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

// Removes the smallest key of t, which must be `expect`.
IntervalTree::NodeId IntervalTree::RemoveMin(NodeId t, NodeId expect) {
  CLF_CHECK(t != kNil);
  if (nodes_[t].left == kNil) {
    CLF_CHECK(t == expect);
    return nodes_[t].right;
  }
  nodes_[t].left = RemoveMin(nodes_[t].left, expect);
  Update(t);
  return t;
}

// ids sorted by key, all in t: split at the middle one, drop it, recurse on
// both halves, merge back.
IntervalTree::NodeId IntervalTree::EraseSortedAt(NodeId t, const NodeId* ids, size_t n) {
  if (n == 0) return t;
  size_t mid = n / 2;
  NodeId l, r;
  Split(t, ids[mid], &l, &r);
  r = RemoveMin(r, ids[mid]);
  l = EraseSortedAt(l, ids, mid);
  r = EraseSortedAt(r, ids + mid + 1, n - mid - 1);
  return Merge(l, r);
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
    if (nodes_[c].priority > n.priority) return -1;
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
