#include "locking/posix_lock_table.h"

#include <algorithm>
#include <unordered_set>

namespace clf::locking {
namespace {

uint64_t EncodeValue(uint32_t owner_index, PosixType type) {
  return (uint64_t{owner_index} << 1) | (type == PosixType::kWrite ? 1 : 0);
}
uint32_t ValueOwner(uint64_t v) { return static_cast<uint32_t>(v >> 1); }
PosixType ValueType(uint64_t v) { return (v & 1) != 0 ? PosixType::kWrite : PosixType::kRead; }

bool FcntlConflict(PosixType a, PosixType b) {
  return a == PosixType::kWrite || b == PosixType::kWrite;
}

}  // namespace

Status PosixLockTable::ToRange(uint64_t start, uint64_t length, uint64_t* end) {
  if (length == 0) {
    *end = kMaxOffset;
    return Status::Ok();
  }
  if (length > kMaxOffset - start) return Status(Code::kOverflow, "lock range overflows");
  *end = start + length;
  return Status::Ok();
}

uint32_t PosixLockTable::OwnerIndex(Owner owner) {
  auto it = owner_index_.find(owner);
  if (it != owner_index_.end()) return it->second;
  uint32_t idx = static_cast<uint32_t>(owners_.size());
  owners_.push_back(OwnerState{owner, {}, std::nullopt});
  owner_index_.emplace(owner, idx);
  return idx;
}

std::optional<uint32_t> PosixLockTable::FindOwner(Owner owner) const {
  auto it = owner_index_.find(owner);
  if (it == owner_index_.end()) return std::nullopt;
  return it->second;
}

bool PosixLockTable::FcntlBlocked(uint32_t self, PosixType type, uint64_t start, uint64_t end,
                                  std::vector<uint32_t>* blockers) const {
  if (type == PosixType::kUnlock) return false;
  bool blocked = false;
  tree_.ForEachOverlap(start, end, [&](IntervalTree::NodeId n) {
    uint64_t v = tree_.value(n);
    if (ValueOwner(v) == self || !FcntlConflict(ValueType(v), type)) return true;
    blocked = true;
    if (blockers == nullptr) return false;
    if (std::find(blockers->begin(), blockers->end(), ValueOwner(v)) == blockers->end()) {
      blockers->push_back(ValueOwner(v));
    }
    return true;
  });
  return blocked;
}

bool PosixLockTable::FlockBlocked(uint32_t self, FlockType type,
                                  std::vector<uint32_t>* blockers) const {
  if (type == FlockType::kUnlock) return false;
  bool blocked = false;
  for (uint32_t i = 0; i < owners_.size(); ++i) {
    const std::optional<FlockType>& f = owners_[i].flock;
    if (i == self || !f) continue;
    if (type == FlockType::kExclusive || *f == FlockType::kExclusive) {
      blocked = true;
      if (blockers == nullptr) return true;
      blockers->push_back(i);
    }
  }
  return blocked;
}

void PosixLockTable::AddSegment(uint32_t self, uint64_t start, uint64_t end, PosixType type) {
  IntervalTree::NodeId node = tree_.Insert(start, end, EncodeValue(self, type));
  owners_[self].segments.emplace(start, Segment{end, type, node});
}

// Invariant: an owner's segments are disjoint, and two segments of the same
// type never touch (they would have been merged).
void PosixLockTable::ApplyFcntl(uint32_t self, PosixType type, uint64_t start, uint64_t end) {
  std::map<uint64_t, Segment>& segs = owners_[self].segments;
  uint64_t new_start = start;
  uint64_t new_end = end;
  struct Piece {
    uint64_t start, end;
    PosixType type;
  };
  std::vector<Piece> remnants;
  // Step back over segments that overlap or touch `start` from the left (at
  // most two: one starting at or before start, one ending exactly at start).
  auto it = segs.upper_bound(start);
  while (it != segs.begin() && std::prev(it)->second.end >= start) --it;
  while (it != segs.end() && it->first <= end) {
    uint64_t gs = it->first;
    Segment g = it->second;
    bool overlap = gs < end && g.end > start;
    bool same = type != PosixType::kUnlock && g.type == type;
    if (!overlap && !same) {  // touches, other type: stays
      ++it;
      continue;
    }
    if (same) {
      new_start = std::min(new_start, gs);
      new_end = std::max(new_end, g.end);
    } else {
      if (gs < start) remnants.push_back({gs, start, g.type});
      if (g.end > end) remnants.push_back({end, g.end, g.type});
    }
    tree_.Erase(g.node);
    it = segs.erase(it);
  }
  for (const Piece& p : remnants) AddSegment(self, p.start, p.end, p.type);
  if (type != PosixType::kUnlock) AddSegment(self, new_start, new_end, type);
}

bool PosixLockTable::WouldDeadlock(uint32_t self, const std::vector<uint32_t>& blockers) const {
  std::vector<uint32_t> stack = blockers;
  std::unordered_set<uint32_t> seen(blockers.begin(), blockers.end());
  while (!stack.empty()) {
    uint32_t o = stack.back();
    stack.pop_back();
    if (o == self) return true;
    for (const auto& [ticket, w] : waiters_) {
      if (w.owner_index != o || w.is_flock) continue;
      std::vector<uint32_t> next;
      FcntlBlocked(o, w.type, w.start, w.end, &next);
      for (uint32_t n : next) {
        if (seen.insert(n).second) stack.push_back(n);
      }
    }
  }
  return false;
}

void PosixLockTable::WakeWaiters(std::vector<WaitTicket>* granted) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    const Waiter& w = it->second;
    bool ok;
    if (w.is_flock) {
      ok = !FlockBlocked(w.owner_index, w.flock_type, nullptr);
      if (ok) owners_[w.owner_index].flock = w.flock_type;
    } else {
      ok = !FcntlBlocked(w.owner_index, w.type, w.start, w.end, nullptr);
      if (ok) ApplyFcntl(w.owner_index, w.type, w.start, w.end);
    }
    if (ok) {
      if (granted != nullptr) granted->push_back(it->first);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

Status PosixLockTable::SetLock(Owner owner, PosixType type, uint64_t start, uint64_t length,
                               std::vector<WaitTicket>* granted) {
  uint64_t end;
  CLF_RETURN_IF_ERROR(ToRange(start, length, &end));
  uint32_t self = OwnerIndex(owner);
  if (FcntlBlocked(self, type, start, end, nullptr)) {
    return Status(Code::kWouldBlock, "conflicting lock held");
  }
  ApplyFcntl(self, type, start, end);
  WakeWaiters(granted);
  return Status::Ok();
}

Result<PosixWaitResult> PosixLockTable::SetLockWait(Owner owner, PosixType type, uint64_t start,
                                                    uint64_t length,
                                                    std::vector<WaitTicket>* granted) {
  uint64_t end;
  CLF_RETURN_IF_ERROR(ToRange(start, length, &end));
  uint32_t self = OwnerIndex(owner);
  std::vector<uint32_t> blockers;
  if (!FcntlBlocked(self, type, start, end, &blockers)) {
    ApplyFcntl(self, type, start, end);
    WakeWaiters(granted);
    return PosixWaitResult{true, 0};
  }
  if (WouldDeadlock(self, blockers)) return Status(Code::kDeadlock, "lock wait would deadlock");
  WaitTicket t = next_ticket_++;
  waiters_.emplace(t, Waiter{self, false, type, FlockType::kUnlock, start, end});
  return PosixWaitResult{false, t};
}

std::optional<PosixLockInfo> PosixLockTable::GetLock(Owner owner, PosixType type, uint64_t start,
                                                     uint64_t length) const {
  uint64_t end;
  if (type == PosixType::kUnlock || !ToRange(start, length, &end).ok()) return std::nullopt;
  std::optional<uint32_t> self = FindOwner(owner);
  uint32_t me = self ? *self : 0xffffffffu;
  std::optional<PosixLockInfo> found;
  tree_.ForEachOverlap(start, end, [&](IntervalTree::NodeId n) {
    uint64_t v = tree_.value(n);
    if (ValueOwner(v) == me || !FcntlConflict(ValueType(v), type)) return true;
    uint64_t s = tree_.start(n), e = tree_.end(n);
    found =
        PosixLockInfo{owners_[ValueOwner(v)].owner, ValueType(v), s, e == kMaxOffset ? 0 : e - s};
    return false;
  });
  return found;
}

Status PosixLockTable::Flock(Owner owner, FlockType type, std::vector<WaitTicket>* granted) {
  uint32_t self = OwnerIndex(owner);
  std::optional<FlockType>& held = owners_[self].flock;
  if (held && *held == type) return Status::Ok();
  held.reset();  // conversion drops the old lock first, as flock(2) says
  Status s;
  if (FlockBlocked(self, type, nullptr)) {
    s = Status(Code::kWouldBlock, "conflicting flock held");
  } else if (type != FlockType::kUnlock) {
    owners_[self].flock = type;
  }
  WakeWaiters(granted);
  return s;
}

Result<PosixWaitResult> PosixLockTable::FlockWait(Owner owner, FlockType type,
                                                  std::vector<WaitTicket>* granted) {
  uint32_t self = OwnerIndex(owner);
  std::optional<FlockType>& held = owners_[self].flock;
  if (held && *held == type) return PosixWaitResult{true, 0};
  held.reset();
  PosixWaitResult r;
  if (!FlockBlocked(self, type, nullptr)) {
    if (type != FlockType::kUnlock) owners_[self].flock = type;
    r.granted = true;
  } else {
    r.ticket = next_ticket_++;
    waiters_.emplace(r.ticket, Waiter{self, true, PosixType::kUnlock, type, 0, 0});
  }
  WakeWaiters(granted);
  return r;
}

Status PosixLockTable::CancelWait(WaitTicket ticket, std::vector<WaitTicket>* granted) {
  if (waiters_.erase(ticket) == 0) return NotFound("no such waiting lock request");
  WakeWaiters(granted);  // the queue order may have held nobody back, but be safe
  return Status::Ok();
}

void PosixLockTable::DropOwnerLocks(uint32_t index) {
  OwnerState& o = owners_[index];
  for (auto& [start, seg] : o.segments) tree_.Erase(seg.node);
  o.segments.clear();
  o.flock.reset();
}

void PosixLockTable::ReleaseOwner(Owner owner, std::vector<WaitTicket>* granted) {
  std::optional<uint32_t> idx = FindOwner(owner);
  if (!idx) return;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    it = it->second.owner_index == *idx ? waiters_.erase(it) : std::next(it);
  }
  DropOwnerLocks(*idx);
  WakeWaiters(granted);
}

void PosixLockTable::ReleaseSession(SessionId session, std::vector<WaitTicket>* granted,
                                    std::vector<WaitTicket>* cancelled) {
  std::vector<bool> gone(owners_.size(), false);
  for (uint32_t i = 0; i < owners_.size(); ++i) {
    if (owners_[i].owner.session != session) continue;
    gone[i] = true;
    DropOwnerLocks(i);
  }
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (gone[it->second.owner_index]) {
      if (cancelled != nullptr) cancelled->push_back(it->first);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  WakeWaiters(granted);
}

std::vector<PosixLockInfo> PosixLockTable::LocksOf(Owner owner) const {
  std::vector<PosixLockInfo> out;
  std::optional<uint32_t> idx = FindOwner(owner);
  if (!idx) return out;
  for (const auto& [start, seg] : owners_[*idx].segments) {
    out.push_back(
        PosixLockInfo{owner, seg.type, start, seg.end == kMaxOffset ? 0 : seg.end - start});
  }
  return out;
}

std::optional<FlockType> PosixLockTable::FlockOf(Owner owner) const {
  std::optional<uint32_t> idx = FindOwner(owner);
  if (!idx) return std::nullopt;
  return owners_[*idx].flock;
}

}  // namespace clf::locking
