// Clock: the time source of leases, injected so tests control time.
// Thread safety: Now() may be called from any thread on both implementations.
#pragma once

#include <atomic>
#include <chrono>

namespace clf::locking {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// The process's monotonic clock.
class SteadyClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  // A process-wide instance (never destroyed).
  static const SteadyClock* Default() {
    static const SteadyClock* clock = new SteadyClock();
    return clock;
  }
};

// A clock that only moves when told to; for tests and simulations.
class ManualClock : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(Duration(ticks_.load())); }
  void Advance(Duration d) { ticks_.fetch_add(d.count()); }

 private:
  std::atomic<Duration::rep> ticks_{0};
};

}  // namespace clf::locking
