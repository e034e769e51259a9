// The data path's schedule: requests cut into schedule blocks and ordered by
// each policy (scheduler/data_plan.h), the in-flight window, and the server's
// read service order (scheduler/service_queue.h).
#include "scheduler/data_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "scheduler/service_queue.h"

namespace clf::scheduler {
namespace {

constexpr uint64_t K = 1024;

// (server, logical offset of the first byte) of each block, in send order.
std::vector<std::pair<ServerId, uint64_t>> Heads(const std::vector<DataBlock>& blocks) {
  std::vector<std::pair<ServerId, uint64_t>> out;
  for (const DataBlock& b : blocks) out.emplace_back(b.server, b.pieces.front().logical_offset);
  return out;
}

// Two servers, 4 KiB stripes: server 0 holds [0,4K) [8K,12K) ..., server 1 the others.
const Layout kTwo{4096, 2, 0, 1};

TEST(PlanDataBlocks, CutsEachServersShareIntoBlocksSpanningStripeUnits) {
  const std::vector<DataBlock> blocks =
      PlanDataBlocks(kTwo, 2, 0, 32 * K, OrderPolicy::kFirstIos, 8 * K, 0, 1);
  ASSERT_EQ(blocks.size(), 4u);
  // Block 0: server 0's first 8 KiB = units 0 and 2, local [0, 8K) in two pieces.
  ASSERT_EQ(blocks[0].server, 0u);
  EXPECT_EQ(blocks[0].bytes, 8 * K);
  ASSERT_EQ(blocks[0].pieces.size(), 2u);
  EXPECT_EQ(blocks[0].pieces[0].local_offset, 0u);
  EXPECT_EQ(blocks[0].pieces[0].logical_offset, 0u);
  EXPECT_EQ(blocks[0].pieces[1].local_offset, 4 * K);
  EXPECT_EQ(blocks[0].pieces[1].logical_offset, 8 * K);
  // first-IOS: by file offset of the first byte.
  EXPECT_EQ(Heads(blocks), (std::vector<std::pair<ServerId, uint64_t>>{
                               {0, 0}, {1, 4 * K}, {0, 16 * K}, {1, 20 * K}}));
}

TEST(PlanDataBlocks, HashStartsAtTheSendersRankAndRotates) {
  const std::vector<DataBlock> b1 =
      PlanDataBlocks(kTwo, 2, 0, 32 * K, OrderPolicy::kHashIos, 8 * K, 1, 1);
  EXPECT_EQ(Heads(b1), (std::vector<std::pair<ServerId, uint64_t>>{
                           {1, 4 * K}, {0, 0}, {1, 20 * K}, {0, 16 * K}}));
  const std::vector<DataBlock> b0 =
      PlanDataBlocks(kTwo, 2, 0, 32 * K, OrderPolicy::kHashIos, 8 * K, 4, 1);
  EXPECT_EQ(b0.front().server, 0u);  // rank 4 mod 2 servers
}

TEST(PlanDataBlocks, PaperSettingHashStepJGoesToServerIPlusJ) {
  // Paper 000 §7.1: 8 servers, 64 KiB stripes; client i writes its own region.
  const Layout l{64 << 10, 8, 0, 1};
  const uint64_t region = 2 << 20;
  for (uint32_t i = 0; i < 8; ++i) {
    const std::vector<DataBlock> blocks =
        PlanDataBlocks(l, 8, i * region, region, OrderPolicy::kHashIos, 64 * K, i, 7);
    ASSERT_EQ(blocks.size(), 32u);
    for (size_t j = 0; j < blocks.size(); ++j) {
      EXPECT_EQ(blocks[j].server, (i + j) % 8) << "client " << i << " step " << j;
    }
    // first-IOS sends every client to server 0 first.
    EXPECT_EQ(PlanDataBlocks(l, 8, i * region, region, OrderPolicy::kFirstIos, 64 * K, i, 7)
                  .front()
                  .server,
              0u);
  }
}

TEST(PlanDataBlocks, RandomIsASeededOrderKeepingEachServersStream) {
  const Layout l{4096, 4, 1, 1};
  const auto a = PlanDataBlocks(l, 4, 0, 256 * K, OrderPolicy::kRandomIos, 8 * K, 0, 42);
  const auto b = PlanDataBlocks(l, 4, 0, 256 * K, OrderPolicy::kRandomIos, 8 * K, 0, 42);
  const auto c = PlanDataBlocks(l, 4, 0, 256 * K, OrderPolicy::kRandomIos, 8 * K, 0, 43);
  EXPECT_EQ(Heads(a), Heads(b));
  EXPECT_NE(Heads(a), Heads(c));
  std::map<ServerId, uint64_t> last;
  for (const auto& [s, off] : Heads(a)) {
    if (last.count(s)) {
      EXPECT_GT(off, last[s]);
    }
    last[s] = off;
  }
}

TEST(PlanDataBlocks, EveryByteExactlyOnceForAnyPolicyAndBlock) {
  const Layout l{8192, 3, 2, 1};
  const uint64_t off = 1000, len = 150000;
  for (OrderPolicy p : {OrderPolicy::kFirstIos, OrderPolicy::kRandomIos, OrderPolicy::kHashIos}) {
    for (uint64_t block : {uint64_t{4096}, uint64_t{12288}, uint64_t{1} << 20, uint64_t{0}}) {
      const std::vector<DataBlock> blocks = PlanDataBlocks(l, 5, off, len, p, block, 3, 9);
      std::vector<int> seen(len, 0);
      for (const DataBlock& b : blocks) {
        uint64_t sum = 0;
        EXPECT_LE(b.bytes, block == 0 ? 8192 : block);
        for (const Piece& pc : b.pieces) {
          EXPECT_EQ(pc.server, b.server);
          for (uint64_t x = 0; x < pc.length; ++x) ++seen[pc.logical_offset + x - off];
          sum += pc.length;
        }
        EXPECT_EQ(sum, b.bytes);
      }
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }))
          << OrderPolicyName(p) << " b=" << block;
      // The pieces agree with the layout math byte for byte.
      std::map<uint64_t, std::pair<ServerId, uint64_t>> where;  // logical -> (server, local)
      for (const Piece& pc : MapRange(l, 5, off, len))
        where[pc.logical_offset] = {pc.server, pc.local_offset};
      for (const DataBlock& b : blocks) {
        for (const Piece& pc : b.pieces) {
          auto it = std::prev(where.upper_bound(pc.logical_offset));
          EXPECT_EQ(it->second.first, pc.server);
          EXPECT_EQ(it->second.second + (pc.logical_offset - it->first), pc.local_offset);
        }
      }
    }
  }
}

