// CheckSchedule catches every kind of violation; LowerBound terms.
#include "scheduler/checker.h"

#include <gtest/gtest.h>

#include "scheduler/problem.h"
#include "test/support/test_util.h"

namespace clf::scheduler {
namespace {

// Two compute nodes, two I/O nodes: t0 = (c0, size 2, {0,1}), t1 = (c1, 3, {1}),
// t2 = (c0, 1, {0}).
Problem Small() {
  Problem p;
  p.num_compute_nodes = 2;
  p.num_io_nodes = 2;
  p.transfers = {{0, 2, {0, 1}}, {1, 3, {1}}, {0, 1, {0}}};
  return p;
}

Schedule Good() {
  Schedule s;
  s.placements = {{0, 0}, {1, 0}, {0, 2}};
  s.length = 3;
  return s;
}

TEST(CheckSchedule, AcceptsValid) { EXPECT_OK(CheckSchedule(Small(), Good())); }

TEST(CheckSchedule, RejectsWrongCount) {
  Schedule s = Good();
  s.placements.pop_back();
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(Small(), s));
}

TEST(CheckSchedule, RejectsNodeWithoutReplica) {
  Schedule s = Good();
  s.placements[1].io_node = 0;  // t1 lives only on I/O node 1
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(Small(), s));
}

TEST(CheckSchedule, RejectsComputeNodeOverlap) {
  Schedule s = Good();
  s.placements[2] = {0, 1};  // c0 still busy with t0 until 2 (also I/O node 0)
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(Small(), s));
  Problem p = Small();
  p.transfers[2].io_nodes = {0, 1};
  s.placements[0] = {0, 0};
  s.placements[1] = {1, 10};
  s.placements[2] = {1, 1};  // only c0 overlaps now
  s.length = 13;
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(p, s));
}

TEST(CheckSchedule, RejectsIoNodeOverlap) {
  Schedule s = Good();
  s.placements[0] = {1, 1};  // I/O node 1 runs t1 during [0, 3)
  s.placements[2] = {0, 3};
  s.length = 4;
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(Small(), s));
}

TEST(CheckSchedule, BackToBackIsFine) {
  Schedule s = Good();  // t2 starts exactly when t0 ends, on the same nodes
  EXPECT_EQ(s.placements[2].start, 2);
  EXPECT_OK(CheckSchedule(Small(), s));
}

TEST(CheckSchedule, RejectsStartBeforeAvailability) {
  Problem p = Small();
  p.compute_available = {0, 1};
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(p, Good()));  // t1 at 0 on c1
  p.compute_available = {};
  p.io_available = {1, 0};
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(p, Good()));  // t0 at 0 on io 0
}

TEST(CheckSchedule, RejectsWrongLength) {
  Schedule s = Good();
  s.length = 4;
  EXPECT_STATUS(Code::kInvalid, CheckSchedule(Small(), s));
}

TEST(CheckSchedule, EmptyProblem) {
  Problem p;
  p.num_io_nodes = 1;
  EXPECT_OK(CheckSchedule(p, Schedule{}));
  EXPECT_EQ(LowerBound(p), 0);
}

TEST(Validate, RejectsMalformed) {
  Problem p = Small();
  EXPECT_OK(p.Validate());
  p.transfers[0].size = 0;
  EXPECT_STATUS(Code::kInvalid, p.Validate());
  p = Small();
  p.transfers[0].io_nodes = {};
  EXPECT_STATUS(Code::kInvalid, p.Validate());
  p = Small();
  p.transfers[0].io_nodes = {1, 1};
  EXPECT_STATUS(Code::kInvalid, p.Validate());
  p = Small();
  p.transfers[0].io_nodes = {2};
  EXPECT_STATUS(Code::kInvalid, p.Validate());
  p = Small();
  p.transfers[0].compute_node = -1;
  EXPECT_STATUS(Code::kInvalid, p.Validate());
  p = Small();
  p.io_available = {0};
  EXPECT_STATUS(Code::kInvalid, p.Validate());
}

TEST(LowerBound, ComputeNodeLoad) {
  EXPECT_EQ(LowerBound(Small()), 3);  // c0 carries 2 + 1; io 1 is forced 3; water level 3
  Problem p = Small();
  p.compute_available = {10, 0};
  EXPECT_EQ(LowerBound(p), 13);
}

TEST(LowerBound, ForcedIoLoad) {
  Problem p;
  p.num_compute_nodes = 3;
  p.num_io_nodes = 2;
  p.transfers = {{0, 4, {1}}, {1, 4, {1}}, {2, 1, {0, 1}}};
  EXPECT_EQ(LowerBound(p), 8);
}

TEST(LowerBound, WaterLevelOverIoNodes) {
  Problem p;
  p.num_compute_nodes = 6;
  p.num_io_nodes = 2;
  for (int c = 0; c < 6; ++c) p.transfers.push_back({c, 3, {0, 1}});
  EXPECT_EQ(LowerBound(p), 9);  // 18 units over two I/O nodes
  p.io_available = {0, 6};
  EXPECT_EQ(LowerBound(p), 12);  // (18 + 6) / 2
  p.io_available = {0, 30};
  EXPECT_EQ(LowerBound(p), 18);  // node 1 cannot help
}

TEST(TimeInOrder, AppendsAsSoonAsPossible) {
  const Problem p = Small();
  const Schedule s = TimeInOrder(p, {{1, 1}, {0, 1}, {2, 0}});
  EXPECT_EQ(s.placements[1].start, 0);
  EXPECT_EQ(s.placements[0].start, 3);  // waits for io 1
  EXPECT_EQ(s.placements[2].start, 5);  // waits for c0; no back-filling
  EXPECT_EQ(s.length, 6);
  EXPECT_OK(CheckSchedule(p, s));
}

}  // namespace
}  // namespace clf::scheduler
