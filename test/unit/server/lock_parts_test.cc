// The parts of LockOps (server/ops/lock_ops.h) alone: the state file, the
// reclaim grace period on a manual clock, and the wait tokens with their
// deadlines. Nothing here sleeps: deadlines are run by hand (RunDue) and the
// one timer-thread test waits for its outcome on a future.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <vector>

#include "server/ops/lock_grace.h"
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

// ---------------------------------------------------------------- LockGrace

constexpr uint64_t kPrev = 0xaa;
constexpr uint64_t kNow = 0xbb;

PreviousLockState Used(std::set<uint64_t> sessions, bool known = true) {
  PreviousLockState p;
  p.epoch = kPrev;
  p.used = true;
  p.sessions_known = known;
  p.sessions = std::move(sessions);
  return p;
}

v1::SessionRef Ref(uint64_t id, uint64_t epoch = kPrev) {
  v1::SessionRef r;
  r.set_id(id);
  r.set_epoch(epoch);
  return r;
}

v1::ReclaimCompleteRequest Done(uint64_t previous, uint64_t session = 0) {
  v1::ReclaimCompleteRequest r;
  *r.mutable_previous() = Ref(previous);
  if (session != 0) *r.mutable_session() = Ref(session, kNow);
  return r;
}

TEST(LockGraceTest, RunsOnlyAfterAUsedIncarnationThatHadSessions) {
  locking::ManualClock clock;
  PreviousLockState idle = Used({1});
  idle.used = false;
  PreviousLockState same = Used({1});
  same.epoch = kNow;
  for (const PreviousLockState& p : {PreviousLockState{}, idle, same, Used({})}) {
    LockGrace g(0, kNow, p, 1000, &clock);
    EXPECT_FALSE(g.running());
    EXPECT_EQ(g.previous_epoch(), 0u);
    EXPECT_EQ(g.DueAt(), SteadyTime::max());
    EXPECT_EQ(g.LeftMs(), 0u);
    EXPECT_FALSE(g.AdmitReclaim(5, Ref(1)));
  }
  LockGrace zero(0, kNow, Used({1}), 0, &clock);  // grace_ms 0: none
  EXPECT_FALSE(zero.running());
  LockGrace unlisted(0, kNow, Used({}, false), 1000, &clock);  // older record: the full length
  EXPECT_TRUE(unlisted.running());
}

TEST(LockGraceTest, CountsDownOnItsClock) {
  locking::ManualClock clock;
  clock.Advance(std::chrono::seconds(5));
  const SteadyTime start = clock.Now();
  LockGrace g(7, kNow, Used({1}), 1000, &clock);
  ASSERT_TRUE(g.running());
  EXPECT_EQ(g.previous_epoch(), kPrev);
  EXPECT_EQ(g.DueAt(), start + milliseconds(1000));
  EXPECT_EQ(g.LeftMs(), 1000u);
  clock.Advance(milliseconds(400));
  EXPECT_EQ(g.LeftMs(), 600u);
  Status refusal = g.Refusal();
  EXPECT_EQ(refusal.code(), Code::kWouldBlock);
  EXPECT_NE(refusal.message().find("server 7 is in its lock grace period"), std::string::npos);
  EXPECT_NE(refusal.message().find("600 ms left"), std::string::npos);
  clock.Advance(milliseconds(5000));
  EXPECT_EQ(g.LeftMs(), 1u) << "at least 1 while it runs (the timer ends it)";
  std::vector<std::shared_ptr<LockWait>> parked;
  ASSERT_TRUE(g.End(false, &parked));
  EXPECT_EQ(g.LeftMs(), 0u);
  EXPECT_EQ(g.DueAt(), SteadyTime::max());
  EXPECT_EQ(g.previous_epoch(), kPrev) << "kept after the end";
}

