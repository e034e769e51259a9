// LockOps (the Lock service's logic, no gRPC) directly: the request limits
// the integration suite checks over raw gRPC, here with small limits so a
// test needs no 12 MiB request (the TSan run skips that one).
#include "server/ops/lock_ops.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "common/handle.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

class LockOpsLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LockOpsOptions o;
    o.max_extents = 4;
    ops_ = std::make_unique<LockOps>(0, o);
    v1::OpenSessionRequest r;
    r.set_client_name("unit");
    Result<v1::OpenSessionReply> s = ops_->OpenSession(r, "test");
    ASSERT_OK(s);
    session_ = s->session();
  }
  Result<uint64_t> AcquireList(int extents) {
    v1::AcquireRequest r;
    *r.mutable_session() = session_;
    r.set_handle(MakeHandle(0, 42));
    r.set_kind(v1::LOCK_LIST);
    r.set_mode(v1::LOCK_EXCLUSIVE);
    for (int i = 0; i < extents; ++i) {
      v1::LockExtent* e = r.add_extents();
      e->set_offset(uint64_t(i) * 10);
      e->set_length(1);
    }
    Result<uint64_t> got = Unavailable("no answer");
    ops_->Acquire(r, [&](Result<uint64_t> id) { got = std::move(id); });
    return got;
  }
  std::unique_ptr<LockOps> ops_;
  v1::SessionRef session_;
};

TEST_F(LockOpsLimitTest, ListPastMaxExtentsIsTooBig) {
  Result<uint64_t> over = AcquireList(5);
  EXPECT_EQ(over.status().code(), Code::kTooBig) << over.status().ToString();
  EXPECT_NE(over.status().message().find("at most 4"), std::string::npos);
  // At the limit it is granted, and nothing of the refused one is held.
  EXPECT_OK(AcquireList(4));
  EXPECT_EQ(AcquireList(0).status().code(), Code::kInvalid);
}

// ---------------------------------------------------------------- waits, cancel, grace

// The outcome of one blocking call, whichever thread delivers it.
class Outcome {
 public:
  LockOps::LockDone ForLock() {
    return [this](Result<uint64_t> r) { Set(r.status(), r.ok() ? *r : 0); };
  }
  LockOps::StatusDone ForStatus() {
    return [this](Status s) { Set(s, 0); };
  }
  bool has() {
    std::lock_guard<std::mutex> l(mu_);
    return status_.has_value();
  }
  int calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  // Waits for the outcome (a condition wait, bounded so a bug fails the test).
  Status Get() {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, std::chrono::seconds(30), [&] { return status_.has_value(); })) {
      return Unavailable("no outcome");
    }
    return *status_;
  }
  uint64_t id() {
    std::lock_guard<std::mutex> l(mu_);
    return id_;
  }

 private:
  void Set(Status s, uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    ++calls_;
    if (!status_) status_ = s;
    id_ = id;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Status> status_;
  uint64_t id_ = 0;
  int calls_ = 0;
};

class LockOpsWaitTest : public ::testing::Test {
 protected:
  void Start(LockOpsOptions o = {}) { ops_ = std::make_unique<LockOps>(0, o); }
  v1::SessionRef Open(const std::string& name, const v1::SessionRef* reclaim = nullptr,
                      bool* reclaimed = nullptr) {
    v1::OpenSessionRequest r;
    r.set_client_name(name);
    if (reclaim != nullptr) *r.mutable_reclaim() = *reclaim;
    Result<v1::OpenSessionReply> s = ops_->OpenSession(r, name + "-addr");
    EXPECT_OK(s);
    if (reclaimed != nullptr) *reclaimed = s.ok() && s->reclaim();
    return s.ok() ? s->session() : v1::SessionRef();
  }
  static v1::AcquireRequest Whole(const v1::SessionRef& s, bool wait, uint32_t wait_ms = 0) {
    v1::AcquireRequest r;
    *r.mutable_session() = s;
    r.set_handle(kFile);
    r.set_kind(v1::LOCK_WHOLE_FILE);
    r.set_mode(v1::LOCK_EXCLUSIVE);
    r.set_wait(wait);
    r.set_wait_ms(wait_ms);
    return r;
  }
  static v1::PosixLockRequest Write(const v1::SessionRef& s, bool wait) {
    v1::PosixLockRequest r;
    *r.mutable_session() = s;
    r.set_handle(kFile);
    r.set_owner(1);
    r.set_pid(77);
    r.set_op(v1::POSIX_WRITE);
    r.set_start(0);
    r.set_length(10);
    r.set_wait(wait);
    return r;
  }
  Status Release(const v1::SessionRef& s, uint64_t id) {
    v1::ReleaseRequest r;
    *r.mutable_session() = s;
    r.set_lock_id(id);
    return ops_->Release(r);
  }
  Result<uint64_t> Try(const v1::SessionRef& s) {
    Outcome o;
    EXPECT_EQ(ops_->Acquire(Whole(s, false), o.ForLock()), 0u);
    Status st = o.Get();
    if (!st.ok()) return st;
    return o.id();
  }

