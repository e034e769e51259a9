// Paper 001 on a replicated file's reads (scheduler/copy_plan.h): which copy
// serves each block and in which order, worked by hand from the heuristics'
// definitions (EATF: the earliest-available I/O node takes the pending
// transfer whose compute node is free first).
#include "scheduler/copy_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace clf::scheduler {
namespace {

constexpr uint32_t kServers = 4;

Layout Replicated(uint32_t replicas) {
  Layout l;
  l.stripe_size = 4096;
  l.stripe_count = kServers;
  l.replicas = replicas;
  return l;
}

// `count` one-unit blocks whose units' primary is `primary`.
std::vector<DataBlock> Blocks(size_t count, ServerId primary) {
  std::vector<DataBlock> b(count);
  for (DataBlock& d : b) d = DataBlock{primary, {}, kCopyPlanUnit};
  return b;
}

std::vector<uint32_t> SlotsOf(const std::vector<CopyPick>& picks) {
  std::vector<uint32_t> out;
  for (const CopyPick& p : picks) out.push_back(p.slot);
  return out;
}

std::vector<size_t> OrderOf(const std::vector<CopyPick>& picks) {
  std::vector<size_t> out;
  for (const CopyPick& p : picks) out.push_back(p.block);
  return out;
}

TEST(CopyPlanTest, AnUnreplicatedFileKeepsItsOrderOnItsOneCopy) {
  Result<std::vector<CopyPick>> p =
      PlanCopies(Blocks(3, 1), Replicated(1), kServers, ReadSched::kEatf, 4, {}, 1);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(OrderOf(*p), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(SlotsOf(*p), (std::vector<uint32_t>{0, 0, 0}));
}

// One block: the copy whose server is free first. Server 0 has 10 units in
// flight, its copy in slot 1 lives on server 1, idle.
TEST(CopyPlanTest, ASingleBlockGoesToTheLeastLoadedCopy) {
  const std::vector<Time> busy0{10, 0, 0, 0};
  for (ReadSched s : {ReadSched::kEatf, ReadSched::kSjf, ReadSched::kLcdf, ReadSched::kLddf,
                      ReadSched::kLdsdf}) {
    Result<std::vector<CopyPick>> p = PlanCopies(Blocks(1, 0), Replicated(2), kServers, s, 1, busy0, 1);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(SlotsOf(*p), (std::vector<uint32_t>{1})) << ReadSchedName(s);
  }
  // Idle: the first copy.
  Result<std::vector<CopyPick>> idle =
      PlanCopies(Blocks(1, 0), Replicated(2), kServers, ReadSched::kEatf, 1, {}, 1);
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(SlotsOf(*idle), (std::vector<uint32_t>{0}));
}

TEST(CopyPlanTest, PrimaryAlwaysAsksTheFirstCopy) {
  Result<std::vector<CopyPick>> p = PlanCopies(Blocks(4, 0), Replicated(2), kServers,
                                               ReadSched::kPrimary, 4, {10, 0, 0, 0}, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(SlotsOf(*p), (std::vector<uint32_t>{0, 0, 0, 0}));
}

// Four one-unit blocks of server 0's units, r = 2 (copies on servers 0 and
// 1), four lanes, all idle. EATF: server 0 (free at 0, lower index) takes
// block 0 at 0; server 1 (free at 0) block 1 at 0; server 0 (free at 1)
// block 2 at 1; server 1 block 3 at 1. The copies alternate.
TEST(CopyPlanTest, EatfSpreadsOnePrimarysBlocksOverItsCopies) {
  Result<std::vector<CopyPick>> p =
      PlanCopies(Blocks(4, 0), Replicated(2), kServers, ReadSched::kEatf, 4, {}, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(OrderOf(*p), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(SlotsOf(*p), (std::vector<uint32_t>{0, 1, 0, 1}));
}

// The same with server 1 busy until 8: server 0 is free first at 0, 1, 2
// and 3, so it serves all four blocks.
TEST(CopyPlanTest, EatfAvoidsABusyCopy) {
  Result<std::vector<CopyPick>> p = PlanCopies(Blocks(4, 0), Replicated(2), kServers,
                                               ReadSched::kEatf, 4, {0, 8, 0, 0}, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(SlotsOf(*p), (std::vector<uint32_t>{0, 0, 0, 0}));
}

// Every heuristic gives each block once, with a slot that holds a copy.
TEST(CopyPlanTest, EveryHeuristicPlansEachBlockOnceOnACopy) {
  std::vector<DataBlock> blocks;
  for (ServerId s = 0; s < kServers; ++s) {
    for (uint64_t k = 1; k <= 3; ++k) blocks.push_back(DataBlock{s, {}, k * kCopyPlanUnit});
  }
  for (uint32_t code = 1; code <= kMaxReadSchedCode; ++code) {
    const ReadSched s = ReadSchedFromCode(code);
    Result<std::vector<CopyPick>> p =
        PlanCopies(blocks, Replicated(3), kServers, s, 2, {3, 0, 5, 1}, 7);
    ASSERT_TRUE(p.ok()) << ReadSchedName(s) << ": " << p.status().ToString();
    std::vector<size_t> order = OrderOf(*p);
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < blocks.size(); ++i) EXPECT_EQ(order[i], i) << ReadSchedName(s);
    for (const CopyPick& c : *p) EXPECT_LT(c.slot, 3u) << ReadSchedName(s);
  }
}

TEST(CopyPlanTest, MoreCopiesThanServersIsRefused) {
  EXPECT_FALSE(PlanCopies(Blocks(2, 0), Replicated(3), 2, ReadSched::kEatf, 1, {}, 1).ok());
}

}  // namespace
}  // namespace clf::scheduler
