// HandleAllocator: the handles one clfd hands out (server id << 48 | a
// counter). A handle is never given twice, not even across a restart: the
// counter's high-water mark is made durable in the store (kBlock at a time)
// before a handle past it is handed out, and Recover resumes above it.
// Thread safety: thread safe (one mutex for taking counters; HandedOut reads
// an atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "common/handle.h"
#include "common/status.h"
#include "server/store/meta_store.h"

namespace clf::server {

class HandleAllocator {
 public:
  HandleAllocator(ServerId self, RocksMetaStore* store) : self_(self), store_(store) {}

  // At start, before any handle is taken: above every handle in use here and
  // every one handed out before (a handle a lease holder reserved may not be
  // in use yet; a removed file's objects may not be purged yet), and at
  // least min_counter.
  void Recover(uint64_t min_counter);
  // One new handle.
  Result<Handle> New() { return Reserve(1); }
  // `count` consecutive new handles (at least one); returns the first.
  Result<Handle> Reserve(uint32_t count);
  // Whether h's counter was handed out here already (h names this server).
  bool HandedOut(Handle h) const { return (h & kCounterMask) <= counter_.load(); }

  static constexpr uint64_t kBlock = 1u << 16;

 private:
  const ServerId self_;
  RocksMetaStore* const store_;
  std::mutex mu_;                     // serializes Reserve
  std::atomic<uint64_t> counter_{0};  // the last counter handed out (changed under mu_)
  uint64_t limit_ = 0;  // persisted high-water mark ('H'): counters up to it may be in use
};

}  // namespace clf::server
