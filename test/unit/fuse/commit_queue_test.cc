// CommitQueue as a state machine: changes queued, batches handed to a
// recording committer, answers fed back by the test. No servers, no timer
// unless a test asks for it.
#include "fuse/commit_queue.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

namespace clf::fuse {
namespace {

using client::CommitOp;

// Handles: the server is in the high bits (ServerOf).
Handle On(ServerId s, uint64_t n) { return (static_cast<Handle>(s) << kServerShift) | n; }

CommitOp Named(CommitOp::Kind kind, Handle dir, const std::string& name, Handle h) {
  CommitOp op;
  op.kind = kind;
  op.parent = dir;
  op.name = name;
  op.handle = h;
  return op;
}

CommitOp Report(Handle h) {
  CommitOp op;
  op.kind = CommitOp::kReport;
  op.handle = h;
  op.report.wrote = true;
  op.report.size = 10;
  return op;
}

CommitOp SetAttr(Handle h, uint32_t valid, uint32_t mode = 0644) {
  CommitOp op;
  op.kind = CommitOp::kSetAttr;
  op.handle = h;
  op.setattr.valid = valid;
  op.setattr.mode = mode;
  return op;
}

struct Batch {
  ServerId server;
  std::vector<CommitOp> ops;
  std::function<void(Result<std::vector<Status>>)> done;
};

// The queue with a committer that keeps each batch for the test to answer.
class Harness {
 public:
  explicit Harness(CommitQueue::Options o = Small(), bool timer = false) {
    CommitQueue::Hooks h;
    h.commit = [this](ServerId s, std::vector<CommitOp> ops,
                      std::function<void(Result<std::vector<Status>>)> done) {
      std::lock_guard<std::mutex> l(mu_);
      batches_.push_back(Batch{s, std::move(ops), std::move(done)});
      cv_.notify_all();
    };
    h.data_pending = [this](Handle f) {
      std::lock_guard<std::mutex> l(mu_);
      return data_.count(f) != 0;
    };
    h.send_data = [this](const std::vector<Handle>& files) {
      std::lock_guard<std::mutex> l(mu_);
      for (Handle f : files) data_sent_.push_back(f);
    };
    h.answered = [this](const std::vector<CommitOp>& ops, const std::vector<Status>&,
                        CommitQueue::Clock::time_point) {
      std::lock_guard<std::mutex> l(mu_);
      answered_ += ops.size();
    };
    h.give_back = [this](ServerId, std::vector<Handle> dirs) {
      std::lock_guard<std::mutex> l(mu_);
      given_back_.insert(given_back_.end(), dirs.begin(), dirs.end());
    };
    h.call_begin = [this] { ++calls_; };
    h.call_end = [this] { --calls_; };
    q = std::make_unique<CommitQueue>(o, std::move(h), timer);
  }
  static CommitQueue::Options Small() {
    CommitQueue::Options o;
    o.max_batch = 4;
    o.min_batch = 2;
    o.batch_delay = std::chrono::hours(1);  // rounds go only when due for another reason
    return o;
  }
  void Enqueue(CommitOp op, std::vector<Handle> touches) {
    const ServerId s = ServerOf(op.parent != 0 ? op.parent : op.handle);
    if (q->Enqueue(std::move(op), s, std::move(touches))) q->Kick();
  }
  std::vector<Batch> TakeBatches() {
    std::lock_guard<std::mutex> l(mu_);
    return std::exchange(batches_, {});
  }
  bool WaitBatch() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [this] { return !batches_.empty(); });
  }
  static void AnswerAll(Batch& b, Status st = Status::Ok()) {
    b.done(std::vector<Status>(b.ops.size(), st));
  }
  void SetData(Handle f, bool pending) {
    std::lock_guard<std::mutex> l(mu_);
    if (pending) {
      data_.insert(f);
    } else {
      data_.erase(f);
    }
  }
  std::vector<Handle> data_sent() {
    std::lock_guard<std::mutex> l(mu_);
    return data_sent_;
  }
  std::vector<Handle> given_back() {
    std::lock_guard<std::mutex> l(mu_);
    return given_back_;
  }
  size_t answered() {
    std::lock_guard<std::mutex> l(mu_);
    return answered_;
  }
  int calls() const { return calls_; }

