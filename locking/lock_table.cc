#include "locking/lock_table.h"

#include <utility>

namespace clf::locking {
namespace {

bool BoundsIntersect(Extent a, Extent b) { return a.offset < b.end() && b.offset < a.end(); }

// Does some byte of `r` lie in `w`?
bool Overlap(const ExtentList& w, const ExtentList& r) { return w.Overlaps(r); }
bool Overlap(const ExtentList& w, const LockRequest& r) {
  if (!r.pattern()) return w.Overlaps(r.extents());
  return !r.ForEachExtent([&](const Extent& e) { return !w.OverlapsRange(e.offset, e.end()); });
}

}  // namespace

LockTable::LockTable(LockTableOptions options) : options_(options) {}

Status LockTable::Validate(LockId id, const LockRequest& request) const {
  if (id == kNoLock) return Invalid("lock id 0 is reserved");
  if (locks_.count(id) != 0) return Status(Code::kExists, "lock id in use");
  if (!request.pattern() && request.extents().empty()) return Invalid("empty lock request");
  if (request.pattern() && request.pattern()->WalkSteps() > options_.max_extents_per_lock) {
    return Status(Code::kTooBig, "lock pattern has too many blocks");
  }
  if (!request.pattern() && request.extents().size() > options_.max_extents_per_lock) {
    return Status(Code::kTooBig, "too many extents in lock request");
  }
  return Status::Ok();
}

Result<ExtentList> LockTable::Materialize(const LockRequest& request) const {
  if (request.pattern()) return request.pattern()->Expand(options_.max_extents_per_lock);
  return request.extents();
}

bool LockTable::ConflictsWithGranted(const Owner& owner, LockMode mode,
                                     const LockRequest& request) const {
  if (!request.pattern()) return ConflictsWithGranted(owner, mode, request.extents());
  if (tree_.empty()) return false;
  Extent b = request.Bounds();
  if (!tree_.AnyOverlap(b.offset, b.end())) return false;  // skip the walk
  return !request.ForEachExtent([&](const Extent& e) {
    return tree_.ForEachOverlap(e.offset, e.end(), [&](IntervalTree::NodeId n) {
      const Lock& l = slots_[tree_.value(n)];
      return l.owner == owner || !ModesConflict(l.mode, mode);
    });
  });
}

bool LockTable::ConflictsWithGranted(const Owner& owner, LockMode mode,
                                     const ExtentList& extents) const {
  if (tree_.empty()) return false;
  return !tree_.ForEachOverlapSorted(extents.extents(), [&](IntervalTree::NodeId n) {
    const Lock& l = slots_[tree_.value(n)];
    return l.owner == owner || !ModesConflict(l.mode, mode);
  });
}

template <typename Extents>
bool LockTable::ConflictsWithWaiters(const Owner& owner, LockMode mode, const Extents& e, Extent b,
                                     uint64_t before,
                                     const std::vector<uint32_t>* still_waiting) const {
  auto conflicts = [&](uint32_t slot) {
    const Lock& w = slots_[slot];
    if (w.seq >= before || w.owner == owner || !ModesConflict(w.mode, mode)) return false;
    if (!BoundsIntersect(w.extents.Bounds(), b)) return false;
    return Overlap(w.extents, e);
  };
  if (still_waiting != nullptr) {
    for (uint32_t slot : *still_waiting) {
      if (conflicts(slot)) return true;
    }
    return false;
  }
  for (const auto& [seq, slot] : waiting_) {
    if (seq >= before) break;
    if (conflicts(slot)) return true;
  }
  return false;
}

uint32_t LockTable::NewSlot(LockId id, Owner owner, LockMode mode) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Lock& l = slots_[slot];
  l.id = id;
  l.owner = owner;
  l.mode = mode;
  l.seq = next_seq_++;
  l.granted = false;
  locks_.emplace(id, slot);
  by_session_[owner.session].insert(id);
  return slot;
}

void LockTable::Drop(uint32_t slot) {
  Lock& l = slots_[slot];
  CLF_CHECK(!l.granted);
  locks_.erase(l.id);
  auto it = by_session_.find(l.owner.session);
  if (it != by_session_.end()) {
    it->second.erase(l.id);
    if (it->second.empty()) by_session_.erase(it);
  }
  l = Lock();
  free_slots_.push_back(slot);
}

void LockTable::Grant(uint32_t slot) {
  Lock& l = slots_[slot];
  l.nodes.reserve(l.extents.size());
  tree_.InsertSorted(l.extents.extents(), slot, &l.nodes);
  l.granted = true;
  ++granted_count_;
}

void LockTable::Ungrant(uint32_t slot) {
  Lock& l = slots_[slot];
  if (l.nodes.size() == 1) {
    tree_.Erase(l.nodes[0]);
  } else {
    tree_.EraseBatch(std::move(l.nodes));
  }
  l.nodes.clear();
  l.granted = false;
  --granted_count_;
}

