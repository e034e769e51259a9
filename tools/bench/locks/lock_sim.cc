#include "tools/bench/locks/lock_sim.h"

#include <algorithm>
#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include "locking/clock.h"
#include "locking/lock_manager.h"

namespace clf::tools::bench {

using locking::LockManager;
using locking::LockRequest;

const char* MethodName(LockMethod m) {
  switch (m) {
    case LockMethod::kNone:
      return "none";
    case LockMethod::kFile:
      return "file";
    case LockMethod::kRange:
      return "range";
    case LockMethod::kList:
      return "list";
  }
  return "?";
}

namespace {

LockRequest RequestFor(const ClientAccess& a, LockMethod method) {
  switch (method) {
    case LockMethod::kFile:
      return LockRequest::WholeFile();
    case LockMethod::kRange: {
      Extent b = a.extents.Bounds();
      return LockRequest::Range(b.offset, b.length);
    }
    default:
      return LockRequest::List(a.extents);
  }
}

}  // namespace

SimResult RunLockSim(const Workload& w, LockMethod method, const SimOptions& options) {
  SimResult result;
  for (const ClientAccess& a : w.access) {
    uint64_t n = method == LockMethod::kNone   ? 0
                 : method == LockMethod::kList ? a.extents.size()
                                               : 1;
    result.locks_per_client = std::max(result.locks_per_client, n);
  }
  LockManager mgr(locking::SteadyClock::Default());
  std::vector<locking::SessionId> sessions;
  for (int c = 0; c < w.clients; ++c) {
    Result<locking::SessionId> s = mgr.OpenSession(std::chrono::hours(1));
    CLF_CHECK(s.ok());
    sessions.push_back(*s);
  }
  // Holders per file: the paper's "maximum concurrent processes" is per lock
  // table (the tile reader's frames are separate files).
  std::vector<std::atomic<int>> holders(static_cast<size_t>(w.files));
  std::atomic<int> max_holders{0};
  std::atomic<int64_t> lock_ns{0};
  std::atomic<bool> failed{false};
  std::latch ready(w.clients + 1);
  std::latch go(1);
  std::vector<std::thread> threads;
  for (int c = 0; c < w.clients; ++c) {
    threads.emplace_back([&, c] {
      const ClientAccess& a = w.access[c];
      auto hold =
          options.latency + std::chrono::microseconds(static_cast<int64_t>(
                                static_cast<double>(a.bytes) / options.megabytes_per_second));
      ready.count_down();
      go.wait();
      for (int f = 0; f < w.files; ++f) {
        locking::LockId id = locking::kNoLock;
        if (method != LockMethod::kNone) {
          auto t0 = std::chrono::steady_clock::now();
          Result<locking::LockId> r =
              mgr.Lock(static_cast<locking::FileId>(f), locking::Owner{sessions[c], 1},
                       locking::LockMode::kExclusive, RequestFor(a, method),
                       std::chrono::steady_clock::now() + std::chrono::hours(1));
          lock_ns += (std::chrono::steady_clock::now() - t0).count();
          if (!r.ok()) {
            failed = true;
            return;
          }
          id = *r;
        }
        int now = ++holders[static_cast<size_t>(f)];
        int prev = max_holders.load();
        while (now > prev && !max_holders.compare_exchange_weak(prev, now)) {
        }
        std::this_thread::sleep_for(hold);
        --holders[static_cast<size_t>(f)];
        if (id != locking::kNoLock && !mgr.Unlock(id).ok()) failed = true;
      }
    });
  }
  ready.arrive_and_wait();
  auto start = std::chrono::steady_clock::now();
  go.count_down();
  for (std::thread& t : threads) t.join();
  CLF_CHECK(!failed.load());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.max_concurrent = max_holders.load();
  result.lock_seconds = static_cast<double>(lock_ns.load()) * 1e-9;
  return result;
}

}  // namespace clf::tools::bench