  std::unique_ptr<CommitQueue> q;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Batch> batches_;
  std::set<Handle> data_;
  std::vector<Handle> data_sent_;
  std::vector<Handle> given_back_;
  size_t answered_ = 0;
  std::atomic<int> calls_{0};
};

const Handle kDir = On(1, 10);

TEST(CommitQueueTest, ChangesGatherUntilMinBatchThenGoInOrder) {
  Harness h;
  h.Enqueue(Named(CommitOp::kCreate, kDir, "a", On(1, 11)), {kDir, On(1, 11)});
  EXPECT_TRUE(h.TakeBatches().empty()) << "one change, not due yet: gathering";
  EXPECT_TRUE(h.q->Touches(kDir));
  EXPECT_TRUE(h.q->NameQueued(kDir, "a"));
  h.Enqueue(Named(CommitOp::kCreate, kDir, "b", On(1, 12)), {kDir, On(1, 12)});
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u) << "min_batch reached: one batch for server 1";
  ASSERT_EQ(b[0].ops.size(), 2u);
  EXPECT_EQ(b[0].ops[0].name, "a");
  EXPECT_EQ(b[0].ops[1].name, "b");
  EXPECT_TRUE(h.q->Touches(kDir)) << "committing still counts";
  EXPECT_EQ(h.calls(), 1);
  Harness::AnswerAll(b[0]);
  EXPECT_FALSE(h.q->Touches(kDir));
  EXPECT_FALSE(h.q->NameQueued(kDir, "a"));
  EXPECT_EQ(h.q->committed(), 2u);
  EXPECT_EQ(h.answered(), 2u);
  EXPECT_EQ(h.calls(), 0);
}

TEST(CommitQueueTest, AWaiterSendsTheQueueAtOnceAndRunsWhenItsChangesAreCommitted) {
  Harness h;
  const Handle f = On(1, 11);
  h.Enqueue(Named(CommitOp::kCreate, kDir, "a", f), {kDir, f});
  bool done = false;
  EXPECT_TRUE(h.q->WaitIf([&](const PendingIndex& p) { return p.Touches(f); }, [&] { done = true; }));
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u) << "a waiter does not wait for the batch delay";
  // A change queued after the wait began is not waited for.
  h.Enqueue(Named(CommitOp::kCreate, kDir, "later", On(1, 12)), {kDir, On(1, 12)});
  EXPECT_FALSE(done);
  Harness::AnswerAll(b[0]);
  EXPECT_TRUE(done);
  EXPECT_FALSE(h.q->WaitIf([&](const PendingIndex& p) { return p.Touches(f); },
                           [] { FAIL() << "nothing queued for f"; }));
  // The later change is not due (one change, no waiter): it stays queued.
  EXPECT_TRUE(h.TakeBatches().empty());
  EXPECT_TRUE(h.q->NameQueued(kDir, "later"));
}

TEST(CommitQueueTest, FlushWaitsForEverythingQueuedNow) {
  Harness h;
  bool flushed = false;
  h.q->Flush([&] { flushed = true; });
  EXPECT_TRUE(flushed) << "empty queue: at once";
  h.Enqueue(Named(CommitOp::kCreate, kDir, "a", On(1, 11)), {kDir, On(1, 11)});
  flushed = false;
  h.q->Flush([&] { flushed = true; });
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_FALSE(flushed);
  Harness::AnswerAll(b[0]);
  EXPECT_TRUE(flushed);
}

