// ReadGate: a data server's read schedule (paper 000, reads). At most `slots`
// tagged reads are served at once; the others wait in a ServiceQueue
// (scheduler/service_queue.h) and are let in in the order of the clients'
// policy (first-IOS, random-IOS, hash-IOS) instead of arrival order, with the
// queue's bypass bound so none starves. Untagged reads (policy 0: older
// clients, the gRPC path) are not held.
// Thread safety: Await and the turns it returns may be used from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "common/transport/transport.h"
#include "scheduler/service_queue.h"

namespace clf::server {

struct ReadScheduleOptions {
  uint32_t self = 0;         // this server's id: hash-IOS starts at client `self`
  uint32_t slots = 2;        // reads served at once; 0 = no queue
  uint32_t max_bypass = 64;  // see ServiceQueue
};

class ReadGate {
 public:
  explicit ReadGate(ReadScheduleOptions o);
  // Blocks until the read may be served; the turn ends when the result is destroyed.
  std::unique_ptr<transport::DataHandler::ReadTurn> Await(Handle h, uint64_t offset,
                                                          uint32_t sched_tag);

  // Counters (tests, logs): tagged reads that waited, and that were served at once.
  uint64_t waited() const;
  uint64_t immediate() const;

 private:
  class Turn;
  void Leave();

  const ReadScheduleOptions opts_;
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  scheduler::ServiceQueue queue_;
  std::unordered_set<uint64_t> admitted_;  // popped ids whose waiter has not woken yet
  uint32_t busy_ = 0;
  uint64_t next_id_ = 1;
  uint64_t waited_ = 0, immediate_ = 0;
};

}  // namespace clf::server
