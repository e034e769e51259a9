// Paper 000's order policies and their decentralized execution.
#include "scheduler/order_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "scheduler/checker.h"
#include "scheduler/decentralized_run.h"
#include "scheduler/scheduler.h"
#include "scheduler/workload.h"
#include "test/support/test_util.h"

namespace clf::scheduler {
namespace {

TEST(CutIntoScheduleBlocks, SplitsPerPeerAcrossExtents) {
  // Peer 0 holds [0,4) and [8,12); peer 1 holds [4,8). Blocks of 3 bytes.
  const std::vector<ScheduleBlock> b =
      CutIntoScheduleBlocks({{1, 4, 4}, {0, 8, 4}, {0, 0, 4}, {1, 20, 0}}, 3);
  ASSERT_EQ(b.size(), 5u);
  // Sorted by file offset of the first byte.
  EXPECT_EQ(b[0].peer, 0);
  EXPECT_EQ(b[0].offset, 0);
  EXPECT_EQ(b[0].bytes, 3);
  EXPECT_EQ(b[1].peer, 0);  // [3,4) + [8,10): spans two extents
  EXPECT_EQ(b[1].offset, 3);
  EXPECT_EQ(b[1].stream_offset, 3);
  EXPECT_EQ(b[1].bytes, 3);
  EXPECT_EQ(b[2].peer, 1);
  EXPECT_EQ(b[2].offset, 4);
  EXPECT_EQ(b[2].bytes, 3);
  EXPECT_EQ(b[3].peer, 1);
  EXPECT_EQ(b[3].offset, 7);
  EXPECT_EQ(b[3].bytes, 1);
  EXPECT_EQ(b[4].peer, 0);
  EXPECT_EQ(b[4].offset, 10);
  EXPECT_EQ(b[4].stream_offset, 6);
  EXPECT_EQ(b[4].bytes, 2);
}

std::vector<ScheduleBlock> TwoBlocksPerPeer(int peers) {
  std::vector<PeerExtent> e;
  for (int k = 0; k < 2 * peers; ++k) e.push_back({k % peers, k, 1});
  return CutIntoScheduleBlocks(e, 1);
}

std::vector<int> Peers(const std::vector<ScheduleBlock>& blocks, const std::vector<int>& order) {
  std::vector<int> peers;
  for (int i : order) peers.push_back(blocks[i].peer);
  return peers;
}

TEST(OrderBlocks, FirstIosFollowsOffsets) {
  const auto blocks = TwoBlocksPerPeer(4);
  EXPECT_EQ(Peers(blocks, OrderBlocks(OrderPolicy::kFirstIos, 2, 4, blocks, 1)),
            (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(OrderBlocks, HashIosStartsAtOwnIndex) {
  const auto blocks = TwoBlocksPerPeer(4);
  EXPECT_EQ(Peers(blocks, OrderBlocks(OrderPolicy::kHashIos, 2, 4, blocks, 1)),
            (std::vector<int>{2, 3, 0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(Peers(blocks, OrderBlocks(OrderPolicy::kHashIos, 5, 4, blocks, 1)),
            (std::vector<int>{1, 2, 3, 0, 1, 2, 3, 0}));
  // Within a peer the blocks keep their offset order.
  const std::vector<int> order = OrderBlocks(OrderPolicy::kHashIos, 2, 4, blocks, 1);
  EXPECT_LT(blocks[order[0]].offset, blocks[order[4]].offset);
}

TEST(OrderBlocks, HashIosSkipsPeersWithoutData) {
  const auto blocks = CutIntoScheduleBlocks({{0, 0, 2}, {3, 2, 1}}, 1);
  EXPECT_EQ(Peers(blocks, OrderBlocks(OrderPolicy::kHashIos, 1, 4, blocks, 1)),
            (std::vector<int>{3, 0, 0}));
}

TEST(OrderBlocks, RandomIosIsASeededPermutation) {
  const auto blocks = TwoBlocksPerPeer(8);
  const std::vector<int> a = OrderBlocks(OrderPolicy::kRandomIos, 0, 8, blocks, 42);
  EXPECT_EQ(a, OrderBlocks(OrderPolicy::kRandomIos, 0, 8, blocks, 42));
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(sorted[i], i);
  int differ = 0;
  for (uint64_t seed = 1; seed < 20; ++seed) {
    differ += OrderBlocks(OrderPolicy::kRandomIos, 0, 8, blocks, seed) != a ? 1 : 0;
  }
  EXPECT_GT(differ, 15);
  // Per peer, offsets still increase.
  for (int q = 0; q < 8; ++q) {
    int64_t last = -1;
    for (int i : a) {
      if (blocks[i].peer != q) continue;
      EXPECT_GT(blocks[i].offset, last);
      last = blocks[i].offset;
    }
  }
}

TEST(OrderPolicy, ParsesNames) {
  for (OrderPolicy p : {OrderPolicy::kFirstIos, OrderPolicy::kRandomIos, OrderPolicy::kHashIos}) {
    Result<OrderPolicy> q = ParseOrderPolicy(OrderPolicyName(p));
    ASSERT_OK(q);
    EXPECT_EQ(*q, p);
  }
  // Short forms (mount options, setlayout) name the same policies.
  EXPECT_EQ(*ParseOrderPolicy("first"), OrderPolicy::kFirstIos);
  EXPECT_EQ(*ParseOrderPolicy("random"), OrderPolicy::kRandomIos);
  EXPECT_EQ(*ParseOrderPolicy("hash"), OrderPolicy::kHashIos);
  EXPECT_STATUS(Code::kInvalid, ParseOrderPolicy("hashios"));
  EXPECT_STATUS(Code::kInvalid, ParseOrderPolicy("fifo"));
  EXPECT_STATUS(Code::kInvalid, ParseOrderPolicy(""));
}

TEST(RunDecentralized, ReceiverServesFirstComeFirstServed) {
  // Sender 0 and 1 both target receiver 0 at time 0; sender 2 arrives at 1.
  const DecentralizedRun run = RunDecentralized(1, {{{0, 3}}, {{0, 2}}, {{0, 1}}}, {0, 0, 1}, {});
  EXPECT_EQ(run.start[0][0], 0);  // tie at time 0: lower sender first
  EXPECT_EQ(run.start[1][0], 3);
  EXPECT_EQ(run.start[2][0], 5);
  EXPECT_EQ(run.length, 6);
}

TEST(RunDecentralized, BlockedSenderWaitsAndReceiverAvailability) {
  // Sender 0: to r0 (busy until 4 by availability), then r1. Sender 1: r1.
  const DecentralizedRun run = RunDecentralized(2, {{{0, 1}, {1, 1}}, {{1, 2}}}, {}, {4, 0});
  EXPECT_EQ(run.start[0][0], 4);
  EXPECT_EQ(run.start[1][0], 0);
  EXPECT_EQ(run.start[0][1], 5);
  EXPECT_EQ(run.length, 6);
}

TEST(StripedAccess, HashIosIsOptimalFirstIosPipelines) {
  // 8 clients x 8 blocks of 1 stripe unit each to 8 servers: hash-IOS is a
  // perfect rotation (length 8 blocks); first-IOS queues everybody at server 0.
  StripedAccessConfig c;
  c.bytes_per_client = 8;
  c.stripe_unit = 1;
  c.block_bytes = 1;
  Result<Problem> p = MakeStripedAccessProblem(c);
  ASSERT_OK(p);
  ASSERT_EQ(p->transfers.size(), 64u);
  for (const char* name : {"hash-ios", "hash-ios-read"}) {
    auto s = MakeScheduler(name);
    ASSERT_OK(s);
    Result<Schedule> sch = (*s)->Plan(*p);
    ASSERT_OK(sch);
    EXPECT_OK(CheckSchedule(*p, *sch));
    EXPECT_EQ(sch->length, 8) << name;
  }
  auto first = MakeScheduler("first-ios");
  ASSERT_OK(first);
  Result<Schedule> sch = (*first)->Plan(*p);
  ASSERT_OK(sch);
  EXPECT_OK(CheckSchedule(*p, *sch));
  EXPECT_EQ(sch->length, 15);  // 8 steps plus a 7-step pipeline fill
}

TEST(StripedAccess, BlocksLargerThanTheStripeUnitGatherPerServer) {
  StripedAccessConfig c;
  c.clients = 2;
  c.servers = 4;
  c.bytes_per_client = 64;
  c.stripe_unit = 4;
  c.block_bytes = 8;  // two stripe units of the same server per block
  Result<Problem> p = MakeStripedAccessProblem(c);
  ASSERT_OK(p);
  ASSERT_EQ(p->transfers.size(), 16u);  // 2 clients x 4 servers x 16 bytes / 8
  for (const Transfer& t : p->transfers) EXPECT_EQ(t.size, 8);
  EXPECT_STATUS(Code::kInvalid, MakeStripedAccessProblem(StripedAccessConfig{0, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace clf::scheduler