TEST(CommitQueueTest, BatchesOfDifferentServersShareNoHandle) {
  CommitQueue::Options o = Harness::Small();
  o.min_batch = 100;  // the round goes at the Flush below, with all three queued
  Harness h(o);
  const Handle d2 = On(2, 20);
  const Handle sub = On(2, 21);  // a directory on server 2, listed in kDir (server 1)
  // Unlink of a file in sub (server 2), then rmdir of sub from kDir (server 1):
  // the rmdir touches sub, which server 2's batch takes, so it waits a round.
  h.Enqueue(Named(CommitOp::kRemove, sub, "f", On(2, 22)), {sub, On(2, 22)});
  CommitOp rmdir = Named(CommitOp::kRemove, kDir, "sub", sub);
  rmdir.directory = true;
  h.Enqueue(rmdir, {kDir, sub});
  h.Enqueue(Named(CommitOp::kCreate, d2, "x", On(2, 23)), {d2, On(2, 23)});
  bool done = false;
  h.q->Flush([&] { done = true; });
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u) << "round 1: server 2 only";
  EXPECT_EQ(b[0].server, 2u);
  ASSERT_EQ(b[0].ops.size(), 2u);
  EXPECT_EQ(b[0].ops[0].name, "f");
  EXPECT_EQ(b[0].ops[1].name, "x");
  Harness::AnswerAll(b[0]);
  b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u) << "round 2: the rmdir, once the unlink is committed";
  EXPECT_EQ(b[0].server, 1u);
  EXPECT_EQ(b[0].ops[0].name, "sub");
  EXPECT_FALSE(done);
  Harness::AnswerAll(b[0]);
  EXPECT_TRUE(done);
}

TEST(CommitQueueTest, ASizeReportWaitsForItsDataThenGoes) {
  Harness h;
  const Handle f = On(1, 11);
  h.SetData(f, true);
  h.Enqueue(Report(f), {f});
  bool done = false;
  h.q->Flush([&] { done = true; });
  EXPECT_TRUE(h.TakeBatches().empty()) << "the report waits for its write-behind";
  ASSERT_EQ(h.data_sent(), std::vector<Handle>{f}) << "and asks for the data to go out";
  h.SetData(f, false);
  h.q->DataLanded();
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].ops[0].kind, CommitOp::kReport);
  Harness::AnswerAll(b[0]);
  EXPECT_TRUE(done);
}

TEST(CommitQueueTest, AFailedChangeIsReportedOnceAndItsDirectoryGivenBack) {
  Harness h;
  const Handle f = On(1, 11);
  h.Enqueue(Named(CommitOp::kCreate, kDir, "a", f), {kDir, f});
  h.q->Flush([] {});
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  b[0].done(std::vector<Status>{Status(Code::kNoSpace, "full")});
  EXPECT_EQ(h.q->committed(), 0u);
  EXPECT_EQ(h.given_back(), std::vector<Handle>{kDir});
  EXPECT_EQ(h.q->TakeError(f).code(), Code::kIo);
  EXPECT_TRUE(h.q->TakeError(f).ok()) << "taken once";
  EXPECT_EQ(h.q->TakeError(kDir).code(), Code::kIo) << "fsyncdir of the directory reports it too";
  // A whole call failing fails each of its changes.
  h.Enqueue(Named(CommitOp::kCreate, kDir, "b", On(1, 12)), {kDir, On(1, 12)});
  h.q->Flush([] {});
  b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  b[0].done(Status(Code::kUnavailable, "server gone"));
  EXPECT_EQ(h.q->TakeError(On(1, 12)).code(), Code::kIo);
  EXPECT_FALSE(h.q->Touches(kDir));
}

TEST(CommitQueueTest, ARenameOfAFreshFileFoldsIntoItsCreate) {
  Harness h;
  const Handle f = On(1, 11);
  h.Enqueue(Named(CommitOp::kCreate, kDir, "tmp", f), {kDir, f});
  bool kick = false;
  EXPECT_TRUE(h.q->FoldRename(f, kDir, "tmp", kDir, "final", client::Caller{}, &kick));
  EXPECT_FALSE(kick);
  EXPECT_FALSE(h.q->NameQueued(kDir, "tmp"));
  EXPECT_TRUE(h.q->NameQueued(kDir, "final"));
  // Into another directory: not folded into a create (the create names kDir).
  EXPECT_FALSE(h.q->FoldRename(f, kDir, "final", On(1, 30), "x", client::Caller{}, &kick));
  h.q->Flush([] {});
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(b[0].ops.size(), 1u);
  EXPECT_EQ(b[0].ops[0].kind, CommitOp::kCreate);
  EXPECT_EQ(b[0].ops[0].name, "final");
  Harness::AnswerAll(b[0]);
}

