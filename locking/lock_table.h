// LockTable: the list-lock table of one file (paper 003, DESIGN.md §Locks).
//
// Granted locks live in an IntervalTree of extents, each shared or exclusive
// and owned by an Owner (client session + owner). Two locks conflict when they
// overlap, at least one is exclusive, and their owners differ.
//
// Fairness rule: requests are numbered in arrival order. A request is granted
// iff it conflicts with no granted lock and with no request that arrived
// before it and is still waiting. A request that conflicts with nobody passes
// the queue; one that conflicts with an earlier waiter waits behind it, so a
// large list request is never starved by a stream of small ones. A request is
// granted all at once (every extent) or not at all, and holds nothing while it
// waits.
//
// The table has no threads and never blocks: Acquire() returns kGranted or
// kQueued, and the calls that can unblock waiters (Release, Cancel,
// ReleaseSession) append the ids of the waiters they granted to `*granted`,
// in arrival order. The caller notifies whoever waits (LockManager does).
//
// Lock ids are chosen by the caller and must be unique within the table.
// Complexity: a list of m sorted extents against n granted extents is checked
// in one walk that splits the list around each tree node and granted by a
// treap union, both O(m log(n/m + 1) + k) expected (k overlapping extents
// visited); release is a batch erase of the same cost. A pattern is checked
// extent by extent (O(m log n + k)) while it is walked, without building its
// list. Plus an overlap test against each earlier waiter whose bounds
// intersect the request.
// Thread safety: none; the owner serializes every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "locking/extent_list.h"
#include "locking/interval_tree.h"
#include "locking/lock_request.h"
#include "locking/lock_types.h"

namespace clf::locking {

struct LockTableOptions {
  // A list or pattern expanding to more extents than this is kTooBig.
  size_t max_extents_per_lock = size_t{1} << 22;
};

enum class AcquireOutcome { kGranted, kQueued };

// One granted extent that blocks a request (for diagnostics and F_GETLK-like
// queries on list locks).
struct LockConflict {
  LockId id = kNoLock;
  Owner owner;
  LockMode mode = LockMode::kShared;
  Extent extent;
};

class LockTable {
 public:
  explicit LockTable(LockTableOptions options = {});
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  // Grants now or fails with kWouldBlock (conflict with a granted lock or an
  // earlier waiter). kExists if `id` is in use, kInvalid / kTooBig for bad input.
  Status TryAcquire(LockId id, Owner owner, LockMode mode, const LockRequest& request);
  // Grants now or queues the request under `id`.
  Result<AcquireOutcome> Acquire(LockId id, Owner owner, LockMode mode, const LockRequest& request);

  // Releases a granted lock or cancels a waiting one; kNotFound if unknown.
  Status Release(LockId id, std::vector<LockId>* granted);
  // Cancels a waiting request; kNotFound if unknown, kBusy if already granted.
  Status Cancel(LockId id, std::vector<LockId>* granted);
  // Drops every lock and request of `session` (lease expiry or close). The
  // cancelled waiting ids go to *cancelled, the released granted ids to
  // *released (if not null).
  void ReleaseSession(SessionId session, std::vector<LockId>* granted,
                      std::vector<LockId>* cancelled, std::vector<LockId>* released = nullptr);

  bool IsGranted(LockId id) const;
  bool IsWaiting(LockId id) const;
  // First granted extent blocking `request` (ignoring waiters), if any.
  std::optional<LockConflict> FindConflict(Owner owner, LockMode mode,
                                           const LockRequest& request) const;

  size_t granted_locks() const { return granted_count_; }
  size_t granted_extents() const { return tree_.size(); }
  size_t waiting_requests() const { return waiting_.size(); }
  bool empty() const { return locks_.empty(); }
  const IntervalTree& tree() const { return tree_; }

 private:
  struct Lock {
    LockId id = kNoLock;
    Owner owner;
    LockMode mode = LockMode::kShared;
    uint64_t seq = 0;
    bool granted = false;
    ExtentList extents;                       // what it covers, once materialized
    std::vector<IntervalTree::NodeId> nodes;  // its extents in tree_, when granted
  };

  Status Validate(LockId id, const LockRequest& request) const;
  bool ConflictsWithGranted(const Owner& owner, LockMode mode, const LockRequest& request) const;
  bool ConflictsWithGranted(const Owner& owner, LockMode mode, const ExtentList& extents) const;
  // Does request (extents `e`, bounds `b`) conflict with a waiter of seq < before?
  template <typename Extents>
  bool ConflictsWithWaiters(const Owner& owner, LockMode mode, const Extents& e, Extent b,
                            uint64_t before, const std::vector<uint32_t>* still_waiting) const;
  Result<ExtentList> Materialize(const LockRequest& request) const;
  uint32_t NewSlot(LockId id, Owner owner, LockMode mode);
  void FreeSlot(uint32_t slot);
  void Grant(uint32_t slot);
  void Ungrant(uint32_t slot);
  void WakeWaiters(std::vector<LockId>* granted);
  void Drop(uint32_t slot);

  LockTableOptions options_;
  IntervalTree tree_;  // value = slot in slots_
  std::vector<Lock> slots_;
  std::vector<uint32_t> free_slots_;
  std::unordered_map<LockId, uint32_t> locks_;  // id -> slot
  std::map<uint64_t, uint32_t> waiting_;        // seq -> slot, arrival order
  std::unordered_map<SessionId, std::unordered_set<LockId>> by_session_;
  uint64_t next_seq_ = 1;
  size_t granted_count_ = 0;
};

}  // namespace clf::locking
