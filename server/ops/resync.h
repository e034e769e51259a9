// Resyncer: brings stale copies of replicated files current, in the
// background, on the server that holds their acting primary
// (docs/ARCHITECTURE.md "Replicated data"). A file is queued when its
// metadata server says its replica state changed or that a copy is still
// stale (Replication::Changed; M repeats that every few seconds while a
// copy is stale, so work lost to a restart is found again). Each stale copy
// is copied over in chunks, in order with the object's writes, then cut,
// synced and marked current on M with no write in between.
//
// Throttle: while this server has served a client's data request in the
// last kBusyMs, each chunk is followed by a pause kPauseFactor times as long
// as the chunk took, so resync takes at most about a third of the disk from
// client I/O, and the worker runs at nice 10 so client requests get the CPU
// first; an idle server resyncs at full speed.
// Thread safety: thread safe; one worker thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "server/ops/replication.h"

namespace clf::server {

class Resyncer {
 public:
  explicit Resyncer(Replication* replication);
  ~Resyncer();
  Resyncer(const Resyncer&) = delete;
  Resyncer& operator=(const Resyncer&) = delete;

  // Queues h (once until it is taken).
  void Enqueue(Handle h);
  // A client's data request arrived (the throttle's signal).
  void NoteForeground() {
    last_foreground_ms_.store(NowMs(), std::memory_order_relaxed);
  }

  static constexpr uint64_t kChunk = 1u << 20;
  static constexpr int64_t kBusyMs = 200;
  static constexpr int kPauseFactor = 2;
  // Progress (metrics, status): bytes copied, copies made current, copies
  // whose resync failed (retried when M asks again), the copy in progress.
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t resynced() const { return resynced_.load(std::memory_order_relaxed); }
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }
  bool busy() const { return busy_.load(std::memory_order_relaxed); }

 private:
  static int64_t NowMs();
  void Run();
  Status One(const Replication::CopyWork& w);

  Replication* const replication_;
  std::mutex mu_;  // guards queue_, queued_, stop_
  std::condition_variable cv_;
  std::deque<Handle> queue_;
  std::unordered_set<Handle> queued_;
  bool stop_ = false;
  std::atomic<int64_t> last_foreground_ms_{0};
  std::atomic<uint64_t> bytes_{0}, resynced_{0}, failed_{0};
  std::atomic<bool> busy_{false};
  std::thread worker_;  // last: starts after the fields it uses
};

}  // namespace clf::server