TEST(CommitQueueTest, SetattrsOfOneCallerJoinButAKillOfSuidBitsDoesNot) {
  Harness h;
  const Handle f = On(1, 11);
  h.Enqueue(SetAttr(f, client::kSetMtime), {f});
  EXPECT_TRUE(h.q->MergeSetAttr(f, SetAttr(f, client::kSetMode, 0600)));
  EXPECT_FALSE(h.q->MergeSetAttr(f, SetAttr(f, client::kKillSuidGid)));
  CommitOp other = SetAttr(f, client::kSetMode, 0700);
  other.caller.uid = 1000;
  EXPECT_FALSE(h.q->MergeSetAttr(f, other)) << "another caller's setattr keeps its own check";
  h.q->Flush([] {});
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(b[0].ops.size(), 1u);
  EXPECT_EQ(b[0].ops[0].setattr.valid, client::kSetMtime | client::kSetMode);
  EXPECT_EQ(b[0].ops[0].setattr.mode, 0600u);
  Harness::AnswerAll(b[0]);
  EXPECT_TRUE(h.q->AttrsChangedSince(f, CommitQueue::Clock::now() - std::chrono::seconds(1)));
}

TEST(CommitQueueTest, TheCloseOfAnUnwrittenFreshFileDropsTheCreatesWriter) {
  Harness h;
  const Handle f = On(1, 11);
  CommitOp create = Named(CommitOp::kCreate, kDir, "a", f);
  create.create.open_for_write = true;
  h.Enqueue(create, {kDir, f});
  EXPECT_TRUE(h.q->DropCreateWriter(f));
  EXPECT_FALSE(h.q->DropCreateWriter(f)) << "the writer is gone already";
  h.q->Flush([] {});
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_FALSE(b[0].ops[0].create.open_for_write);
  Harness::AnswerAll(b[0]);
}

TEST(CommitQueueTest, UnlinksAreRememberedForNlinkQuestions) {
  Harness h;
  const Handle f = On(1, 11);
  const auto before = CommitQueue::Clock::now();
  EXPECT_FALSE(h.q->NlinkChangedSince(f, before));
  h.Enqueue(Named(CommitOp::kRemove, kDir, "a", f), {kDir, f});
  EXPECT_TRUE(h.q->NlinkChangedSince(f, before)) << "queued";
  EXPECT_FALSE(h.q->TouchesBesidesUnlinks(f));
  h.q->Flush([] {});
  for (Batch& b : h.TakeBatches()) Harness::AnswerAll(b);
  EXPECT_TRUE(h.q->NlinkChangedSince(f, before)) << "committed after `before`";
  EXPECT_FALSE(h.q->NlinkChangedSince(f, CommitQueue::Clock::now() + std::chrono::seconds(1)));
}

TEST(CommitQueueTest, TheTimerSendsAChangeOnceItIsBatchDelayOld) {
  CommitQueue::Options o = Harness::Small();
  o.batch_delay = std::chrono::milliseconds(2);
  Harness h(o, true);
  h.Enqueue(Named(CommitOp::kCreate, kDir, "a", On(1, 11)), {kDir, On(1, 11)});
  ASSERT_TRUE(h.WaitBatch()) << "a lone change never sent by the timer";
  std::vector<Batch> b = h.TakeBatches();
  ASSERT_EQ(b.size(), 1u);
  Harness::AnswerAll(b[0]);
  h.q->Stop();
}

}  // namespace
}  // namespace clf::fuse
