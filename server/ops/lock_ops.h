// LockOps: the lock service logic of one clfd (issue 8, docs/locking.md). No gRPC types.
//
// Serves the locks of the files whose handles this server owns. Two lock spaces
// per file: list locks (locking::LockManager: whole file, range, list, pattern;
// FIFO-fair; ids) and POSIX locks (one locking::PosixLockTable per file: fcntl
// record locks per owner and flock locks). Both belong to client sessions of
// the manager, with leases: a session whose lease runs out loses every lock of
// both kinds and its waiting requests fail with kStale.
//
// Restart: locks are soft state. Every session reference carries the epoch of
// the server incarnation that issued it (a random number drawn at start); a
// reference of another epoch is refused with kStale ("server restarted"), so a
// client learns that its locks are gone instead of colliding with a session id
// of the new incarnation.
//
// Reclaim (NFSv4-like grace period): `state_file` records the epoch and whether
// that incarnation ever opened a session ("used") or stopped cleanly holding no
// lock ("idle"). A start after a "used" incarnation runs a grace period of
// `grace_ms`: a client opens a session naming its session of the previous epoch
// (OpenSession.reclaim; each old session reclaims once) and re-acquires what it
// held with reclaim requests, granted without waiting; meanwhile other
// acquires are refused with kWouldBlock (try) or parked until the grace period
// ends (blocking; their deadline still counts). The server trusts the claims:
// what the clients held before was conflict-free, so their reclaims are too.
// The state file also lists the live sessions (rewritten, fsynced, at every
// session open and end). The grace period ends early, as NFSv4.1's does after
// RECLAIM_COMPLETE, once every session listed for the previous incarnation
// has said it is done: ReclaimComplete from the session that reclaimed it
// (after re-acquiring), or naming only the old session (it held nothing). A
// start after an incarnation that listed no live session runs no grace
// period; a state file without the list (older clfd) runs the full one.
//
// Blocking acquires never block a thread: Acquire and PosixLock return a wait
// token and call `done` exactly once (granted, refused, timed out, cancelled,
// or stale), on whichever thread decided it: the caller's (immediate outcome),
// the thread of the call that released a conflicting lock, or the internal
// timer thread (wait deadline, lease expiry). `done` must not block.
// CancelWait(token) withdraws a waiting request (the caller went away); if the
// request was granted meanwhile and `done` has not yet run, the lock is
// released instead of being handed to nobody.
//
// Parts (each its own header, each thread safe on its own):
//   LockStateFile     the state file: read at start, "idle"/"used" + sessions
//   LockGrace         the reclaim grace period: who may reclaim, parked requests
//   LockClients       who opened each session (name, address, lease) beside
//                     the manager's SessionTable, which alone decides liveness
//   LockWaits         wait tokens, deadlines and the timer thread
//   ListLockAdapter   list locks over the LockManager, with their records
//   PosixLockAdapter  POSIX locks, one PosixLockTable per file
// LockOps checks sessions and handles, holds back requests during the grace
// period and resumes them at its end, routes CancelWait, and composes the
// listings. A listing is built part by part, so under concurrent calls it is
// not one instant's picture (counts() neither).
//
// Thread safety: every method is thread safe and never waits for a lock to be
// granted nor for the network; OpenSession, CloseSession and a session's expiry
// write and fsync the state file when there is one. Lock order: every mutex of the
// parts is a leaf (nothing is taken while it is held) but two: LockStateFile's
// is taken before LockClients', PosixLockAdapter's before LockWaits'. The
// LockManager is never called with any of them held (its calls may expire
// sessions and run OnSessionGone on the calling thread), and its mutex is never
// held while they are taken (its callbacks run after it is released).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clf/v1/lock.pb.h"
#include "common/handle.h"
#include "common/status.h"
#include "locking/clock.h"
#include "locking/lock_manager.h"
#include "server/ops/list_lock_adapter.h"
#include "server/ops/lock_clients.h"
#include "server/ops/lock_grace.h"
#include "server/ops/lock_state_file.h"
#include "server/ops/lock_waits.h"
#include "server/ops/posix_lock_adapter.h"

