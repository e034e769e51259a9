#include "fuse/statfs_cache.h"

#include <utility>

namespace clf::fuse {

void StatFsCache::Get(const Fetch& fetch, Reply reply) {
  std::unique_lock l(mu_);
  if (value_ && Clock::now() - fetched_ < max_age_) {
    const client::StatFs v = *value_;
    l.unlock();
    return reply(v);
  }
  waiters_.push_back(std::move(reply));
  if (fetching_) return;
  fetching_ = true;
  const Clock::time_point started = Clock::now();
  l.unlock();
  fetch([this, started](Result<client::StatFs> r) {
    std::vector<Reply> waiters;
    {
      std::lock_guard l(mu_);
      if (r.ok()) {
        value_ = *r;
        fetched_ = started;
      }
      fetching_ = false;
      waiters.swap(waiters_);
    }
    for (Reply& w : waiters) w(r);
  });
}

}  // namespace clf::fuse
