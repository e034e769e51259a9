// Paper 001 on a replicated file's reads: which copy serves each schedule
// block of one read, and in which order the blocks are sent. The blocks are
// the paper's transfers, this client's window lanes its compute nodes (each
// lane moves one block at a time, as DataClient's workers do), every server
// holding a copy of a block's units an I/O node allowed to serve it, and what
// the client knows of each server's load (bytes it has in flight there, at
// the server's recent rate) the time that server becomes available. The
// heuristic named by ReadSched plans it with the same code `clf sim` runs
// (scheduler/batch_heuristics.h); a single block goes to the copy whose
// server is free first, whatever the heuristic (paper 001's EATF rule for one
// transfer).
// Pure code: no sockets, no threads.
#pragma once

#include <cstdint>
#include <vector>

#include "common/layout.h"
#include "common/sched_settings.h"
#include "common/status.h"
#include "scheduler/data_plan.h"
#include "scheduler/problem.h"

namespace clf::scheduler {

// A block's size in the plan's time unit (4 KiB, at least 1).
inline constexpr uint64_t kCopyPlanUnit = 4096;

struct CopyPick {
  size_t block = 0;   // index into the read's blocks
  uint32_t slot = 0;  // the copy to ask first (ReplicaServer(block.server, slot))
};

// The blocks of one read in send order, each with the copy to ask first.
// `io_available`: per server (n entries, or empty for all idle), when it is
// free, in kCopyPlanUnit units of its own recent speed. `lanes`: blocks this
// client moves at once (>= 1). kPrimary, or an unreplicated layout: the
// blocks in their order, slot 0. `seed` feeds kRandom.
Result<std::vector<CopyPick>> PlanCopies(const std::vector<DataBlock>& blocks, const Layout& l,
                                         uint32_t n, ReadSched policy, uint32_t lanes,
                                         const std::vector<Time>& io_available, uint64_t seed);

}  // namespace clf::scheduler
