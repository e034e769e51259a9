// How one data request becomes schedule blocks (paper 000): the file's
// schedule settings (its layout's, else this client's, else the cluster
// file's), the blocks in send order with scheduler::PlanDataBlocks, how many
// may be outstanding, and the tag the servers' read queues order by.
// Internal to client/.
// Thread safety: thread safe (the settings are fixed; the request counter is atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/sched_settings.h"
#include "scheduler/data_plan.h"

namespace clf::client {

struct IoPlan {
  std::vector<scheduler::DataBlock> blocks;  // in send order
  uint32_t window = 1;                       // blocks outstanding at most (0 read as 1)
  uint32_t tag = 0;                          // transport::SchedTag of the policy and rank
};

class IoPlanner {
 public:
  // The cluster file's settings with opts' overrides (checked by Client::Open).
  IoPlanner(const ClusterConfig& cluster, const ClientOptions& opts);

  // The schedule settings of a file with layout l.
  SchedSettings SchedFor(const Layout& l) const;
  // [offset, offset + length) of a file with layout l, as schedule blocks.
  IoPlan Plan(const Layout& l, uint64_t offset, uint64_t length);
  // The scheduling tag of a request on a file with layout l.
  uint32_t TagFor(const Layout& l) const;

 private:
  const uint32_t servers_;
  SchedSettings sched_;           // the cluster file's, overridden by ClientOptions
  uint32_t rank_ = 0;             // this client's rank (24 bits)
  std::atomic<uint64_t> seq_{0};  // requests planned: varies random-IOS's seed
};

}  // namespace clf::client
