// What this client knows of each server's load, for paper 001's read
// scheduling (scheduler/copy_plan.h): the bytes of its requests in flight to
// the server and the rate the server recently served them at. Internal to
// client/.
// Thread safety: thread safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/handle.h"
#include "scheduler/problem.h"

namespace clf::client {

class ServerLoad {
 public:
  explicit ServerLoad(uint32_t servers) : in_flight_(servers, 0), rate_(servers, 0.0) {}

  // A request of `bytes` to `s` starts / ended after `took` (ok: it moved them).
  void Start(ServerId s, uint64_t bytes);
  void Finish(ServerId s, uint64_t bytes, std::chrono::steady_clock::duration took, bool ok);

  // When each server is free, in scheduler::kCopyPlanUnit units at the mean
  // rate of the servers: its bytes in flight, scaled by how much slower or
  // faster than the mean it recently was (unmeasured servers count as the mean).
  std::vector<scheduler::Time> Available() const;

 private:
  mutable std::mutex mu_;
  std::vector<uint64_t> in_flight_;  // bytes
  std::vector<double> rate_;         // bytes/s, moving average; 0 = not measured
};

}  // namespace clf::client
