// DirLeases: which client session holds a lease on which directory of this
// server, recalls, and the requests parked until a recalled lease comes back.
//
// A lease lets one session (a mount) answer lookups in the directory from its
// copy of the listing and acknowledge creates and unlinks before they reach
// this server (it commits them in order with Meta.Commit). Any request of
// another session that names a leased directory is parked here, the holder
// is told (its LeaseEvents poll answers), and the request runs once the holder
// has committed and released, or the lease ran out (lease_ms after its last
// renewal: a dead holder delays others by at most that).
//
// No gRPC types. Thread safety: every method is thread safe; continuations
// (`go`, poll answers) run outside the internal lock, on the caller's thread
// or on the sweeper thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/handle.h"

namespace clf::server {

class DirLeases {
 public:
  using Clock = std::chrono::steady_clock;
  using EventsDone = std::function<void(std::vector<Handle> recalled)>;

  explicit DirLeases(uint32_t lease_ms);
  ~DirLeases();
  DirLeases(const DirLeases&) = delete;
  DirLeases& operator=(const DirLeases&) = delete;

  uint32_t lease_ms() const { return lease_ms_; }
  // Before the gRPC server shuts down: parked requests run, polls answer, no
  // lease is granted any more.
  void Stop();

  // Grants (or renews) `dir` to `session` unless another session holds it or
  // requests are parked on it; false with nothing changed otherwise.
  bool Acquire(uint64_t session, Handle dir);
  // The holder gives `dir` back; parked requests run.
  void Release(uint64_t session, Handle dir);
  // Every lease of the session, and its poll answered empty.
  void EndSession(uint64_t session);
  // True if `session` holds `dir` now (not expired, not recalled-and-expired);
  // renews it (a commit under the lease is a sign of life).
  bool HoldsAndRenew(uint64_t session, Handle dir);

  // Runs `go` now unless one of `dirs` is leased to another session; then the
  // holder is asked to give it back and `go` runs once it did or the lease
  // ran out. session 0 (a client without a session, a peer server) never
  // holds a lease.
  // mutation: `go` changes the directories; until Done(dirs) no lease on them
  // is granted (a listing taken meanwhile could miss the change).
  void Admit(uint64_t session, std::vector<Handle> dirs, bool mutation, std::function<void()> go);
  void Done(const std::vector<Handle>& dirs);

  // The long poll: `done` runs once, with the recalled directories of the
  // session as soon as there are some, or empty after wait_ms.
  void WaitEvents(uint64_t session, uint32_t wait_ms, EventsDone done);

  size_t held() const;  // leases held now (status, tests)

 private:
  struct Lease {
    uint64_t session = 0;
    Clock::time_point expires;
    bool recalled = false;
    std::vector<std::function<void()>> parked;
  };
  struct Poll {
    EventsDone done;
    Clock::time_point until;
  };
  struct SessionEvents {
    std::vector<Handle> recalled;  // not yet delivered
    bool has_poll = false;
    Poll poll;
  };

  // Under mu_: asks the holder of `l` (for `dir`) to give it back.
  void RecallLocked(Handle dir, Lease& l, std::vector<std::function<void()>>* run);
  void SweepLoop();

  const uint32_t lease_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::unordered_map<Handle, Lease> leases_;
  std::unordered_map<uint64_t, SessionEvents> sessions_;
  std::unordered_map<Handle, uint32_t> mutating_;  // admitted mutations not yet done, per dir
  std::thread sweeper_;
};

}  // namespace clf::server
