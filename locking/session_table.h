// SessionTable: client sessions and their leases. A session lives until it is
// closed or until its lease (a time-to-live from the last renewal) runs out;
// whoever owns the lock tables then releases the session's locks (the paper's
// stale-lock future work). Time comes from an injected Clock.
// Thread safety: none; the owner serializes calls (LockManager holds its mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "locking/clock.h"
#include "locking/lock_types.h"

namespace clf::locking {

class SessionTable {
 public:
  // `clock` must outlive the table.
  explicit SessionTable(const Clock* clock) : clock_(clock) {}

  // Opens a session whose lease lasts `ttl` (> 0) after each renewal.
  Result<SessionId> Open(Clock::Duration ttl);
  // Extends the lease to now + ttl. kStale if the session expired or is unknown.
  Status Renew(SessionId session);
  // Forgets a live session; kStale if unknown or expired.
  Status Close(SessionId session);
  // True iff the session exists and its lease has not run out at Now().
  bool IsLive(SessionId session) const;
  // Removes and returns the sessions whose lease ran out at or before Now().
  std::vector<SessionId> TakeExpired();
  // When the next lease runs out (TimePoint::max() if there is no session).
  Clock::TimePoint NextExpiry() const;

  size_t size() const { return sessions_.size(); }

 private:
  struct Session {
    Clock::Duration ttl;
    Clock::TimePoint expires;
  };
  const Clock* clock_;
  SessionId next_id_ = 1;
  std::unordered_map<SessionId, Session> sessions_;
  std::set<std::pair<Clock::TimePoint, SessionId>> by_expiry_;
};

}  // namespace clf::locking
