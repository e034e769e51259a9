// The parts of LockOps (server/ops/lock_ops.h) alone: the state file, and the
// wait tokens with their deadlines. Nothing here sleeps: deadlines are run by
// hand (RunDue) and the one timer-thread test waits for its outcome on a future.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <vector>

#include "server/ops/lock_state_file.h"
#include "server/ops/lock_waits.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

using std::chrono::milliseconds;

// ---------------------------------------------------------------- LockStateFile

class LockStateFileTest : public ::testing::Test {
 protected:
  std::string Path() const { return dir_.str() + "/lock_state"; }
  void WriteRaw(const std::string& text) const { std::ofstream(Path()) << text; }
  clf::testing::TempDir dir_;
};

TEST_F(LockStateFileTest, UsedRecordListsTheLiveSessions) {
  LockStateFile file(Path(), 0xabc);
  EXPECT_FALSE(file.marked_used());
  file.WriteUsed([] { return std::vector<uint64_t>{3, 1, 2}; });
  EXPECT_TRUE(file.marked_used());
  PreviousLockState prev = LockStateFile(Path(), 0xdef).Read();
  EXPECT_EQ(prev.epoch, 0xabcu);
  EXPECT_TRUE(prev.used);
  EXPECT_TRUE(prev.sessions_known);
  EXPECT_EQ(prev.sessions, (std::set<uint64_t>{1, 2, 3}));
}

TEST_F(LockStateFileTest, IdleRecordAndEmptyList) {
  LockStateFile file(Path(), 0x1234);
  file.WriteIdle();
  PreviousLockState prev = file.Read();
  EXPECT_EQ(prev.epoch, 0x1234u);
  EXPECT_FALSE(prev.used);
  EXPECT_FALSE(prev.sessions_known);
  file.WriteUsed([] { return std::vector<uint64_t>{}; });
  prev = file.Read();
  EXPECT_TRUE(prev.used);
  EXPECT_TRUE(prev.sessions_known);
  EXPECT_TRUE(prev.sessions.empty());
}

TEST_F(LockStateFileTest, OlderOrTruncatedRecordsDoNotListTheSessions) {
  WriteRaw("00000000000000aa used\n");  // an older clfd: no list
  PreviousLockState prev = LockStateFile(Path(), 1).Read();
  EXPECT_EQ(prev.epoch, 0xaau);
  EXPECT_TRUE(prev.used);
  EXPECT_FALSE(prev.sessions_known);
  WriteRaw("00000000000000aa used\nsessions 3 1 2\n");  // cut short
  prev = LockStateFile(Path(), 1).Read();
  EXPECT_TRUE(prev.used);
  EXPECT_FALSE(prev.sessions_known);
}

TEST_F(LockStateFileTest, NoFileOrNoPathReadsNothing) {
  EXPECT_EQ(LockStateFile(Path(), 1).Read().epoch, 0u);  // not written yet
  LockStateFile none("", 1);
  EXPECT_FALSE(none.enabled());
  none.WriteUsed([] { return std::vector<uint64_t>{1}; });
  none.WriteIdle();
  EXPECT_FALSE(none.marked_used());
  EXPECT_EQ(none.Read().epoch, 0u);
  EXPECT_FALSE(std::filesystem::exists(Path()));
}

// ---------------------------------------------------------------- LockWaits

// Hooks that record what the timer would do; cancel finishes the wait as
// LockOps' CancelWait ends up doing for a timed-out wait.
struct Recorder {
  SteadyTime alarm_at = SteadyTime::max();
  int alarms = 0, ticks = 0;
  std::vector<uint64_t> cancelled;
  LockWaits* waits = nullptr;
  LockWaits::Hooks Hooks() {
    return LockWaits::Hooks{
        .alarm_at = [this] { return alarm_at; },
        .alarm = [this] { ++alarms; },
        .cancel =
            [this](uint64_t token) {
              cancelled.push_back(token);
              if (std::shared_ptr<LockWait> w = waits->Find(token)) {
                waits->Finish(w, Status(w->cancel_code, "timed out"));
              }
            },
        .tick = [this] { ++ticks; },
    };
  }
};

std::shared_ptr<LockWait> ListWait(std::vector<Status>* outcomes) {
  auto w = std::make_shared<LockWait>();
  w->type = LockWait::Type::kList;
  w->lock_done = [outcomes](Result<uint64_t> r) { outcomes->push_back(r.status()); };
  return w;
}

TEST(LockWaitsTest, TokensAreUniqueAndForgotten) {
  Recorder rec;
  LockWaits waits(milliseconds(100), rec.Hooks());
  auto a = std::make_shared<LockWait>(), b = std::make_shared<LockWait>();
  const uint64_t ta = waits.Add(a), tb = waits.Add(b);
  EXPECT_NE(ta, 0u);
  EXPECT_NE(ta, tb);
  EXPECT_EQ(a->token, ta);
  EXPECT_EQ(waits.Find(tb), b);
  EXPECT_EQ(waits.size(), 2u);
  waits.Forget(*a);
  EXPECT_EQ(waits.Find(ta), nullptr);
  EXPECT_EQ(waits.size(), 1u);
}

