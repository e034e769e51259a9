// ReadGate: a data server lets waiting tagged reads in in policy order.
#include "server/data/read_gate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "test/support/test_util.h"

namespace clf::server {
namespace {

// Holds the only slot, queues one read per client, releases, and returns the
// order in which the clients were let in.
std::vector<uint32_t> AdmissionOrder(OrderPolicy policy, uint32_t self,
                                     const std::vector<std::pair<uint32_t, uint64_t>>& reads) {
  ReadGate gate({self, 1, 0});
  const uint32_t code = SchedCode(policy);
  auto holder = gate.Await(1, 0, transport::SchedTag(code, 99));
  EXPECT_NE(holder, nullptr);
  std::mutex mu;
  std::vector<uint32_t> order;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reads.size(); ++i) {
    threads.emplace_back([&, i] {
      auto turn = gate.Await(1, reads[i].second, transport::SchedTag(code, reads[i].first));
      std::lock_guard<std::mutex> l(mu);
      order.push_back(reads[i].first);
    });
    // One at a time, so arrival order is known (the queue must not follow it).
    EXPECT_TRUE(clf::testing::WaitUntil([&] { return gate.waited() >= i + 1; },
                                        std::chrono::seconds(10), std::chrono::milliseconds(1)))
        << "read " << i << " never queued";
  }
  holder.reset();
  for (std::thread& t : threads) t.join();
  return order;
}

TEST(ReadGateTest, WaitingReadsGoInPolicyOrderNotArrivalOrder) {
  // Arrival: clients 3, 0, 2, 1 with decreasing offsets.
  const std::vector<std::pair<uint32_t, uint64_t>> reads = {{3, 400}, {0, 300}, {2, 200}, {1, 100}};
  EXPECT_EQ(AdmissionOrder(OrderPolicy::kHashIos, 1, reads), (std::vector<uint32_t>{1, 2, 3, 0}));
  EXPECT_EQ(AdmissionOrder(OrderPolicy::kFirstIos, 1, reads), (std::vector<uint32_t>{1, 2, 0, 3}));
  std::vector<uint32_t> random = AdmissionOrder(OrderPolicy::kRandomIos, 1, reads);
  std::sort(random.begin(), random.end());
  EXPECT_EQ(random, (std::vector<uint32_t>{0, 1, 2, 3}));
}

TEST(ReadGateTest, UntaggedReadsAndAGateWithoutSlotsAreNotHeld) {
  ReadGate gate({0, 1, 0});
  auto holder = gate.Await(1, 0, transport::SchedTag(SchedCode(OrderPolicy::kHashIos), 0));
  ASSERT_NE(holder, nullptr);
  EXPECT_EQ(gate.Await(1, 0, 0), nullptr);  // untagged: served on arrival
  ReadGate off({0, 0, 0});
  EXPECT_EQ(off.Await(1, 0, transport::SchedTag(1, 0)), nullptr);
  EXPECT_EQ(gate.immediate(), 1u);
  EXPECT_EQ(gate.waited(), 0u);
}

}  // namespace
}  // namespace clf::server
