// ListLockAdapter: list locks (whole file, range, list of extents, strided
// pattern) of the lock service over locking::LockManager (a part of LockOps,
// server/ops/lock_ops.h, which checks sessions, handles and the grace period
// before it calls in). It decodes requests, keeps a record of every list lock
// granted or waiting (for ownership checks on Release and for listings), and
// runs blocking requests as LockWaits without parking a thread.
//
// A blocking request completes exactly once through LockWaits::Finish or
// OnOutcome: granted (on the thread of the call that released the conflicting
// lock), or refused by the manager (cancelled, stale). Cancel withdraws it; if
// the manager granted it meanwhile and the caller went away, the lock is
// released instead of being handed to nobody.
//
// Thread safety: every method may be called from any thread. Lock order: mu_
// and LockWait::mu are leaves (never held together, nor with LockWaits' mutex);
// the manager is never called with either held.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clf/v1/lock.pb.h"
#include "common/handle.h"
#include "common/status.h"
#include "locking/lock_manager.h"
#include "server/ops/lock_waits.h"

namespace clf::server {

class ListLockAdapter {
 public:
  // A list lock, granted or waiting, for listings and ownership checks.
  struct Record {
    Handle handle = 0;
    locking::Owner owner;
    locking::LockMode mode = locking::LockMode::kShared;
    std::string kind;
    std::vector<Extent> ranges;  // at most kShownRanges
    uint64_t extent_count = 0;
    bool granted = false;
    SteadyTime since;
  };
  static constexpr size_t kShownRanges = 64;

  // `manager` and `waits` must outlive the adapter.
  ListLockAdapter(locking::LockManager* manager, LockWaits* waits, size_t max_extents)
      : manager_(manager), waits_(waits), max_extents_(max_extents) {}
  ListLockAdapter(const ListLockAdapter&) = delete;
  ListLockAdapter& operator=(const ListLockAdapter&) = delete;

  // Checks and decodes the request; fills *rec (not yet granted).
  Result<locking::LockRequest> Decode(const v1::AcquireRequest& r, Record* rec) const;
  // Never waits (a try or a reclaim): `done` runs before it returns.
  void TryLock(Record rec, const locking::LockRequest& req, LockWait::LockDone done);
  // Queues a blocking request that gives up after `wait`. Returns its wait
  // token, or 0 when `done` already ran.
  uint64_t Lock(Record rec, const locking::LockRequest& req, LockWait::LockDone done,
                std::chrono::milliseconds wait);
  // Withdraws the queued request `lock_id` of a cancelled wait.
  void Cancel(uint64_t lock_id);
  Status Release(const v1::ReleaseRequest& r);
  // The first granted lock that conflicts (no client name set).
  Result<v1::TestReply> Test(const v1::AcquireRequest& r) const;
  // Drops the records of the granted locks of a session that ended.
  void DropSession(locking::SessionId session);

  // Appends the holders and waiters of `handle` (0: of every file), without client names.
  void AppendHolders(Handle handle, v1::ListLocksReply* rep) const;
  void Count(uint64_t* granted, uint64_t* waiting) const;

 private:
  // The manager's outcome of a queued request.
  void OnOutcome(const std::shared_ptr<LockWait>& w, Status s);

  locking::LockManager* const manager_;
  LockWaits* const waits_;
  const size_t max_extents_;
  mutable std::mutex mu_;               // guards records_
  std::map<uint64_t, Record> records_;  // list lock id -> record
};

}  // namespace clf::server
