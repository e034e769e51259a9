// RecallPoller: one long poll (Meta.LeaseEvents) per server this mount holds
// directory leases on; the server answers it with the directories another
// client's request recalls, or with nothing after wait_ms, and the poll is
// made again. A poll that fails (the server is gone or restarted: its leases
// went with it) reports the server lost, and it is polled again on a later
// tick. A thread ticks every `tick` (the owner's housekeeping runs then).
//
// Thread safety: every method is thread safe; no hook runs under its lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/handle.h"
#include "common/status.h"

namespace clf::fuse {

class RecallPoller {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // Starts the long poll of `s`; `done` gets the recalled directories.
    std::function<void(ServerId s, uint32_t wait_ms,
                       std::function<void(Result<std::vector<Handle>>)> done)>
        poll;
    std::function<void(ServerId, std::vector<Handle>)> recalled;
    // The poll of `s` failed: its leases are gone.
    std::function<void(ServerId)> lost;
    // Every tick: `lost` holds the servers whose poll failed since the last
    // tick (polled again right after).
    std::function<void(Clock::time_point now, const std::set<ServerId>& lost)> tick;
    std::function<void()> call_begin, call_end;
  };
  RecallPoller(Hooks h, uint32_t wait_ms = 10000,
               Clock::duration tick = std::chrono::milliseconds(500));
  ~RecallPoller();
  RecallPoller(const RecallPoller&) = delete;
  RecallPoller& operator=(const RecallPoller&) = delete;

  // Polls `s` unless it is polled already.
  void Watch(ServerId s);
  // The servers polled now (each gets its session ended at unmount).
  std::set<ServerId> watched() const;
  // No new poll from now on; ends the thread. Polls in flight end by their
  // own answers (the owner ends the servers' sessions).
  void Stop();

 private:
  void Poll(ServerId s);
  void Loop();

  const Hooks hooks_;
  const uint32_t wait_ms_;
  const Clock::duration tick_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<ServerId> polling_;
  std::set<ServerId> repoll_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace clf::fuse
