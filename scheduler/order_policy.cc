#include "scheduler/order_policy.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "scheduler/rng.h"

namespace clf::scheduler {

std::vector<ScheduleBlock> CutIntoScheduleBlocks(std::vector<PeerExtent> extents,
                                                 int64_t block_bytes) {
  std::sort(extents.begin(), extents.end(), [](const PeerExtent& a, const PeerExtent& b) {
    return a.peer != b.peer ? a.peer < b.peer : a.offset < b.offset;
  });
  std::vector<ScheduleBlock> blocks;
  int peer = -1;
  int64_t stream = 0;  // bytes of this peer's stream already in blocks
  int64_t fill = 0;    // bytes in the open block (blocks.back())
  for (const PeerExtent& e : extents) {
    if (e.length <= 0) continue;
    if (e.peer != peer) {
      peer = e.peer;
      stream = 0;
      fill = 0;
    }
    int64_t off = e.offset;
    int64_t left = e.length;
    while (left > 0) {
      if (fill == 0) blocks.push_back({peer, off, stream, 0});
      const int64_t take = std::min(left, block_bytes - fill);
      blocks.back().bytes += take;
      fill = (fill + take) % block_bytes;
      stream += take;
      off += take;
      left -= take;
    }
  }
  std::stable_sort(blocks.begin(), blocks.end(),
                   [](const ScheduleBlock& a, const ScheduleBlock& b) {
                     return a.offset != b.offset ? a.offset < b.offset : a.peer < b.peer;
                   });
  return blocks;
}

std::vector<int> OrderBlocks(OrderPolicy policy, int self, int num_peers,
                             const std::vector<ScheduleBlock>& blocks, uint64_t seed) {
  const int n = static_cast<int>(blocks.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (policy == OrderPolicy::kFirstIos) {
    std::stable_sort(order.begin(), order.end(), [&blocks](int a, int b) {
      return blocks[a].offset != blocks[b].offset ? blocks[a].offset < blocks[b].offset
                                                  : blocks[a].peer < blocks[b].peer;
    });
    return order;
  }
  // Per-peer queues, in the given (offset) order: queue q is
  // flat[next[q], end[q]), filled by a counting sort on the peer.
  std::vector<int> next(num_peers + 1, 0);
  for (const ScheduleBlock& b : blocks) ++next[b.peer + 1];
  for (int q = 0; q < num_peers; ++q) next[q + 1] += next[q];
  std::vector<int> end(next.begin() + 1, next.end());
  std::vector<int> flat(n);
  {
    std::vector<int> fill(next.begin(), next.end() - 1);
    for (int i = 0; i < n; ++i) flat[fill[blocks[i].peer]++] = i;
  }
  order.clear();
  if (policy == OrderPolicy::kHashIos) {
    int q = num_peers > 0 ? ((self % num_peers) + num_peers) % num_peers : 0;
    while (static_cast<int>(order.size()) < n) {
      while (next[q] == end[q]) q = (q + 1) % num_peers;
      order.push_back(flat[next[q]++]);
      q = (q + 1) % num_peers;
    }
    return order;
  }
  // random-IOS: peers with pending blocks in `live`; draw one each step.
  Rng rng(seed);
  std::vector<int> live;
  for (int q = 0; q < num_peers; ++q) {
    if (next[q] < end[q]) live.push_back(q);
  }
  while (!live.empty()) {
    const size_t k = rng.Uniform(live.size());
    const int q = live[k];
    order.push_back(flat[next[q]++]);
    if (next[q] == end[q]) live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return order;
}

}  // namespace clf::scheduler