TEST(PlanDataBlocks, EmptyRangeAndSmallRequestsAreOneBlockPerServer) {
  EXPECT_TRUE(PlanDataBlocks(kTwo, 2, 0, 0, OrderPolicy::kHashIos, 0, 0, 1).empty());
  const auto one =
      PlanDataBlocks(Layout{1 << 20, 4, 0, 1}, 4, 4096, 128 * K, OrderPolicy::kHashIos, 0, 9, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].bytes, 128 * K);
}

TEST(BlockWindow, NeverMoreThanWindowOutstandingAndEveryBlockOnce) {
  BlockWindow w(10, 3);
  std::vector<size_t> started;
  size_t max_in_flight = 0;
  std::vector<size_t> running;
  bool all = false;
  // Finish the oldest running block each round; start whatever the window allows.
  while (!all) {
    while (std::optional<size_t> i = w.Start()) {
      started.push_back(*i);
      running.push_back(*i);
      max_in_flight = std::max(max_in_flight, w.in_flight());
    }
    ASSERT_FALSE(running.empty());
    EXPECT_EQ(running.size(), w.in_flight());
    running.erase(running.begin());
    all = w.Finish();
  }
  EXPECT_EQ(max_in_flight, 3u);
  std::vector<size_t> want(10);
  for (size_t i = 0; i < 10; ++i) want[i] = i;
  EXPECT_EQ(started, want);  // in plan order
  EXPECT_FALSE(w.Start());
  BlockWindow one(2, 0);  // a window of 0 means 1
  EXPECT_TRUE(one.Start());
  EXPECT_FALSE(one.Start());
}

