// Directory leases (server/ops/dir_leases.h): who holds what, parked requests,
// recalls through the events poll, expiry, and the in-flight-mutation rule.
#include "server/ops/dir_leases.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace clf::server {
namespace {

constexpr Handle kDir = 0x1000000000005;
constexpr Handle kOtherDir = 0x1000000000006;
constexpr uint64_t kA = 11, kB = 22;

TEST(DirLeasesTest, OneHolderAtATime) {
  DirLeases l(60000);
  EXPECT_TRUE(l.Acquire(kA, kDir));
  EXPECT_TRUE(l.Acquire(kA, kDir));  // renewal
  EXPECT_FALSE(l.Acquire(kB, kDir));
  EXPECT_FALSE(l.Acquire(0, kOtherDir));  // no session, no lease
  EXPECT_TRUE(l.Acquire(kB, kOtherDir));
  EXPECT_EQ(l.held(), 2u);
  EXPECT_TRUE(l.HoldsAndRenew(kA, kDir));
  EXPECT_FALSE(l.HoldsAndRenew(kB, kDir));
  l.Release(kB, kDir);  // not B's: nothing happens
  EXPECT_TRUE(l.HoldsAndRenew(kA, kDir));
  l.Release(kA, kDir);
  EXPECT_FALSE(l.HoldsAndRenew(kA, kDir));
  EXPECT_TRUE(l.Acquire(kB, kDir));
}

TEST(DirLeasesTest, HolderPassesOthersParkUntilRelease) {
  DirLeases l(60000);
  ASSERT_TRUE(l.Acquire(kA, kDir));
  bool holder_ran = false, other_ran = false, unrelated_ran = false;
  l.Admit(kA, {kDir}, true, [&] { holder_ran = true; });
  EXPECT_TRUE(holder_ran);
  l.Done({kDir});
  l.Admit(kB, {kOtherDir}, true, [&] { unrelated_ran = true; });
  EXPECT_TRUE(unrelated_ran);
  l.Done({kOtherDir});
  std::promise<std::vector<Handle>> recalled;
  l.WaitEvents(kA, 60000, [&](std::vector<Handle> r) { recalled.set_value(std::move(r)); });
  l.Admit(kB, {kDir}, true, [&] { other_ran = true; });
  EXPECT_FALSE(other_ran);  // parked
  // The holder is told at once.
  auto f = recalled.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(f.get(), std::vector<Handle>{kDir});
  // A recalled lease is not renewed and not granted again to its holder.
  EXPECT_FALSE(l.Acquire(kA, kDir));
  l.Release(kA, kDir);
  EXPECT_TRUE(other_ran);
  // B's change is in flight (not Done): no lease meanwhile.
  EXPECT_FALSE(l.Acquire(kA, kDir));
  l.Done({kDir});
  EXPECT_TRUE(l.Acquire(kA, kDir));
}

TEST(DirLeasesTest, RecallQueuedWithoutAPollIsDeliveredToTheNextPoll) {
  DirLeases l(60000);
  ASSERT_TRUE(l.Acquire(kA, kDir));
  bool ran = false;
  l.Admit(0, {kDir}, false, [&] { ran = true; });  // a peer or a client without a session
  EXPECT_FALSE(ran);
  std::vector<Handle> got;
  bool answered = false;
  l.WaitEvents(kA, 60000, [&](std::vector<Handle> r) {
    got = std::move(r);
    answered = true;
  });
  EXPECT_TRUE(answered);  // answered inline: the recall was waiting
  EXPECT_EQ(got, std::vector<Handle>{kDir});
  l.EndSession(kA);
  EXPECT_TRUE(ran);
}

TEST(DirLeasesTest, ExpiryFreesParkedRequestsAndAnswersPolls) {
  DirLeases l(1000);
  ASSERT_TRUE(l.Acquire(kA, kDir));
  std::atomic<bool> ran{false};
  l.Admit(kB, {kDir}, false, [&] { ran = true; });
  EXPECT_FALSE(ran.load());
  // The holder never answers: the lease runs out (1 s) and B goes on.
  for (int i = 0; i < 300 && !ran.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(l.HoldsAndRenew(kA, kDir));
  std::promise<std::vector<Handle>> empty;
  l.WaitEvents(kB, 50, [&](std::vector<Handle> r) { empty.set_value(std::move(r)); });
  auto f = empty.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(f.get().empty());
}

TEST(DirLeasesTest, StopRunsEverythingParked) {
  bool ran = false, polled = false;
  {
    DirLeases l(60000);
    ASSERT_TRUE(l.Acquire(kA, kDir));
    l.WaitEvents(kB, 60000, [&](std::vector<Handle>) { polled = true; });
    l.Admit(kB, {kDir}, true, [&] { ran = true; });
    l.Stop();
    EXPECT_TRUE(ran);
    EXPECT_TRUE(polled);
    EXPECT_FALSE(l.Acquire(kA, kOtherDir));
  }
}

}  // namespace
}  // namespace clf::server
