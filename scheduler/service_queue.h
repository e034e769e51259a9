// ServiceQueue: the order in which a data server serves the read blocks that
// wait for it (paper 000 §6: for reads "the decision of the order of data
// service is taken by the I/O [server] ... in a similar way" as the client's
// for writes). Each waiting block belongs to a client (its rank) and carries
// the client's order policy; the next block to serve is chosen by:
//  - first-IOS: the lowest (handle, object offset): every server starts with
//    the lowest file offsets, i.e. with client 0 in the paper's benchmark;
//  - hash-IOS: clients in rotation: at step j server `self` serves client
//    (self + j) mod n (the next waiting rank at or after the cursor,
//    cyclically; the cursor starts at `self` and moves past each served rank);
//  - random-IOS: a waiting client drawn at random (seeded), then its oldest
//    block.
// The policy of the oldest waiting block decides (clients normally agree).
// No starvation: a block passed over by `max_bypass` later arrivals is served
// before anything else (oldest first).
// Pure data structure: no threads, no clock. Not thread safe.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "common/sched_settings.h"
#include "scheduler/rng.h"

namespace clf::scheduler {

class ServiceQueue {
 public:
  struct Block {
    uint64_t id = 0;      // the caller's name for the block (unique while waiting)
    uint32_t client = 0;  // the client's rank
    OrderPolicy policy = OrderPolicy::kFirstIos;
    uint64_t handle = 0;  // file
    uint64_t offset = 0;  // object offset of the block's first byte
  };

  ServiceQueue(uint32_t self, uint32_t max_bypass, uint64_t seed)
      : cursor_(self), max_bypass_(max_bypass), rng_(seed) {}

  void Add(const Block& b);
  // Removes the block with this id (a waiter that gave up); false if absent.
  bool Remove(uint64_t id);
  // Removes and returns the block to serve next. The queue must not be empty.
  Block Pop();

  bool empty() const { return waiting_.empty(); }
  size_t size() const { return waiting_.size(); }

 private:
  struct Entry {
    Block block;
    uint64_t seq = 0;       // arrival order
    uint32_t bypassed = 0;  // later arrivals served before it
  };
  size_t PickIndex();

  std::vector<Entry> waiting_;  // in arrival order
  uint64_t next_seq_ = 0;
  uint32_t cursor_;  // hash-IOS: the next rank to serve
  const uint32_t max_bypass_;
  Rng rng_;
};

}  // namespace clf::scheduler
