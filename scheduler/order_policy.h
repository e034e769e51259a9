// The decentralized order policies of paper 000 (Isaila et al., "On
// evaluating decentralized parallel I/O scheduling strategies for parallel
// file systems", §6). A node that sends data to several peers (a client
// writing to I/O servers, or an I/O server answering reads of several
// clients) cuts its data for each peer into schedule blocks of b bytes and
// sends them one at a time in an order chosen locally, with no central point
// of decision:
//  - first-IOS: in order of file offsets;
//  - random-IOS: a peer drawn at random (seeded) among the peers with pending
//    blocks, then that peer's next block in offset order;
//  - hash-IOS: at step j node i sends to peer (i + j) mod n.
// Pure functions; thread safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/sched_settings.h"
#include "common/status.h"

namespace clf::scheduler {

// The enum and its names live in common/sched_settings.h (the cluster file, layouts and
// mount options name a policy); the scheduler and the data path share them.
using ::clf::OrderPolicy;
using ::clf::OrderPolicyName;
using ::clf::ParseOrderPolicy;

// Bytes of a request held by (write) or destined to (read) one peer.
struct PeerExtent {
  int peer = 0;
  int64_t offset = 0;  // file offset
  int64_t length = 0;
};

// One unit of scheduling: up to b bytes for one peer. A block covers bytes
// [stream_offset, stream_offset + bytes) of the concatenation, in file-offset
// order, of that peer's extents; it may span several extents (non-contiguous
// list I/O), and `offset` is the file offset of its first byte.
struct ScheduleBlock {
  int peer = 0;
  int64_t offset = 0;
  int64_t stream_offset = 0;
  int64_t bytes = 0;
};

// Cuts each peer's extents (any order; empty ones ignored) into schedule
// blocks of `block_bytes` (> 0); the last block of a peer may be shorter.
// Returned in increasing file offset (ties by peer).
std::vector<ScheduleBlock> CutIntoScheduleBlocks(std::vector<PeerExtent> extents,
                                                 int64_t block_bytes);

// The order in which node `self` sends `blocks` (which must be sorted by
// increasing offset within each peer, as CutIntoScheduleBlocks returns them):
// a permutation of block indices. Peers are in [0, num_peers).
//
// Choices: first-IOS sorts by (offset, peer), stable. hash-IOS only counts
// steps at peers that still have blocks: after sending to peer q, the next
// step goes to the first peer at or after q + 1 (cyclically) with pending
// blocks, starting at self mod num_peers; with equal amounts for every peer,
// as in the paper's setting, this is exactly (self + j) mod n. random-IOS
// draws from Rng(seed), so a node should pass its own seed.
std::vector<int> OrderBlocks(OrderPolicy policy, int self, int num_peers,
                             const std::vector<ScheduleBlock>& blocks, uint64_t seed);

}  // namespace clf::scheduler
