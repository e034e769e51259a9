// PosixLockTable: POSIX record locks (fcntl) and BSD whole-file locks (flock)
// of one file, for the FUSE setlk/getlk/flock mapping.
//
// fcntl rules (as Linux): locks belong to an Owner; an owner's locks never
// conflict with each other. Setting a lock replaces whatever the owner held in
// the range: locks of the same type that overlap or touch are merged into one,
// locks of the other type are cut back (split in two when the new range falls
// inside). Unlocking a part of a lock splits it. A read lock becomes a write
// lock (upgrade) or the reverse (downgrade) by setting the range again; an
// upgrade waits (F_SETLKW) while still holding the read lock. GetLock reports
// one conflicting lock (the lowest-starting one) and its owner, like F_GETLK.
// A blocking request that would close a cycle of owners waiting for each other
// fails with kDeadlock (EDEADLK); Linux checks this for classic POSIX locks.
// Ranges are [start, start + length); length 0 means "to end of file".
//
// flock rules (as Linux): one whole-file shared or exclusive lock per owner (an
// open file description), independent of fcntl locks. Converting a lock first
// drops the old one, so a conversion that fails with kWouldBlock leaves the
// owner unlocked, as flock(2) documents. No deadlock detection (Linux has none).
//
// Waiting: the table never blocks. A blocking request that cannot be granted
// is queued under a WaitTicket; every call that may unblock waiters appends the
// tickets it granted to `*granted` (nullable). Waiters are re-examined in
// arrival order and granted when nothing granted conflicts (POSIX promises no
// fairness; Linux wakes all and lets them race).
//
// Complexity: conflict lookup O(log n + k) through an IntervalTree over all
// owners' locks; set/unlock O((j + 1) log n) for j of the owner's locks touched.
// Memory: a small record per owner ever seen stays for the table's lifetime;
// the embedder drops a file's table when nobody has the file open.
// Thread safety: none; the owner serializes every call.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/status.h"
#include "locking/interval_tree.h"
#include "locking/lock_types.h"

namespace clf::locking {

enum class PosixType : uint8_t { kRead, kWrite, kUnlock };
enum class FlockType : uint8_t { kShared, kExclusive, kUnlock };

struct PosixLockInfo {
  Owner owner;
  PosixType type = PosixType::kRead;
  uint64_t start = 0;
  uint64_t length = 0;  // 0: to end of file
  bool operator==(const PosixLockInfo&) const = default;
};

using WaitTicket = uint64_t;

struct PosixWaitResult {
  bool granted = false;
  WaitTicket ticket = 0;  // set when queued
};

class PosixLockTable {
 public:
  PosixLockTable() = default;
  PosixLockTable(const PosixLockTable&) = delete;
  PosixLockTable& operator=(const PosixLockTable&) = delete;

  // F_SETLK: sets or removes a lock now, or kWouldBlock. kInvalid for a range
  // that overflows.
  Status SetLock(Owner owner, PosixType type, uint64_t start, uint64_t length,
                 std::vector<WaitTicket>* granted);
  // F_SETLKW: sets the lock now or queues it; kDeadlock if waiting would close
  // a cycle.
  Result<PosixWaitResult> SetLockWait(Owner owner, PosixType type, uint64_t start, uint64_t length,
                                      std::vector<WaitTicket>* granted);
  // F_GETLK: the lock that would block (type, range) for `owner`, if any.
  std::optional<PosixLockInfo> GetLock(Owner owner, PosixType type, uint64_t start,
                                       uint64_t length) const;

  // flock(LOCK_SH | LOCK_EX | LOCK_UN, with LOCK_NB): now or kWouldBlock.
  Status Flock(Owner owner, FlockType type, std::vector<WaitTicket>* granted);
  // flock without LOCK_NB: grant now or queue.
  Result<PosixWaitResult> FlockWait(Owner owner, FlockType type, std::vector<WaitTicket>* granted);

  // Withdraws a queued request (interrupted wait); kNotFound if not queued.
  Status CancelWait(WaitTicket ticket, std::vector<WaitTicket>* granted);
  // Close of the owner: drops its fcntl and flock locks and queued requests.
  void ReleaseOwner(Owner owner, std::vector<WaitTicket>* granted);
  // Lease expiry: ReleaseOwner for every owner of the session; the dropped
  // queued tickets go to *cancelled.
  void ReleaseSession(SessionId session, std::vector<WaitTicket>* granted,
                      std::vector<WaitTicket>* cancelled);

  // The owner's fcntl locks in offset order (merged as the kernel keeps them).
  std::vector<PosixLockInfo> LocksOf(Owner owner) const;
  std::optional<FlockType> FlockOf(Owner owner) const;
  size_t waiting() const { return waiters_.size(); }
  bool IsWaiting(WaitTicket ticket) const { return waiters_.count(ticket) != 0; }

 private:
  struct Segment {
    uint64_t end;
    PosixType type;
    IntervalTree::NodeId node;
  };
  struct OwnerState {
    Owner owner;
    std::map<uint64_t, Segment> segments;  // by start; disjoint
    std::optional<FlockType> flock;
  };
  struct Waiter {
    uint32_t owner_index;
    bool is_flock;
    PosixType type;  // fcntl
    FlockType flock_type;
    uint64_t start;
    uint64_t end;
  };

  uint32_t OwnerIndex(Owner owner);
  std::optional<uint32_t> FindOwner(Owner owner) const;
  static Status ToRange(uint64_t start, uint64_t length, uint64_t* end);
  // Owners (indexes) whose fcntl locks block (type, [start, end)) for owner `self`.
  bool FcntlBlocked(uint32_t self, PosixType type, uint64_t start, uint64_t end,
                    std::vector<uint32_t>* blockers) const;
  bool FlockBlocked(uint32_t self, FlockType type, std::vector<uint32_t>* blockers) const;
  void ApplyFcntl(uint32_t self, PosixType type, uint64_t start, uint64_t end);
  void AddSegment(uint32_t self, uint64_t start, uint64_t end, PosixType type);
  bool WouldDeadlock(uint32_t self, const std::vector<uint32_t>& blockers) const;
  void WakeWaiters(std::vector<WaitTicket>* granted);
  void DropOwnerLocks(uint32_t index);

  IntervalTree tree_;  // value = owner index << 1 | (type == kWrite)
  std::vector<OwnerState> owners_;
  std::map<Owner, uint32_t> owner_index_;
  std::map<WaitTicket, Waiter> waiters_;  // arrival order
  WaitTicket next_ticket_ = 1;
};

}  // namespace clf::locking