namespace clf::server {

struct LockOpsOptions {
  uint32_t default_lease_ms = 15000;
  uint32_t min_lease_ms = 500;
  uint32_t max_lease_ms = 600000;
  uint32_t max_wait_ms = 3600000;          // a blocking acquire gives up after at most this
  size_t max_extents = size_t{1} << 20;    // extents of a list, walk steps of a pattern
  size_t max_sessions = 65536;
  size_t max_release_owners = 4096;
  std::chrono::milliseconds tick{100};  // lease expiry check period
  uint32_t grace_ms = 30000;            // reclaim window after a restart that lost locks
  std::string state_file;               // epoch record (see above); empty: no grace period
};

class LockOps {
 public:
  using LockDone = LockWait::LockDone;  // the lock id
  using StatusDone = LockWait::StatusDone;

  // `clock` (leases) must outlive the object; the default is the steady clock.
  // The grace period and wait deadlines always run on the steady clock.
  LockOps(ServerId self, LockOpsOptions options = {},
          const locking::Clock* clock = locking::SteadyClock::Default());
  ~LockOps();
  LockOps(const LockOps&) = delete;
  LockOps& operator=(const LockOps&) = delete;

  uint64_t epoch() const { return epoch_; }
  // The epoch of the previous incarnation whose sessions may reclaim (0: none).
  uint64_t previous_epoch() const { return grace_.previous_epoch(); }
  bool in_grace() const { return grace_.running(); }

  // `peer` is the client's address as the transport saw it (for `clf locks`).
  Result<v1::OpenSessionReply> OpenSession(const v1::OpenSessionRequest& r, std::string peer);
  Result<uint32_t> RenewSession(const v1::SessionRef& s);
  Status CloseSession(const v1::SessionRef& s);
  Result<v1::ReclaimCompleteReply> ReclaimComplete(const v1::ReclaimCompleteRequest& r);

  // List locks. Returns the wait token (0 when `done` already ran).
  uint64_t Acquire(const v1::AcquireRequest& r, LockDone done);
  Status Release(const v1::ReleaseRequest& r);
  Result<v1::TestReply> Test(const v1::AcquireRequest& r);

  // POSIX locks. Returns the wait token (0 when `done` already ran).
  uint64_t PosixLock(const v1::PosixLockRequest& r, StatusDone done);
  Result<v1::TestReply> PosixTest(const v1::PosixLockRequest& r);
  Status PosixRelease(const v1::PosixReleaseRequest& r);

  void CancelWait(uint64_t token);

  // Holders and waiters of `handle` (0: of every file).
  v1::ListLocksReply ListLocks(Handle handle);
  struct Counts {
    uint64_t sessions = 0, granted = 0, waiting = 0;
  };
  Counts counts();
  // Sessions opened to reclaim locks of the previous epoch (0 once the grace period ended).
  size_t reclaim_sessions() const { return grace_.reclaim_sessions(); }

 private:
  Status CheckSession(const v1::SessionRef& s) const;
  Status CheckHandle(Handle h) const;
  // A blocking request's deadline: its wait_ms, 0 and anything above capped at max_wait_ms.
  std::chrono::milliseconds WaitFor(uint32_t wait_ms) const;
  // Records the live sessions in the state file (no-op without one).
  void PersistSessions();
  void OnSessionGone(locking::SessionId s, Code code);
  // Parks a blocking request until the grace period ends; false if it ended
  // already (the caller then serves the request now).
  bool Defer(const std::shared_ptr<LockWait>& w, std::chrono::milliseconds wait);
  // Runs a parked request at the end of the grace period.
  void Resume(const std::shared_ptr<LockWait>& w);
  // CancelWait of a request parked during the grace period (or resumed since).
  void CancelParked(const std::shared_ptr<LockWait>& w);
  // Ends the grace period (once; later calls do nothing). early: every
  // previous session said it was done.
  void EndGrace(bool early = false);

  const ServerId self_;
  const LockOpsOptions options_;
  const uint64_t epoch_;
  LockStateFile state_file_;
  LockGrace grace_;
  locking::LockManager manager_;
  LockClients clients_;
  LockWaits waits_;  // its timer thread runs from the constructor's end to the destructor's start
  ListLockAdapter list_;
  PosixLockAdapter posix_;
};

}  // namespace clf::server
