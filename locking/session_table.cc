#include "locking/session_table.h"

namespace clf::locking {

Result<SessionId> SessionTable::Open(Clock::Duration ttl) {
  if (ttl <= Clock::Duration::zero()) return Invalid("lease ttl must be positive");
  SessionId id = next_id_++;
  Clock::TimePoint expires = clock_->Now() + ttl;
  sessions_.emplace(id, Session{ttl, expires});
  by_expiry_.emplace(expires, id);
  return id;
}

bool SessionTable::IsLive(SessionId session) const {
  auto it = sessions_.find(session);
  return it != sessions_.end() && it->second.expires > clock_->Now();
}

Status SessionTable::Renew(SessionId session) {
  if (!IsLive(session)) return Status(Code::kStale, "session expired or unknown");
  Session& s = sessions_.at(session);
  by_expiry_.erase({s.expires, session});
  s.expires = clock_->Now() + s.ttl;
  by_expiry_.emplace(s.expires, session);
  return Status::Ok();
}

Status SessionTable::Close(SessionId session) {
  if (!IsLive(session)) return Status(Code::kStale, "session expired or unknown");
  Session& s = sessions_.at(session);
  by_expiry_.erase({s.expires, session});
  sessions_.erase(session);
  return Status::Ok();
}

std::vector<SessionId> SessionTable::TakeExpired() {
  std::vector<SessionId> out;
  Clock::TimePoint now = clock_->Now();
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    SessionId id = by_expiry_.begin()->second;
    by_expiry_.erase(by_expiry_.begin());
    sessions_.erase(id);
    out.push_back(id);
  }
  return out;
}

Clock::TimePoint SessionTable::NextExpiry() const {
  return by_expiry_.empty() ? Clock::TimePoint::max() : by_expiry_.begin()->first;
}

}  // namespace clf::locking