Status LockTable::TryAcquire(LockId id, Owner owner, LockMode mode, const LockRequest& request) {
  CLF_RETURN_IF_ERROR(Validate(id, request));
  if (ConflictsWithGranted(owner, mode, request) ||
      ConflictsWithWaiters(owner, mode, request, request.Bounds(), next_seq_, nullptr)) {
    return Status(Code::kWouldBlock, "lock conflicts");
  }
  CLF_ASSIGN_OR_RETURN(ExtentList extents, Materialize(request));
  uint32_t slot = NewSlot(id, owner, mode);
  slots_[slot].extents = std::move(extents);
  Grant(slot);
  return Status::Ok();
}

Result<AcquireOutcome> LockTable::Acquire(LockId id, Owner owner, LockMode mode,
                                          const LockRequest& request) {
  CLF_RETURN_IF_ERROR(Validate(id, request));
  bool blocked = ConflictsWithGranted(owner, mode, request) ||
                 ConflictsWithWaiters(owner, mode, request, request.Bounds(), next_seq_, nullptr);
  CLF_ASSIGN_OR_RETURN(ExtentList extents, Materialize(request));
  uint32_t slot = NewSlot(id, owner, mode);
  slots_[slot].extents = std::move(extents);
  if (!blocked) {
    Grant(slot);
    return AcquireOutcome::kGranted;
  }
  waiting_.emplace(slots_[slot].seq, slot);
  return AcquireOutcome::kQueued;
}

void LockTable::WakeWaiters(std::vector<LockId>* granted) {
  std::vector<uint32_t> still;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    uint32_t slot = it->second;
    const Lock& w = slots_[slot];
    if (!ConflictsWithGranted(w.owner, w.mode, w.extents) &&
        !ConflictsWithWaiters(w.owner, w.mode, w.extents, w.extents.Bounds(), w.seq, &still)) {
      Grant(slot);
      if (granted != nullptr) granted->push_back(w.id);
      it = waiting_.erase(it);
    } else {
      still.push_back(slot);
      ++it;
    }
  }
}

Status LockTable::Release(LockId id, std::vector<LockId>* granted) {
  auto it = locks_.find(id);
  if (it == locks_.end()) return NotFound("no such lock");
  uint32_t slot = it->second;
  if (slots_[slot].granted) {
    Ungrant(slot);
  } else {
    waiting_.erase(slots_[slot].seq);
  }
  Drop(slot);
  WakeWaiters(granted);
  return Status::Ok();
}

Status LockTable::Cancel(LockId id, std::vector<LockId>* granted) {
  auto it = locks_.find(id);
  if (it == locks_.end()) return NotFound("no such lock request");
  uint32_t slot = it->second;
  if (slots_[slot].granted) return Status(Code::kBusy, "lock already granted");
  waiting_.erase(slots_[slot].seq);
  Drop(slot);
  WakeWaiters(granted);
  return Status::Ok();
}

void LockTable::ReleaseSession(SessionId session, std::vector<LockId>* granted,
                               std::vector<LockId>* cancelled, std::vector<LockId>* released) {
  auto sit = by_session_.find(session);
  if (sit == by_session_.end()) return;
  std::vector<LockId> ids(sit->second.begin(), sit->second.end());
  for (LockId id : ids) {
    uint32_t slot = locks_.at(id);
    if (slots_[slot].granted) {
      Ungrant(slot);
      if (released != nullptr) released->push_back(id);
    } else {
      waiting_.erase(slots_[slot].seq);
      if (cancelled != nullptr) cancelled->push_back(id);
    }
    Drop(slot);
  }
  WakeWaiters(granted);
}

bool LockTable::IsGranted(LockId id) const {
  auto it = locks_.find(id);
  return it != locks_.end() && slots_[it->second].granted;
}

bool LockTable::IsWaiting(LockId id) const {
  auto it = locks_.find(id);
  return it != locks_.end() && !slots_[it->second].granted;
}

std::optional<LockConflict> LockTable::FindConflict(Owner owner, LockMode mode,
                                                    const LockRequest& request) const {
  std::optional<LockConflict> found;
  request.ForEachExtent([&](const Extent& e) {
    return tree_.ForEachOverlap(e.offset, e.end(), [&](IntervalTree::NodeId n) {
      const Lock& l = slots_[tree_.value(n)];
      if (l.owner == owner || !ModesConflict(l.mode, mode)) return true;
      found = LockConflict{l.id, l.owner, l.mode,
                           Extent{tree_.start(n), tree_.end(n) - tree_.start(n)}};
      return false;
    });
  });
  return found;
}

}  // namespace clf::locking
