#include "server/ops/lock_grace.h"

#include <algorithm>
#include <string>

#include "common/log.h"

namespace clf::server {

LockGrace::LockGrace(ServerId self, uint64_t epoch, const PreviousLockState& previous,
                     uint32_t grace_ms, const locking::Clock* clock)
    : self_(self), clock_(clock), started_(clock->Now()) {
  const uint64_t prev = previous.epoch;
  if (!previous.used || prev == 0 || prev == epoch || grace_ms == 0) return;
  if (previous.sessions_known && previous.sessions.empty()) {
    CLF_LOG_INFO("no lock grace period: no lock session was open when epoch {:016x} ended", prev);
    return;
  }
  previous_epoch_ = prev;
  previous_known_ = previous.sessions_known;
  previous_sessions_ = previous.sessions;
  end_ = started_ + std::chrono::milliseconds(grace_ms);
  running_.store(true, std::memory_order_release);
  CLF_LOG_INFO("lock grace period of {} ms: sessions of epoch {:016x} may reclaim their locks ({})",
               grace_ms, prev,
               previous_known_ ? std::to_string(previous_sessions_.size()) +
                                     " session(s) listed: it ends when each is done"
                               : std::string("sessions not listed: it runs its full length"));
}

SteadyTime LockGrace::DueAt() const { return running() ? end_ : SteadyTime::max(); }

uint32_t LockGrace::LeftMs() const {
  if (!running()) return 0;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - clock_->Now());
  return static_cast<uint32_t>(std::max<int64_t>(1, left.count()));
}

Status LockGrace::Refusal() const {
  return Status(
      Code::kWouldBlock,
      "server " + std::to_string(self_) + " is in its lock grace period after a restart (" +
          std::to_string(LeftMs()) +
          " ms left): only locks held before the restart are granted (reclaim); retry later");
}

bool LockGrace::AdmitReclaim(locking::SessionId session, const v1::SessionRef& previous) {
  std::lock_guard<std::mutex> l(mu_);
  if (!running() || previous.epoch() != previous_epoch_ ||
      !reclaimed_.insert(previous.id()).second) {
    return false;
  }
  reclaim_sessions_.insert(session);
  reclaim_of_[session] = previous.id();
  return true;
}

Status LockGrace::CheckReclaim(locking::SessionId session) const {
  std::lock_guard<std::mutex> l(mu_);
  if (!running()) {
    return Status(Code::kStale, "reclaim refused: the lock grace period of server " +
                                    std::to_string(self_) + " is over");
  }
  if (reclaim_sessions_.count(session) == 0) {
    return Status(Code::kStale,
                  "reclaim refused: this session did not reclaim a session of "
                  "the previous incarnation of server " +
                      std::to_string(self_));
  }
  return Status::Ok();
}

Result<LockGrace::Progress> LockGrace::Complete(const v1::ReclaimCompleteRequest& r) {
  bool end = false;
  size_t done = 0, listed = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!running()) return Progress::kOver;
    if (r.previous().epoch() != previous_epoch_ || r.previous().id() == 0) {
      return Status(Code::kStale,
                    "reclaim complete: not a session of the previous incarnation "
                    "of server " +
                        std::to_string(self_));
    }
    if (r.has_session()) {
      auto it = reclaim_of_.find(r.session().id());
      if (it == reclaim_of_.end() || it->second != r.previous().id()) {
        return Invalid("reclaim complete: this session did not reclaim that session");
      }
    } else if (!reclaimed_.insert(r.previous().id()).second &&
               reclaim_done_.count(r.previous().id()) == 0) {
      return Invalid(
          "reclaim complete: that session is being reclaimed; the reclaiming session "
          "says when it is done");
    }
    reclaim_done_.insert(r.previous().id());
    listed = previous_sessions_.size();
    for (uint64_t id : previous_sessions_) done += reclaim_done_.count(id);
    end = previous_known_ && done == listed;
  }
  CLF_LOG_INFO("lock session {} of the previous incarnation is done reclaiming ({} of {} listed)",
               r.previous().id(), done, listed);
  return end ? Progress::kAllDone : Progress::kCounted;
}

void LockGrace::SessionGone(locking::SessionId session) {
  std::lock_guard<std::mutex> l(mu_);
  reclaim_sessions_.erase(session);
}

size_t LockGrace::reclaim_sessions() const {
  std::lock_guard<std::mutex> l(mu_);
  return reclaim_sessions_.size();
}

bool LockGrace::Park(std::shared_ptr<LockWait> w) {
  std::lock_guard<std::mutex> l(mu_);
  if (!running()) return false;
  parked_.push_back(std::move(w));
  return true;
}

void LockGrace::Unpark(const std::shared_ptr<LockWait>& w) {
  std::lock_guard<std::mutex> l(mu_);
  parked_.erase(std::remove(parked_.begin(), parked_.end(), w), parked_.end());
}

bool LockGrace::End(bool early, std::vector<std::shared_ptr<LockWait>>* parked) {
  size_t reclaimers;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!running()) return false;
    running_.store(false, std::memory_order_release);
    parked->swap(parked_);
    reclaimers = reclaim_sessions_.size();
    reclaim_sessions_.clear();
  }
  const auto age =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->Now() - started_).count();
  CLF_LOG_INFO("lock grace period over{}: {} session(s) reclaimed, {} parked request(s) resumed",
               early ? " early (every session of the previous incarnation is done reclaiming) "
                       "after " +
                           std::to_string(age) + " ms"
                     : std::string(),
               reclaimers, parked->size());
  return true;
}

}  // namespace clf::server