TEST(LockWaitsTest, FinishCompletesExactlyOnce) {
  Recorder rec;
  LockWaits waits(milliseconds(100), rec.Hooks());
  std::vector<Status> outcomes;
  std::shared_ptr<LockWait> w = ListWait(&outcomes);
  const uint64_t token = waits.Add(w);
  // A grant and a cancellation race: whichever claims it first completes it.
  waits.Finish(w, Result<uint64_t>(uint64_t{42}));
  waits.Finish(w, Status(Code::kCancelled, "lock wait cancelled"));
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_OK(outcomes[0]);
  EXPECT_TRUE(w->finished);
  EXPECT_EQ(waits.Find(token), nullptr);

  auto p = std::make_shared<LockWait>();
  p->type = LockWait::Type::kPosix;
  std::vector<Status> posix;
  p->status_done = [&posix](Status s) { posix.push_back(s); };
  waits.Add(p);
  ReadyWaits ready{{p, Status::Ok()}, {p, Status(Code::kStale, "gone")}};
  waits.FinishAll(&ready);
  EXPECT_TRUE(ready.empty());
  ASSERT_EQ(posix.size(), 1u);
  EXPECT_OK(posix[0]);
}

TEST(LockWaitsTest, RunDueWithdrawsOnlyWaitsPastTheirDeadline) {
  Recorder rec;
  LockWaits waits(milliseconds(100), rec.Hooks());
  rec.waits = &waits;
  std::vector<Status> outcomes;
  const SteadyTime t0 = std::chrono::steady_clock::now();
  std::shared_ptr<LockWait> early = ListWait(&outcomes), late = ListWait(&outcomes),
                            done = ListWait(&outcomes), gone = ListWait(&outcomes);
  waits.Add(early);
  waits.Add(late);
  waits.Add(done);
  waits.Add(gone);
  waits.SetDeadline(early->token, t0 + milliseconds(10));
  waits.SetDeadline(late->token, t0 + milliseconds(20));
  waits.SetDeadline(done->token, t0 + milliseconds(10));
  waits.SetDeadline(gone->token, t0 + milliseconds(10));
  waits.Finish(done, Result<uint64_t>(uint64_t{1}));  // granted before its deadline
  waits.Forget(*gone);                                // its deadline goes with it

  waits.RunDue(t0 + milliseconds(9));
  EXPECT_TRUE(rec.cancelled.empty());
  waits.RunDue(t0 + milliseconds(10));
  EXPECT_EQ(rec.cancelled, std::vector<uint64_t>{early->token});
  EXPECT_EQ(early->cancel_code, Code::kTimedOut);
  EXPECT_EQ(late->cancel_code, Code::kCancelled);
  waits.RunDue(t0 + milliseconds(15));
  EXPECT_EQ(rec.cancelled.size(), 1u) << "a deadline fires once";
  waits.RunDue(t0 + milliseconds(20));
  EXPECT_EQ(rec.cancelled, (std::vector<uint64_t>{early->token, late->token}));
  ASSERT_EQ(outcomes.size(), 3u);  // done's grant, then the two timeouts
  EXPECT_OK(outcomes[0]);
  EXPECT_EQ(outcomes[1].code(), Code::kTimedOut);
  EXPECT_EQ(outcomes[2].code(), Code::kTimedOut);
  EXPECT_EQ(waits.size(), 0u);
  // A deadline set after the wait completed is ignored.
  waits.SetDeadline(early->token, t0);
  waits.RunDue(t0 + milliseconds(30));
  EXPECT_EQ(rec.cancelled.size(), 2u);
  EXPECT_EQ(rec.alarms, 0);
  EXPECT_EQ(rec.ticks, 0) << "RunDue leaves the tick to the timer thread";
}

TEST(LockWaitsTest, RunDueRingsTheAlarmOnceDue) {
  Recorder rec;
  LockWaits waits(milliseconds(100), rec.Hooks());
  const SteadyTime t0 = std::chrono::steady_clock::now();
  rec.alarm_at = t0 + milliseconds(5);
  waits.RunDue(t0);
  EXPECT_EQ(rec.alarms, 0);
  waits.RunDue(t0 + milliseconds(5));
  EXPECT_EQ(rec.alarms, 1);
}

TEST(LockWaitsTest, TimerThreadWithdrawsAWaitAtItsDeadline) {
  std::promise<Status> outcome;
  std::atomic<int> alarms{0};
  LockWaits* self = nullptr;
  LockWaits waits(milliseconds(100),
                  LockWaits::Hooks{
                      .alarm_at = [] { return SteadyTime::max(); },
                      .alarm = [&alarms] { ++alarms; },
                      .cancel =
                          [&self](uint64_t token) {
                            if (std::shared_ptr<LockWait> w = self->Find(token)) {
                              self->Finish(w, Status(w->cancel_code, "lock wait timed out"));
                            }
                          },
                      .tick = [] {},
                  });
  self = &waits;
  waits.Start();
  auto w = std::make_shared<LockWait>();
  w->type = LockWait::Type::kPosix;
  w->status_done = [&outcome](Status s) { outcome.set_value(s); };
  waits.Add(w);
  waits.SetDeadline(w->token, std::chrono::steady_clock::now() + milliseconds(1));
  std::future<Status> f = outcome.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get().code(), Code::kTimedOut);
  waits.Stop();
  waits.Stop();  // idempotent
  EXPECT_EQ(alarms.load(), 0);
  EXPECT_EQ(waits.size(), 0u);
}

}  // namespace
}  // namespace clf::server