TEST(LockGraceTest, EndsEarlyOnceEveryListedSessionIsDone) {
  locking::ManualClock clock;
  LockGrace g(0, kNow, Used({1, 2}), 60000, &clock);
  EXPECT_TRUE(g.AdmitReclaim(10, Ref(1)));
  EXPECT_FALSE(g.AdmitReclaim(11, Ref(1))) << "each old session reclaims once";
  EXPECT_FALSE(g.AdmitReclaim(11, Ref(2, 0xcc))) << "another epoch";
  EXPECT_EQ(g.reclaim_sessions(), 1u);
  Result<LockGrace::Progress> p = g.Complete(Done(1, 10));
  ASSERT_OK(p);
  EXPECT_EQ(*p, LockGrace::Progress::kCounted);
  EXPECT_TRUE(g.running());
  p = g.Complete(Done(2));  // session 2 held nothing
  ASSERT_OK(p);
  EXPECT_EQ(*p, LockGrace::Progress::kAllDone);
  EXPECT_TRUE(g.running()) << "the caller ends it";
  std::vector<std::shared_ptr<LockWait>> parked;
  EXPECT_TRUE(g.End(true, &parked));
  EXPECT_FALSE(g.running());
  EXPECT_EQ(g.reclaim_sessions(), 0u);
  EXPECT_FALSE(g.End(true, &parked)) << "once";
  p = g.Complete(Done(1, 10));
  ASSERT_OK(p);
  EXPECT_EQ(*p, LockGrace::Progress::kOver);
}

TEST(LockGraceTest, UnlistedSessionsNeverEndItEarly) {
  locking::ManualClock clock;
  LockGrace g(0, kNow, Used({1}, /*known=*/false), 60000, &clock);
  for (uint64_t id : {1, 2, 3}) {
    Result<LockGrace::Progress> p = g.Complete(Done(id));
    ASSERT_OK(p);
    EXPECT_EQ(*p, LockGrace::Progress::kCounted);
  }
}

TEST(LockGraceTest, CompleteRefusesWhatDoesNotMatch) {
  locking::ManualClock clock;
  LockGrace g(0, kNow, Used({1, 2}), 60000, &clock);
  ASSERT_TRUE(g.AdmitReclaim(10, Ref(1)));
  v1::ReclaimCompleteRequest other_epoch = Done(2);
  other_epoch.mutable_previous()->set_epoch(0xcc);
  EXPECT_STATUS(Code::kStale, g.Complete(other_epoch));
  EXPECT_STATUS(Code::kStale, g.Complete(Done(0)));
  EXPECT_STATUS(Code::kInvalid, g.Complete(Done(2, 10)));  // 10 reclaimed 1, not 2
  EXPECT_STATUS(Code::kInvalid, g.Complete(Done(1, 11)));  // 11 reclaimed nothing
  EXPECT_STATUS(Code::kInvalid, g.Complete(Done(1)));      // 1 is being reclaimed by 10
  ASSERT_OK(g.Complete(Done(1, 10)));
  EXPECT_OK(g.Complete(Done(1)));  // done already: saying it again is harmless
  // An old session that announced it held nothing cannot reclaim afterwards.
  ASSERT_OK(g.Complete(Done(2)));
  EXPECT_FALSE(g.AdmitReclaim(12, Ref(2)));
}

TEST(LockGraceTest, ReclaimNeedsAnAdmittedSessionWhileItRuns) {
  locking::ManualClock clock;
  LockGrace g(3, kNow, Used({1}), 60000, &clock);
  ASSERT_TRUE(g.AdmitReclaim(10, Ref(1)));
  EXPECT_OK(g.CheckReclaim(10));
  EXPECT_STATUS(Code::kStale, g.CheckReclaim(11));
  g.SessionGone(10);
  EXPECT_STATUS(Code::kStale, g.CheckReclaim(10));
  // The list only decides the early end: an unlisted session of the previous
  // epoch may still reclaim.
  EXPECT_TRUE(g.AdmitReclaim(12, Ref(2)));
  EXPECT_OK(g.CheckReclaim(12));
}

TEST(LockGraceTest, ParkedRequestsAreHandedBackAtTheEnd) {
  locking::ManualClock clock;
  LockGrace g(0, kNow, Used({1}), 60000, &clock);
  auto a = std::make_shared<LockWait>(), b = std::make_shared<LockWait>(),
       c = std::make_shared<LockWait>();
  ASSERT_TRUE(g.Park(a));
  ASSERT_TRUE(g.Park(b));
  ASSERT_TRUE(g.Park(c));
  g.Unpark(b);  // cancelled while parked
  std::vector<std::shared_ptr<LockWait>> parked;
  ASSERT_TRUE(g.End(false, &parked));
  EXPECT_EQ(parked, (std::vector<std::shared_ptr<LockWait>>{a, c}));
  EXPECT_FALSE(g.Park(b)) << "over: the caller serves it now";
  Status s = g.CheckReclaim(1);
  EXPECT_EQ(s.code(), Code::kStale);
  EXPECT_NE(s.message().find("is over"), std::string::npos);
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
