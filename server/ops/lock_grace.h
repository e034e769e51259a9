// LockGrace: the reclaim grace period after a restart that lost locks (a part
// of LockOps, server/ops/lock_ops.h, which describes the rules; NFSv4-like).
//
// It runs from construction when the previous incarnation's record (see
// LockStateFile) says "used", names another epoch, and lists at least one
// session (or predates the list); otherwise it never runs. While it runs:
// sessions that reclaim a session of the previous epoch are admitted (each old
// session once) and only their reclaim requests are granted; blocking requests
// of everyone else are parked here until it ends. It ends once, by End: when
// its time is up (the owner's timer calls End at DueAt) or early, when every
// session listed for the previous incarnation said it is done (Complete).
//
// One fact says whether it runs: `running_`, written only under mu_ (so a
// parked request is never left behind by End) and read without the lock by
// running() and DueAt().
//
// Time comes from the injected clock (LockOps passes the steady clock).
// Thread safety: every method may be called from any thread. Lock order: mu_
// is a leaf; nothing is called under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "clf/v1/lock.pb.h"
#include "common/handle.h"
#include "common/status.h"
#include "locking/clock.h"
#include "locking/lock_types.h"
#include "server/ops/lock_state_file.h"
#include "server/ops/lock_waits.h"

namespace clf::server {

class LockGrace {
 public:
  // Decides from `previous` whether a grace period of `grace_ms` runs for this
  // incarnation (`epoch`) and logs the decision. `clock` must outlive it.
  LockGrace(ServerId self, uint64_t epoch, const PreviousLockState& previous, uint32_t grace_ms,
            const locking::Clock* clock);
  LockGrace(const LockGrace&) = delete;
  LockGrace& operator=(const LockGrace&) = delete;

  bool running() const { return running_.load(std::memory_order_acquire); }
  // The epoch whose sessions may reclaim (0: none). Kept after the end.
  uint64_t previous_epoch() const { return previous_epoch_; }
  // When the time is up (time_point::max() once it is over). Takes no lock.
  SteadyTime DueAt() const;
  // Milliseconds left (0 once it is over, at least 1 while it runs).
  uint32_t LeftMs() const;
  // The refusal of a non-reclaim try request while it runs.
  Status Refusal() const;

  // OpenSession naming `previous`: true if `session` may reclaim it (running,
  // the previous epoch, not reclaimed before).
  bool AdmitReclaim(locking::SessionId session, const v1::SessionRef& previous);
  // A reclaim request of `session`: kStale unless it runs and the session was admitted.
  Status CheckReclaim(locking::SessionId session) const;

  // ReclaimComplete (the caller checked r.session() is live, if set).
  enum class Progress {
    kOver,     // it was over already: nothing to do
    kCounted,  // noted; sessions listed for the previous incarnation are not all done
    kAllDone,  // every listed session is done: the caller ends it (End(true))
  };
  Result<Progress> Complete(const v1::ReclaimCompleteRequest& r);

  // A session of this incarnation ended (it reclaims no more).
  void SessionGone(locking::SessionId session);
  size_t reclaim_sessions() const;

  // Parks a blocking request until the end; false if it is over already.
  bool Park(std::shared_ptr<LockWait> w);
  // Withdraws a parked request (cancelled or timed out).
  void Unpark(const std::shared_ptr<LockWait>& w);

  // Ends it (once) and logs; moves the parked requests to *parked. False if it
  // was over already. early: every previous session said it was done.
  bool End(bool early, std::vector<std::shared_ptr<LockWait>>* parked);

 private:
  const ServerId self_;
  const locking::Clock* const clock_;
  const SteadyTime started_;
  SteadyTime end_;                        // set by the constructor only
  uint64_t previous_epoch_ = 0;           // set by the constructor only
  bool previous_known_ = false;           // the record listed the sessions (constructor only)
  std::set<uint64_t> previous_sessions_;  // ... of the previous incarnation (constructor only)
  std::atomic<bool> running_{false};      // cleared once, by End, under mu_

  mutable std::mutex mu_;                              // guards everything below
  std::set<locking::SessionId> reclaim_sessions_;      // sessions that may reclaim
  std::set<uint64_t> reclaimed_;                       // previous-epoch session ids reclaimed
  std::set<uint64_t> reclaim_done_;                    // previous sessions done reclaiming
  std::map<locking::SessionId, uint64_t> reclaim_of_;  // reclaim session -> previous id
  std::vector<std::shared_ptr<LockWait>> parked_;      // until it ends
};

}  // namespace clf::server
