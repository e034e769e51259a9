#include "fuse/recall_poller.h"

#include "common/log.h"

namespace clf::fuse {

RecallPoller::RecallPoller(Hooks h, uint32_t wait_ms, Clock::duration tick)
    : hooks_(std::move(h)), wait_ms_(wait_ms), tick_(tick) {
  thread_ = std::thread([this] { Loop(); });
}

RecallPoller::~RecallPoller() { Stop(); }

void RecallPoller::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RecallPoller::Watch(ServerId s) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || !polling_.insert(s).second) return;
  }
  Poll(s);
}

std::set<ServerId> RecallPoller::watched() const {
  std::lock_guard<std::mutex> l(mu_);
  return polling_;
}

void RecallPoller::Poll(ServerId s) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) {
      polling_.erase(s);
      return;
    }
  }
  hooks_.call_begin();
  hooks_.poll(s, wait_ms_, [this, s](Result<std::vector<Handle>> r) {
    bool again = false, lost = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) {
        polling_.erase(s);
      } else if (r.ok()) {
        again = true;
      } else {
        // The server is gone or restarted: its leases are gone with it.
        CLF_LOG_DEBUG("lease events of server {}: {}", s, r.status().ToString());
        lost = true;
        repoll_.insert(s);
      }
    }
    if (lost) hooks_.lost(s);
    if (r.ok() && !r->empty()) hooks_.recalled(s, *r);
    if (again) Poll(s);
    hooks_.call_end();
  });
}

void RecallPoller::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  Clock::time_point next = Clock::now() + tick_;
  while (!stop_) {
    cv_.wait_until(l, next);
    if (stop_) break;
    const Clock::time_point now = Clock::now();
    if (now < next) continue;
    next = now + tick_;
    std::set<ServerId> again;
    again.swap(repoll_);
    l.unlock();
    hooks_.tick(now, again);
    for (ServerId s : again) Poll(s);
    l.lock();
  }
}

}  // namespace clf::fuse
