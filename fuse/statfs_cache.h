// statfs answered from a value at most max_age old (as NFS clients and
// ceph-fuse do): the cluster's figure is a sum over every server, each
// reading its disk and store counters, far too slow for programs that call
// statvfs per file (stress-ng's symlink and link stressors, `df` in loops).
// One fetch at a time: callers arriving while it runs wait for its answer.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "client/include/clf/client.h"

namespace clf::fuse {

class StatFsCache {
 public:
  using Clock = std::chrono::steady_clock;
  using Reply = std::function<void(Result<client::StatFs>)>;
  // Starts the fetch; calls its argument once with the cluster's answer.
  using Fetch = std::function<void(Reply)>;

  explicit StatFsCache(Clock::duration max_age) : max_age_(max_age) {}

  // Calls `reply` (on this thread when the cached value is fresh, else on the
  // fetch's completion thread) with a value fetched at most max_age ago. A
  // failed fetch is answered to its waiters and not cached. Thread-safe.
  void Get(const Fetch& fetch, Reply reply);

 private:
  const Clock::duration max_age_;
  std::mutex mu_;
  std::optional<client::StatFs> value_;  // guarded by mu_
  Clock::time_point fetched_{};          // when value_'s fetch started
  bool fetching_ = false;
  std::vector<Reply> waiters_;
};

}  // namespace clf::fuse