// ---- server read order

std::vector<uint32_t> Clients(ServiceQueue& q) {
  std::vector<uint32_t> out;
  while (!q.empty()) out.push_back(q.Pop().client);
  return out;
}

TEST(ServiceQueue, FirstIosServesLowestOffsetsFirst) {
  ServiceQueue q(5, 0, 1);
  q.Add({1, 3, OrderPolicy::kFirstIos, 7, 300});
  q.Add({2, 1, OrderPolicy::kFirstIos, 7, 100});
  q.Add({3, 2, OrderPolicy::kFirstIos, 7, 200});
  q.Add({4, 0, OrderPolicy::kFirstIos, 6, 900});  // lower handle first
  EXPECT_EQ(Clients(q), (std::vector<uint32_t>{0, 1, 2, 3}));
}

TEST(ServiceQueue, HashRotatesOverClientsStartingAtTheServer) {
  ServiceQueue q(2, 0, 1);
  uint64_t id = 0;
  for (int round = 0; round < 2; ++round) {
    for (uint32_t c = 0; c < 4; ++c) q.Add({++id, c, OrderPolicy::kHashIos, 1, id});
  }
  EXPECT_EQ(Clients(q), (std::vector<uint32_t>{2, 3, 0, 1, 2, 3, 0, 1}));
  // Missing ranks are skipped; the cursor wraps to the lowest waiting rank.
  ServiceQueue r(6, 0, 1);
  r.Add({1, 9, OrderPolicy::kHashIos, 1, 0});
  r.Add({2, 1, OrderPolicy::kHashIos, 1, 0});
  r.Add({3, 4, OrderPolicy::kHashIos, 1, 0});
  EXPECT_EQ(Clients(r), (std::vector<uint32_t>{9, 1, 4}));
}

TEST(ServiceQueue, RandomDrawsClientsAndKeepsEachClientsArrivalOrder) {
  std::vector<std::vector<uint32_t>> orders;
  for (uint64_t seed : {1, 1, 2}) {
    ServiceQueue q(0, 0, seed);
    uint64_t id = 0;
    for (int k = 0; k < 3; ++k) {
      for (uint32_t c = 0; c < 5; ++c) q.Add({++id, c, OrderPolicy::kRandomIos, 1, id});
    }
    std::vector<uint32_t> order;
    std::map<uint32_t, uint64_t> last;
    while (!q.empty()) {
      ServiceQueue::Block b = q.Pop();
      EXPECT_GT(b.id, last[b.client]);
      last[b.client] = b.id;
      order.push_back(b.client);
    }
    orders.push_back(order);
  }
  EXPECT_EQ(orders[0], orders[1]);
  EXPECT_NE(orders[0], orders[2]);
}

TEST(ServiceQueue, NothingStarves) {
  // first-IOS keeps preferring lower offsets; a high-offset block is passed
  // over at most max_bypass times.
  ServiceQueue q(0, 3, 1);
  q.Add({1, 7, OrderPolicy::kFirstIos, 1, 1000000});
  uint64_t id = 1;
  int served_before = 0;
  for (int step = 0; step < 20; ++step) {
    q.Add({++id, 0, OrderPolicy::kFirstIos, 1, static_cast<uint64_t>(step)});
    if (q.Pop().id == 1) break;
    ++served_before;
  }
  EXPECT_EQ(served_before, 3);
  EXPECT_TRUE(q.Remove(id));
  EXPECT_FALSE(q.Remove(12345));
}

}  // namespace
}  // namespace clf::scheduler