  // Sessions a, b and c on a started LockOps: a holds the file, b waits for
  // it (its outcome goes to *waiter); b's wait token, 0 if that went wrong.
  struct Queued {
    v1::SessionRef a, b, c;
    Result<uint64_t> held = Status(Code::kInternal, "not acquired");
    uint64_t token = 0;
  };
  Queued HeldAndWaiting(Outcome* waiter) {
    Start();
    Queued q;
    q.a = Open("a");
    q.b = Open("b");
    q.c = Open("c");
    q.held = Try(q.a);
    if (q.held.ok()) q.token = ops_->Acquire(Whole(q.b, true), waiter->ForLock());
    return q;
  }

  static constexpr Handle kFile = MakeHandle(0, 7);
  std::unique_ptr<LockOps> ops_;
};

TEST_F(LockOpsWaitTest, CancelWithdrawsAWaitingListLock) {
  Outcome waiter;
  Queued q = HeldAndWaiting(&waiter);
  ASSERT_OK(q.held);
  ASSERT_NE(q.token, 0u);
  const v1::SessionRef& a = q.a;
  const v1::SessionRef& c = q.c;
  const Result<uint64_t>& held = q.held;
  const uint64_t token = q.token;
  EXPECT_FALSE(waiter.has());
  EXPECT_EQ(ops_->counts().waiting, 1u);
  ops_->CancelWait(token);
  EXPECT_EQ(waiter.Get().code(), Code::kCancelled);
  EXPECT_EQ(ops_->counts().waiting, 0u);
  ASSERT_OK(Release(a, *held));
  EXPECT_OK(Try(c));  // the withdrawn request did not take the lock
  ops_->CancelWait(token);  // completed: nothing happens
  EXPECT_EQ(waiter.calls(), 1);
}

TEST_F(LockOpsWaitTest, CancelAfterTheGrantKeepsTheLock) {
  Outcome waiter;
  Queued q = HeldAndWaiting(&waiter);
  ASSERT_OK(q.held);
  ASSERT_NE(q.token, 0u);
  ASSERT_OK(Release(q.a, *q.held));  // grants b on this thread
  ASSERT_OK(waiter.Get());
  ops_->CancelWait(q.token);  // too late: the caller has its lock
  EXPECT_EQ(waiter.calls(), 1);
  EXPECT_EQ(Try(q.c).status().code(), Code::kWouldBlock);
  EXPECT_OK(Release(q.b, waiter.id()));
}

TEST_F(LockOpsWaitTest, CancelWithdrawsAWaitingPosixLock) {
  Start();
  v1::SessionRef a = Open("a"), b = Open("b");
  Outcome first;
  ASSERT_EQ(ops_->PosixLock(Write(a, false), first.ForStatus()), 0u);
  ASSERT_OK(first.Get());
  Outcome waiter;
  const uint64_t token = ops_->PosixLock(Write(b, true), waiter.ForStatus());
  ASSERT_NE(token, 0u);
  v1::ListLocksReply listed = ops_->ListLocks(kFile);
  ASSERT_EQ(listed.locks_size(), 2);
  EXPECT_FALSE(listed.locks(0).waiting());
  EXPECT_EQ(listed.locks(0).client_name(), "a");
  EXPECT_EQ(listed.locks(0).client_address(), "a-addr");
  EXPECT_EQ(listed.locks(0).pid(), 77u);
  EXPECT_TRUE(listed.locks(1).waiting());
  EXPECT_EQ(listed.locks(1).client_name(), "b");
  ops_->CancelWait(token);
  EXPECT_EQ(waiter.Get().code(), Code::kCancelled);
  LockOps::Counts c = ops_->counts();
  EXPECT_EQ(c.sessions, 2u);
  EXPECT_EQ(c.granted, 1u);
  EXPECT_EQ(c.waiting, 0u);
}

TEST_F(LockOpsWaitTest, ABlockingRequestTimesOutOnTheTimerThread) {
  Start();
  v1::SessionRef a = Open("a"), b = Open("b");
  ASSERT_OK(Try(a));
  Outcome waiter;
  ASSERT_NE(ops_->Acquire(Whole(b, true, /*wait_ms=*/1), waiter.ForLock()), 0u);
  EXPECT_EQ(waiter.Get().code(), Code::kTimedOut);
  EXPECT_EQ(ops_->counts().waiting, 0u);
}

