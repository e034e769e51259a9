// LockManager: the thread-safe face of the lock tables of many files, with
// client sessions, leases and blocking acquisition (paper 003's lock server
// minus the RPC). A server wraps it; tests and benchmarks call it directly.
//
// Locks: TryLock never waits (kWouldBlock). Lock blocks the calling thread
// until the lock is granted or `deadline` passes (kTimedOut; the request is
// withdrawn) or the request is cancelled (kCancelled) or its session's lease
// runs out (kStale). LockAsync never blocks: it returns the id at once and
// calls `done` exactly once with Ok (granted), kCancelled or kStale; a request
// granted at once calls `done` before LockAsync returns. Unlock(id) releases
// everything granted under the id (or withdraws a waiting request).
//
// Callback thread: `done` runs on the thread whose call decided the outcome
// (LockAsync, Unlock, Cancel, CloseSession, ExpireSessions or any call that
// expired a lease), after the manager's mutex is released, so it may call back
// into the manager. A blocked Lock() is woken through a condition variable.
//
// Leases: every owner's session must be open and live. The manager has no
// thread: every public call first expires sessions whose lease ran out, and the
// embedder should call ExpireSessions() periodically (e.g. every ttl/4) so that
// a dead client's locks are released and its waiters woken even when the file
// is idle. Lease time comes from the injected Clock; Lock() deadlines are
// std::chrono::steady_clock time points (the caller's real-time budget).
//
// Thread safety: every method may be called from any thread. One mutex guards
// all state; nothing is called with it held except the tables (lock order: the
// manager's mutex only). The destructor must not race with other calls.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "locking/clock.h"
#include "locking/lock_request.h"
#include "locking/lock_table.h"
#include "locking/lock_types.h"
#include "locking/session_table.h"

namespace clf::locking {

using FileId = uint64_t;

struct LockManagerOptions {
  LockTableOptions table;
  // Called once for every session whose lease ran out, after the manager's
  // mutex is released, on the thread whose call expired it (the embedder uses
  // it to drop state it keeps per session, e.g. POSIX locks). May be empty.
  std::function<void(SessionId)> on_expired;
};

class LockManager {
 public:
  using Callback = std::function<void(Status)>;
  using Deadline = std::chrono::steady_clock::time_point;

  // `clock` must outlive the manager.
  explicit LockManager(const Clock* clock, LockManagerOptions options = {});
  LockManager(const LockManager&) = delete;
  LockManager& operator=(const LockManager&) = delete;

  Result<SessionId> OpenSession(Clock::Duration ttl);
  Status RenewSession(SessionId session);
  // Releases the session's locks and cancels its waiting requests (kCancelled).
  Status CloseSession(SessionId session);
  // Drops every session whose lease ran out; their locks are released and their
  // waiting requests fail with kStale. Returns how many sessions expired.
  size_t ExpireSessions();

  Result<LockId> TryLock(FileId file, Owner owner, LockMode mode, const LockRequest& request);
  Result<LockId> Lock(FileId file, Owner owner, LockMode mode, const LockRequest& request,
                      Deadline deadline);
  Result<LockId> LockAsync(FileId file, Owner owner, LockMode mode, const LockRequest& request,
                           Callback done);
  // Withdraws a waiting request (its waiter gets kCancelled); kBusy if granted.
  Status Cancel(LockId id);
  Status Unlock(LockId id);

  // True iff the session is open and its lease has not run out.
  bool IsLive(SessionId session) const;
  // The first granted extent that blocks `request` for `owner` (waiters
  // ignored), as F_GETLK reports; nullopt if nothing granted conflicts.
  std::optional<LockConflict> FindConflict(FileId file, Owner owner, LockMode mode,
                                           const LockRequest& request) const;

  size_t GrantedLocks(FileId file) const;
  size_t WaitingRequests(FileId file) const;

 private:
  struct Waiter {
    std::condition_variable cv;
    bool done = false;
    Status status;
  };
  struct Pending {
    Callback callback;         // for LockAsync
    Waiter* waiter = nullptr;  // for Lock
  };
  using Deferred = std::vector<std::pair<Callback, Status>>;

  // All *Locked methods need mu_ held.
  void ExpireLocked(Deferred* deferred, size_t* expired);
  void DropSessionLocked(SessionId session, Code code, Deferred* deferred);
  // Completes pending requests: `granted` with Ok, `failed` with `code`.
  void CompleteLocked(const std::vector<LockId>& granted, const std::vector<LockId>& failed,
                      Code code, Deferred* deferred);
  // Starts an acquire; on kQueued registers `pending`.
  Result<AcquireOutcome> StartLocked(FileId file, Owner owner, LockMode mode,
                                     const LockRequest& request, LockId id);
  void MaybeDropTableLocked(FileId file);
  static void Run(Deferred* deferred);

  const Clock* clock_;
  LockManagerOptions options_;
  mutable std::mutex mu_;
  SessionTable sessions_;
  std::unordered_map<FileId, std::unique_ptr<LockTable>> tables_;
  std::unordered_map<LockId, FileId> where_;     // every known lock id
  std::unordered_map<LockId, Pending> pending_;  // queued requests
  LockId next_id_ = 1;
};

}  // namespace clf::locking
