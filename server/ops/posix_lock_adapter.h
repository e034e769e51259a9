// PosixLockAdapter: POSIX locks (fcntl record locks and flock) of the lock
// service, one locking::PosixLockTable per file (a part of LockOps,
// server/ops/lock_ops.h, which checks sessions, handles and the grace period
// before it calls in). It keeps per file the owners that hold a lock (with the
// pid they gave and when they first locked, for listings) and the waits queued
// in the table (ticket -> wait token), and drops a file's table once nothing
// is held or queued.
//
// A blocking request is a LockWait in LockWaits; it completes exactly once:
// granted (on the thread of the call that unlocked), withdrawn (Cancel: the
// caller went away or its deadline passed), or failed with its session
// (ReleaseSession). Completions are collected under mu_ and run after it is
// released.
//
// Thread safety: every method may be called from any thread. Lock order: mu_,
// then LockWaits' mutex (Add, Find, Forget); LockWait::mu is never held with
// mu_. No `done` runs with mu_ held.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "clf/v1/lock.pb.h"
#include "common/handle.h"
#include "common/status.h"
#include "locking/posix_lock_table.h"
#include "server/ops/lock_waits.h"

namespace clf::server {

class PosixLockAdapter {
 public:
  // `waits` must outlive the adapter.
  explicit PosixLockAdapter(LockWaits* waits) : waits_(waits) {}
  PosixLockAdapter(const PosixLockAdapter&) = delete;
  PosixLockAdapter& operator=(const PosixLockAdapter&) = delete;

  // Checks the operation and the range of a PosixLock request.
  static Status Check(const v1::PosixLockRequest& r);
  // The request unlocks (fcntl or flock): served even during the grace period.
  static bool IsUnlock(const v1::PosixLockRequest& r);

  // Locks or unlocks; a blocking lock that must wait gives up after `wait`.
  // Returns its wait token, or 0 when `done` already ran.
  uint64_t Lock(const v1::PosixLockRequest& r, LockWait::StatusDone done,
                std::chrono::milliseconds wait);
  // F_GETLK: the first conflicting lock (no client name set).
  Result<v1::TestReply> Test(const v1::PosixLockRequest& r) const;
  // Drops the fcntl (and, if asked, flock) locks of the request's owners.
  void Release(const v1::PosixReleaseRequest& r);
  // Withdraws a queued wait (its cancel_code says why); nothing if it was
  // granted meanwhile.
  void Cancel(const std::shared_ptr<LockWait>& w);
  // Drops every lock and wait of a session that ended; returns the waits to
  // finish: its own (with `code`) and those its locks blocked (granted).
  ReadyWaits ReleaseSession(locking::SessionId session, Code code);

  // Appends the holders and waiters of `handle` (0: of every file), without client names.
  void AppendHolders(Handle handle, v1::ListLocksReply* rep) const;
  void Count(uint64_t* granted, uint64_t* waiting) const;

 private:
  struct File {
    locking::PosixLockTable table;
    std::map<locking::Owner, std::pair<uint32_t, SteadyTime>> owners;  // pid, first lock
    std::map<locking::WaitTicket, uint64_t> waits;                     // ticket -> wait token
  };

  // Moves the waits whose tickets were granted to *ready; needs mu_ held.
  void CollectGrantedLocked(File& f, const std::vector<locking::WaitTicket>& granted,
                            ReadyWaits* ready);
  // Drops owners that hold nothing, and the file if nothing is left; needs mu_ held.
  void MaybeDropFileLocked(Handle h);

  LockWaits* const waits_;
  mutable std::mutex mu_;  // guards files_
  std::map<Handle, File> files_;
};

}  // namespace clf::server
