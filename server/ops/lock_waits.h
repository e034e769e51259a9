// LockWaits: the blocking lock requests in flight of one LockOps (a part of
// LockOps, server/ops/lock_ops.h): wait tokens, their deadlines, and the timer
// thread that withdraws a request whose deadline passed.
//
// A LockWait is one blocking request (a list lock, or a POSIX lock, possibly
// parked during the reclaim grace period). It is registered under a token that
// the caller gets back and may cancel with; it completes exactly once: Finish
// claims it (`finished`), drops its token and deadline, then calls its `done`.
//
// The timer thread wakes every `tick`, at the earliest deadline and at the
// alarm the owner asks for (the end of the grace period), and runs RunDue:
// the alarm when due, then `hooks.cancel(token)` for every request whose
// deadline passed (its cancel_code set to kTimedOut first), then `hooks.tick`
// (lease expiry). The hooks run on the timer thread with no lock of LockWaits
// held, except `alarm_at`, which runs under mu_ and must take no lock.
//
// Thread safety: every method may be called from any thread. Lock order: mu_
// is a leaf (nothing is taken while it is held, no hook is called under it but
// alarm_at); LockWait::mu is a leaf as well and is never held with mu_. Callers
// may hold their own locks when they call Add, Find or Forget (PosixLockAdapter
// holds its mutex).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/handle.h"
#include "common/status.h"
#include "locking/lock_types.h"
#include "locking/posix_lock_table.h"

namespace clf::server {

using SteadyTime = std::chrono::steady_clock::time_point;

// Milliseconds from `since` to now, for listings.
inline uint64_t AgeMs(SteadyTime since) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - since)
                                   .count());
}

// One blocking request in flight. The request's own fields are set before it is
// registered and never change; the fields under `mu` decide its outcome.
struct LockWait {
  using LockDone = std::function<void(Result<uint64_t>)>;  // the lock id
  using StatusDone = std::function<void(Status)>;

  enum class Type { kList, kPosix };
  Type type = Type::kList;
  uint64_t token = 0;
  std::mutex mu;  // guards the fields below
  bool finished = false;
  bool caller_gone = false;
  Code cancel_code = Code::kCancelled;  // kTimedOut once the deadline passed
  // list locks
  uint64_t lock_id = 0;
  bool have_outcome = false;  // decided before lock_id was known
  Status outcome;
  LockDone lock_done;
  // POSIX locks
  Handle handle = 0;
  locking::WaitTicket ticket = 0;
  locking::Owner owner;
  uint32_t pid = 0;
  locking::PosixType posix_type = locking::PosixType::kRead;
  bool is_flock = false;
  uint64_t start = 0, length = 0;
  SteadyTime since;
  StatusDone status_done;
  SteadyTime deadline;  // its entry in LockWaits' deadlines (set under LockWaits::mu_)
  // A blocking request parked during the grace period: kDeferred until the
  // grace period ends, then kResuming while LockOps submits it again, then
  // kForwarded to the wait `forward` (guarded by mu).
  enum class Stage { kNormal, kDeferred, kResuming, kForwarded };
  Stage stage = Stage::kNormal;
  std::function<uint64_t(const std::shared_ptr<LockWait>&, uint32_t wait_ms)> resume;
  uint64_t forward = 0;
  bool cancel_pending = false;
  SteadyTime give_up;
};

// Waits to complete, with their outcome, once the caller released its locks.
using ReadyWaits = std::vector<std::pair<std::shared_ptr<LockWait>, Status>>;

class LockWaits {
 public:
  // What the timer thread does for its owner (see above). All must be set.
  struct Hooks {
    std::function<SteadyTime()> alarm_at;  // time_point::max(): no alarm
    std::function<void()> alarm;
    std::function<void(uint64_t token)> cancel;
    std::function<void()> tick;
  };

  LockWaits(std::chrono::milliseconds tick, Hooks hooks);
  ~LockWaits();  // stops the timer thread
  LockWaits(const LockWaits&) = delete;
  LockWaits& operator=(const LockWaits&) = delete;

  // Starts the timer thread (once). Stop joins it; later calls do nothing.
  void Start();
  void Stop();

  // Registers `w` under a new token (set in w->token) and returns the token.
  uint64_t Add(std::shared_ptr<LockWait> w);
  // The registered wait of `token`; null once it completed.
  std::shared_ptr<LockWait> Find(uint64_t token) const;
  // Withdraws the wait of `token` at `when` (nothing if it completed already).
  void SetDeadline(uint64_t token, SteadyTime when);
  // Drops a wait's token and deadline.
  void Forget(const LockWait& w);
  // Completes `w` exactly once: nothing if it finished already.
  void Finish(const std::shared_ptr<LockWait>& w, Status s);
  void Finish(const std::shared_ptr<LockWait>& w, Result<uint64_t> r);
  // Finishes each wait of `ready` with its status, and clears it.
  void FinishAll(ReadyWaits* ready);
  // Makes the timer thread look at the alarm again.
  void Wake();

  // One pass of the timer thread at `now` (see above); tests call it directly.
  void RunDue(SteadyTime now);

  size_t size() const;

 private:
  // Marks `w` finished; false if it was already.
  bool Claim(const std::shared_ptr<LockWait>& w);
  void TimerLoop();

  const std::chrono::milliseconds tick_;
  const Hooks hooks_;
  mutable std::mutex mu_;                                          // guards everything below
  std::unordered_map<uint64_t, std::shared_ptr<LockWait>> waits_;  // token -> wait
  uint64_t next_token_ = 1;
  std::multimap<SteadyTime, uint64_t> deadlines_;  // -> token
  bool stop_ = false;
  std::condition_variable cv_;
  std::thread timer_;
};

}  // namespace clf::server
