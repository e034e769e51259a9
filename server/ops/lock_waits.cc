#include "server/ops/lock_waits.h"

namespace clf::server {

LockWaits::LockWaits(std::chrono::milliseconds tick, Hooks hooks)
    : tick_(tick), hooks_(std::move(hooks)) {}

LockWaits::~LockWaits() { Stop(); }

void LockWaits::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (timer_.joinable() || stop_) return;
  timer_ = std::thread([this] { TimerLoop(); });
}

void LockWaits::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

uint64_t LockWaits::Add(std::shared_ptr<LockWait> w) {
  std::lock_guard<std::mutex> l(mu_);
  w->token = next_token_++;
  const uint64_t token = w->token;
  waits_[token] = std::move(w);
  return token;
}

std::shared_ptr<LockWait> LockWaits::Find(uint64_t token) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = waits_.find(token);
  return it == waits_.end() ? nullptr : it->second;
}

void LockWaits::SetDeadline(uint64_t token, SteadyTime when) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = waits_.find(token);
    if (it == waits_.end()) return;  // already completed
    it->second->deadline = when;
    deadlines_.emplace(when, token);
  }
  cv_.notify_all();
}

void LockWaits::Forget(const LockWait& w) {
  std::lock_guard<std::mutex> l(mu_);
  waits_.erase(w.token);
  auto [lo, hi] = deadlines_.equal_range(w.deadline);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == w.token) {
      deadlines_.erase(it);
      break;
    }
  }
}

bool LockWaits::Claim(const std::shared_ptr<LockWait>& w) {
  {
    std::lock_guard<std::mutex> l(w->mu);
    if (w->finished) return false;
    w->finished = true;
  }
  Forget(*w);
  return true;
}

void LockWaits::Finish(const std::shared_ptr<LockWait>& w, Status s) {
  if (!Claim(w)) return;
  if (w->type == LockWait::Type::kList) {
    w->lock_done(s);
  } else {
    w->status_done(s);
  }
}

void LockWaits::Finish(const std::shared_ptr<LockWait>& w, Result<uint64_t> r) {
  if (!Claim(w)) return;
  if (w->type == LockWait::Type::kList) {
    w->lock_done(std::move(r));
  } else {
    w->status_done(r.status());
  }
}

void LockWaits::FinishAll(ReadyWaits* ready) {
  for (auto& [w, s] : *ready) Finish(w, s);
  ready->clear();
}

void LockWaits::Wake() {
  { std::lock_guard<std::mutex> l(mu_); }  // the timer thread is waiting or sees the change
  cv_.notify_all();
}

size_t LockWaits::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return waits_.size();
}

void LockWaits::RunDue(SteadyTime now) {
  if (now >= hooks_.alarm_at()) hooks_.alarm();
  std::vector<std::shared_ptr<LockWait>> expired;
  {
    std::lock_guard<std::mutex> l(mu_);
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      auto it = waits_.find(deadlines_.begin()->second);
      if (it != waits_.end()) expired.push_back(it->second);
      deadlines_.erase(deadlines_.begin());
    }
  }
  for (const std::shared_ptr<LockWait>& w : expired) {
    {
      std::lock_guard<std::mutex> wl(w->mu);
      if (w->finished) continue;
      w->cancel_code = Code::kTimedOut;
    }
    hooks_.cancel(w->token);
  }
}

void LockWaits::TimerLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    SteadyTime next = std::chrono::steady_clock::now() + tick_;
    if (!deadlines_.empty() && deadlines_.begin()->first < next) next = deadlines_.begin()->first;
    if (SteadyTime alarm = hooks_.alarm_at(); alarm < next) next = alarm;
    cv_.wait_until(l, next);
    if (stop_) break;
    const SteadyTime now = std::chrono::steady_clock::now();
    l.unlock();
    RunDue(now);
    hooks_.tick();
    l.lock();
  }
}

}  // namespace clf::server