// A restart after an incarnation 0xaa that had session 7 open: a grace period.
class LockOpsGraceTest : public LockOpsWaitTest {
 protected:
  void SetUp() override {
    std::ofstream(StateFile()) << "00000000000000aa used\nsessions 1 7\n";
    LockOpsOptions o;
    o.state_file = StateFile();
    o.grace_ms = 3600000;
    Start(o);
    ASSERT_TRUE(ops_->in_grace());
    ASSERT_EQ(ops_->previous_epoch(), 0xaau);
  }
  std::string StateFile() const { return dir_.str() + "/lock_state"; }
  std::string ReadStateFile() const {
    std::ifstream in(StateFile());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static v1::SessionRef Previous() {
    v1::SessionRef p;
    p.set_id(7);
    p.set_epoch(0xaa);
    return p;
  }
  clf::testing::TempDir dir_;
};

TEST_F(LockOpsGraceTest, ParkedRequestRunsWhenTheLastReclaimerIsDone) {
  const v1::SessionRef prev = Previous();
  bool reclaimed = false;
  v1::SessionRef a = Open("a", &prev, &reclaimed);
  ASSERT_TRUE(reclaimed);
  EXPECT_EQ(ops_->reclaim_sessions(), 1u);
  v1::SessionRef b = Open("b");
  EXPECT_NE(ReadStateFile().find(" used\nsessions 2 "), std::string::npos) << ReadStateFile();

  EXPECT_EQ(Try(b).status().code(), Code::kWouldBlock) << "only reclaims while it runs";
  Outcome parked;
  const uint64_t token = ops_->Acquire(Whole(b, true), parked.ForLock());
  ASSERT_NE(token, 0u);
  EXPECT_FALSE(parked.has());
  EXPECT_EQ(ops_->counts().waiting, 0u) << "parked requests are not listed";

  v1::AcquireRequest again = Whole(a, false);
  again.set_reclaim(true);
  Outcome got_back;
  ops_->Acquire(again, got_back.ForLock());
  ASSERT_OK(got_back.Get());

  v1::ReclaimCompleteRequest done;
  *done.mutable_previous() = prev;
  *done.mutable_session() = a;
  Result<v1::ReclaimCompleteReply> rep = ops_->ReclaimComplete(done);
  ASSERT_OK(rep);
  EXPECT_TRUE(rep->grace_ended());
  EXPECT_EQ(rep->grace_ms_left(), 0u);
  EXPECT_FALSE(ops_->in_grace());
  EXPECT_EQ(ops_->reclaim_sessions(), 0u);

  // Resumed: it now waits behind a's reclaimed lock, under the same token.
  EXPECT_FALSE(parked.has());
  EXPECT_EQ(ops_->counts().waiting, 1u);
  ASSERT_OK(Release(a, got_back.id()));
  ASSERT_OK(parked.Get());
  ops_->CancelWait(token);  // granted: nothing to withdraw
  EXPECT_EQ(parked.calls(), 1);
  EXPECT_EQ(ops_->counts().granted, 1u);

  // Reclaims are over.
  Outcome late;
  v1::AcquireRequest reclaim = Whole(a, false);
  reclaim.set_reclaim(true);
  ops_->Acquire(reclaim, late.ForLock());
  EXPECT_EQ(late.Get().code(), Code::kStale);
}

TEST_F(LockOpsGraceTest, ParkedRequestCanBeCancelledOrTimeOut) {
  v1::SessionRef b = Open("b");
  Outcome cancelled;
  const uint64_t token = ops_->PosixLock(Write(b, true), cancelled.ForStatus());
  ASSERT_NE(token, 0u);
  ops_->CancelWait(token);
  EXPECT_EQ(cancelled.Get().code(), Code::kCancelled);

  Outcome timed_out;
  ASSERT_NE(ops_->Acquire(Whole(b, true, /*wait_ms=*/1), timed_out.ForLock()), 0u);
  Status s = timed_out.Get();
  EXPECT_EQ(s.code(), Code::kTimedOut);
  EXPECT_NE(s.message().find("grace period"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ops_->in_grace());
}

TEST_F(LockOpsGraceTest, StateFileFollowsTheSessions) {
  v1::SessionRef a = Open("a");
  EXPECT_NE(ReadStateFile().find(" used\nsessions 1 " + std::to_string(a.id()) + "\n"),
            std::string::npos)
      << ReadStateFile();
  ASSERT_OK(ops_->CloseSession(a));
  EXPECT_NE(ReadStateFile().find(" used\nsessions 0\n"), std::string::npos) << ReadStateFile();
  ops_.reset();  // a clean stop holding no lock
  EXPECT_NE(ReadStateFile().find(" idle\n"), std::string::npos) << ReadStateFile();
}

}  // namespace
}  // namespace clf::server
