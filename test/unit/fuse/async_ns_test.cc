// AsyncNs's lease table as a state machine over fake servers: the test
// grants or refuses leases, answers commits and recalls, and checks what the
// mount answers by itself and what it sends. No gRPC, no FUSE.
#include "fuse/async_ns.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <mutex>

namespace clf::fuse {
namespace {

using client::Attr;
using client::CommitOp;
using client::DirEntry;
using client::DirLeaseGrant;
using client::FileType;

Handle On(ServerId s, uint64_t n) { return (static_cast<Handle>(s) << kServerShift) | n; }

// Every call kept for the test to answer (or answered by default at the end).
class FakeServers final : public NsServers {
 public:
  struct Acquire {
    Handle dir;
    uint32_t handles_wanted;
    bool with_attrs;
    client::Callback<DirLeaseGrant> cb;
  };
  struct Sent {
    ServerId s;
    std::vector<CommitOp> ops;
    client::Callback<std::vector<Status>> cb;
  };
  uint32_t servers() const override { return 4; }
  void AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs, client::Caller,
                       client::Callback<DirLeaseGrant> cb) override {
    std::lock_guard<std::mutex> l(mu_);
    acquires_.push_back(Acquire{dir, handles_wanted, with_attrs, std::move(cb)});
    cv_.notify_all();
  }
  void ReleaseDirLease(Handle dir, client::StatusCallback cb) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      released_.push_back(dir);
      cv_.notify_all();
    }
    cb(Status::Ok());
  }
  void EndLeaseSession(ServerId s, client::StatusCallback cb) override {
    std::vector<client::Callback<std::vector<Handle>>> polls;
    {
      std::lock_guard<std::mutex> l(mu_);
      ended_.push_back(s);
      // The session's poll is answered.
      for (auto it = polls_.begin(); it != polls_.end();) {
        if (it->first == s) {
          polls.push_back(std::move(it->second));
          it = polls_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& p : polls) p(std::vector<Handle>{});
    cb(Status::Ok());
  }
  void LeaseEvents(ServerId s, uint32_t, client::Callback<std::vector<Handle>> cb) override {
    std::lock_guard<std::mutex> l(mu_);
    polls_.emplace_back(s, std::move(cb));
    cv_.notify_all();
  }
  void Commit(ServerId s, std::vector<CommitOp> ops,
              client::Callback<std::vector<Status>> cb) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!auto_ok_) {
        commits_.push_back(Sent{s, std::move(ops), std::move(cb)});
        cv_.notify_all();
        return;
      }
    }
    cb(std::vector<Status>(ops.size(), Status::Ok()));
  }
  // From now on every commit succeeds at once; those waiting are answered.
  void AutoAnswer() {
    std::deque<Sent> waiting;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto_ok_ = true;
      waiting.swap(commits_);
    }
    for (Sent& c : waiting) c.cb(std::vector<Status>(c.ops.size(), Status::Ok()));
  }

  template <typename Pred>
  bool Wait(Pred p) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), p);
  }
  Acquire TakeAcquire() {
    EXPECT_TRUE(Wait([this] { return !acquires_.empty(); })) << "no lease asked for";
    std::lock_guard<std::mutex> l(mu_);
    if (acquires_.empty()) return Acquire{};
    Acquire a = std::move(acquires_.front());
    acquires_.pop_front();
    return a;
  }
  Sent TakeCommit() {
    EXPECT_TRUE(Wait([this] { return !commits_.empty(); })) << "nothing committed";
    std::lock_guard<std::mutex> l(mu_);
    if (commits_.empty()) return Sent{};
    Sent c = std::move(commits_.front());
    commits_.pop_front();
    return c;
  }
  // Answers the open poll of `s` with `dirs` recalled.
  bool Recall(ServerId s, std::vector<Handle> dirs) {
    client::Callback<std::vector<Handle>> cb;
    if (!Wait([&] {
          for (auto& p : polls_) {
            if (p.first == s) return true;
          }
          return false;
        })) {
      return false;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto it = polls_.begin(); it != polls_.end(); ++it) {
        if (it->first == s) {
          cb = std::move(it->second);
          polls_.erase(it);
          break;
        }
      }
    }
    cb(std::move(dirs));
    return true;
  }
  bool WaitReleased(Handle dir) {
    return Wait([&] { return std::find(released_.begin(), released_.end(), dir) != released_.end(); });
  }
  size_t acquires() {
    std::lock_guard<std::mutex> l(mu_);
    return acquires_.size();
  }
  std::vector<ServerId> ended() {
    std::lock_guard<std::mutex> l(mu_);
    return ended_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Acquire> acquires_;
  std::deque<Sent> commits_;
  std::deque<std::pair<ServerId, client::Callback<std::vector<Handle>>>> polls_;
  std::vector<Handle> released_;
  std::vector<ServerId> ended_;
  bool auto_ok_ = false;
};

const Handle kDir = On(1, 0x10);
const Handle kFile = On(1, 0x11);  // "old", listed in kDir
const Handle kSub = On(2, 0x20);   // "sub", a directory listed in kDir

DirLeaseGrant Grant(uint32_t handles = 16) {
  DirLeaseGrant g;
  g.granted = true;
  g.lease_ms = 60000;
  g.dir.handle = kDir;
  g.dir.type = FileType::kDirectory;
  g.dir.mode = 0755;
  g.dir.nlink = 3;
  g.entries.push_back(DirEntry{"old", kFile, FileType::kRegular, {}});
  g.entries.push_back(DirEntry{"sub", kSub, FileType::kDirectory, {}});
  g.handle_first = On(1, 0x1000);
  g.handle_count = handles;
  return g;
}

class AsyncNsTest : public ::testing::Test {
 protected:
  void SetUp() override { ns_ = std::make_unique<AsyncNs>(&servers_, true); }
  void TearDown() override {
    servers_.AutoAnswer();  // what a test left queued commits at Shutdown
    ns_->Shutdown();
    ns_.reset();
  }
  // Takes the lease on kDir (granted with `g`); true if held.
  bool Hold(DirLeaseGrant g = Grant(), bool for_create = true) {
    std::optional<bool> held;
    ns_->WithLease(kDir, client::Caller{}, for_create, [&](bool h) { held = h; });
    FakeServers::Acquire a = servers_.TakeAcquire();
    EXPECT_EQ(a.dir, kDir);
    EXPECT_EQ(a.handles_wanted > 0, for_create);
    a.cb(std::move(g));
    return held.value_or(false);
  }

  FakeServers servers_;
  std::unique_ptr<AsyncNs> ns_;
};

TEST_F(AsyncNsTest, WithoutALeaseNothingIsAnsweredHere) {
  EXPECT_EQ(ns_->Find(kDir, "old", nullptr), AsyncNs::Known::kUnknown);
  EXPECT_FALSE(ns_->Create(kDir, "new", 0644, true, client::Caller{}).has_value());
  EXPECT_FALSE(ns_->Unlink(kDir, "old", client::Caller{}, [](Handle) { return false; }));
  EXPECT_FALSE(ns_->DirAttr(kDir).has_value());
}

TEST_F(AsyncNsTest, AHeldLeaseAnswersLookupsFromItsListing) {
  ASSERT_TRUE(Hold());
  Handle listed = 0;
  FileType t = FileType::kUnknown;
  EXPECT_EQ(ns_->Find(kDir, "old", nullptr, &listed, &t), AsyncNs::Known::kUnknown)
      << "listed without attributes: the server has them";
  EXPECT_EQ(listed, kFile);
  EXPECT_EQ(t, FileType::kRegular);
  EXPECT_EQ(ns_->Find(kDir, "missing", nullptr), AsyncNs::Known::kAbsent);
  std::optional<Attr> d = ns_->DirAttr(kDir);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, 0755u);
  EXPECT_EQ(ns_->leases_granted(), 1u);
}

TEST_F(AsyncNsTest, ACreateUnderALeaseIsAnsweredHereAndCommittedLater) {
  ASSERT_TRUE(Hold());
  client::Caller c;
  c.uid = 1000;
  c.gid = 100;
  std::optional<Attr> a = ns_->Create(kDir, "new", 0640, true, c);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->handle, On(1, 0x1000)) << "the first handle of the lease's range";
  EXPECT_EQ(a->uid, 1000u);
  EXPECT_EQ(a->mode, 0640u);
  Attr born;
  EXPECT_EQ(ns_->Find(kDir, "new", &born), AsyncNs::Known::kPresent);
  EXPECT_EQ(born.handle, a->handle);
  EXPECT_TRUE(ns_->Unsettled(a->handle));
  EXPECT_TRUE(ns_->NameQueued(kDir, "new"));
  EXPECT_FALSE(ns_->Create(kDir, "new", 0640, true, c).has_value()) << "the name exists";
  EXPECT_FALSE(ns_->Create(kDir, "old", 0640, true, c).has_value()) << "listed: the server decides";
  bool committed = false;
  ASSERT_TRUE(ns_->After({a->handle}, [&] { committed = true; }));
  FakeServers::Sent cm = servers_.TakeCommit();
  EXPECT_EQ(cm.s, 1u);
  ASSERT_EQ(cm.ops.size(), 1u);
  EXPECT_EQ(cm.ops[0].kind, CommitOp::kCreate);
  EXPECT_EQ(cm.ops[0].name, "new");
  EXPECT_EQ(cm.ops[0].handle, a->handle);
  EXPECT_FALSE(committed);
  cm.cb(std::vector<Status>{Status::Ok()});
  EXPECT_TRUE(committed);
  EXPECT_EQ(ns_->committed(), 1u);
  EXPECT_FALSE(ns_->NameQueued(kDir, "new"));
}

TEST_F(AsyncNsTest, NoCreateHereInASetgidDirectory) {
  DirLeaseGrant g = Grant();
  g.dir.mode = 02775;
  ASSERT_TRUE(Hold(g));
  EXPECT_FALSE(ns_->Create(kDir, "x", 0644, true, client::Caller{}).has_value())
      << "a setgid directory's group: the server's job";
}

TEST_F(AsyncNsTest, NoCreateHereForSetuidModesOrWhenTheHandlesRunOut) {
  ASSERT_TRUE(Hold(Grant(/*handles=*/1)));
  EXPECT_FALSE(ns_->Create(kDir, "s", 04755, true, client::Caller{}).has_value())
      << "setuid bits: the server's job";
  EXPECT_TRUE(ns_->Create(kDir, "a", 0644, true, client::Caller{}).has_value());
  EXPECT_FALSE(ns_->Create(kDir, "b", 0644, true, client::Caller{}).has_value())
      << "the lease's one handle is used";
}

TEST_F(AsyncNsTest, AnUnlinkOfAListedFileIsQueuedUnlessItIsOpen) {
  ASSERT_TRUE(Hold());
  EXPECT_FALSE(ns_->Unlink(kDir, "old", client::Caller{}, [](Handle h) { return h == kFile; }))
      << "open here: the server keeps an orphan";
  EXPECT_FALSE(ns_->Unlink(kDir, "sub", client::Caller{}, [](Handle) { return false; }))
      << "a directory: rmdir";
  std::optional<Handle> h = ns_->Unlink(kDir, "old", client::Caller{}, [](Handle) { return false; });
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(*h, kFile);
  EXPECT_EQ(ns_->Find(kDir, "old", nullptr), AsyncNs::Known::kAbsent);
  EXPECT_TRUE(ns_->NlinkChangedSince(kFile, std::chrono::steady_clock::now()));
  ns_->Flush([] {});
  FakeServers::Sent cm = servers_.TakeCommit();
  ASSERT_EQ(cm.ops.size(), 1u);
  EXPECT_EQ(cm.ops[0].kind, CommitOp::kRemove);
  EXPECT_EQ(cm.ops[0].handle, kFile);
  cm.cb(std::vector<Status>{Status::Ok()});
}

TEST_F(AsyncNsTest, ARecallCommitsTheQueueThenGivesTheLeaseBack) {
  ASSERT_TRUE(Hold());
  ASSERT_TRUE(ns_->Create(kDir, "new", 0644, false, client::Caller{}).has_value());
  ASSERT_TRUE(servers_.Recall(1, {kDir})) << "no poll of server 1 after the grant";
  EXPECT_EQ(ns_->Find(kDir, "new", nullptr), AsyncNs::Known::kUnknown)
      << "recalled: no more answers here";
  FakeServers::Sent cm = servers_.TakeCommit();
  ASSERT_EQ(cm.ops.size(), 1u);
  EXPECT_EQ(cm.ops[0].name, "new");
  cm.cb(std::vector<Status>{Status::Ok()});
  EXPECT_TRUE(servers_.WaitReleased(kDir)) << "given back once the create is committed";
}

TEST_F(AsyncNsTest, AFailedCommitIsReportedByTheNextFsyncAndTheLeaseGivenBack) {
  ASSERT_TRUE(Hold());
  std::optional<Attr> a = ns_->Create(kDir, "new", 0644, false, client::Caller{});
  ASSERT_TRUE(a.has_value());
  ns_->Flush([] {});
  FakeServers::Sent cm = servers_.TakeCommit();
  cm.cb(std::vector<Status>{Status(Code::kNoSpace, "no inodes left")});
  Status s = ns_->TakeError(a->handle);
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.ToString().find("no inodes left"), std::string::npos) << s.ToString();
  EXPECT_EQ(ns_->TakeError(kDir).code(), Code::kIo) << "fsyncdir of the directory too";
  EXPECT_TRUE(servers_.WaitReleased(kDir));
  EXPECT_EQ(ns_->Find(kDir, "old", nullptr), AsyncNs::Known::kUnknown);
}

TEST_F(AsyncNsTest, ARefusedLeaseIsNotAskedAgainAtOnce) {
  std::optional<bool> held;
  ns_->WithLease(kDir, client::Caller{}, false, [&](bool h) { held = h; });
  FakeServers::Acquire a = servers_.TakeAcquire();
  DirLeaseGrant no;
  no.refused = "another client holds it";
  a.cb(no);
  ASSERT_TRUE(held.has_value());
  EXPECT_FALSE(*held);
  held.reset();
  ns_->WithLease(kDir, client::Caller{}, false, [&](bool h) { held = h; });
  ASSERT_TRUE(held.has_value()) << "answered at once";
  EXPECT_FALSE(*held);
  EXPECT_EQ(servers_.acquires(), 0u) << "not asked again within the retry delay";
}

TEST_F(AsyncNsTest, ASynchronousRenameWhileTheGrantTravelsMakesItUnusable) {
  std::optional<bool> held;
  ns_->WithLease(kDir, client::Caller{}, false, [&](bool h) { held = h; });
  FakeServers::Acquire a = servers_.TakeAcquire();
  // The server may have listed before or after this rename: the grant can't be trusted.
  ns_->NoteRenamed(kDir, "old", kDir, "renamed", false);
  a.cb(Grant());
  ASSERT_TRUE(held.has_value());
  EXPECT_FALSE(*held);
  EXPECT_TRUE(servers_.WaitReleased(kDir)) << "the unusable grant is given back";
  EXPECT_EQ(ns_->Find(kDir, "old", nullptr), AsyncNs::Known::kUnknown);
}

TEST_F(AsyncNsTest, ASynchronousCreateWhileTheGrantTravelsIsReplayedOntoIt) {
  std::optional<bool> held;
  ns_->WithLease(kDir, client::Caller{}, false, [&](bool h) { held = h; });
  FakeServers::Acquire a = servers_.TakeAcquire();
  ns_->NoteAdded(kDir, "made", On(1, 0x33), FileType::kRegular);
  ns_->NoteRemoved(kDir, "old");
  a.cb(Grant());  // listed before the create and the unlink
  ASSERT_TRUE(held.value_or(false));
  Handle listed = 0;
  EXPECT_EQ(ns_->Find(kDir, "made", nullptr, &listed), AsyncNs::Known::kUnknown);
  EXPECT_EQ(listed, On(1, 0x33));
  EXPECT_EQ(ns_->Find(kDir, "old", nullptr), AsyncNs::Known::kAbsent);
}

TEST_F(AsyncNsTest, ARenameOfAFreshFileFoldsIntoItsQueuedCreate) {
  ASSERT_TRUE(Hold());
  std::optional<Attr> a = ns_->Create(kDir, "tmp.1", 0644, false, client::Caller{});
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(ns_->Rename(kDir, "tmp.1", kDir, "final", client::Caller{}));
  EXPECT_EQ(ns_->Find(kDir, "tmp.1", nullptr), AsyncNs::Known::kAbsent);
  Attr born;
  EXPECT_EQ(ns_->Find(kDir, "final", &born), AsyncNs::Known::kPresent);
  ns_->Flush([] {});
  FakeServers::Sent cm = servers_.TakeCommit();
  ASSERT_EQ(cm.ops.size(), 1u) << "one create under the final name, no rename";
  EXPECT_EQ(cm.ops[0].kind, CommitOp::kCreate);
  EXPECT_EQ(cm.ops[0].name, "final");
  cm.cb(std::vector<Status>{Status::Ok()});
}

TEST_F(AsyncNsTest, AChmodOfAFreshFileIsQueuedAndShownHere) {
  ASSERT_TRUE(Hold());
  client::Caller c;
  c.uid = 1000;
  std::optional<Attr> a = ns_->Create(kDir, "f", 0644, false, c);
  ASSERT_TRUE(a.has_value());
  client::SetAttrArgs chmod;
  chmod.valid = client::kSetMode;
  chmod.mode = 0600;
  Attr out;
  ASSERT_TRUE(ns_->QueueSetAttr(a->handle, chmod, c, &out));
  EXPECT_EQ(out.mode, 0600u);
  client::Caller other;
  other.uid = 2000;
  EXPECT_FALSE(ns_->QueueSetAttr(a->handle, chmod, other, &out)) << "not the owner: the server checks";
  client::SetAttrArgs truncate;
  truncate.valid = client::kSetSize;
  EXPECT_FALSE(ns_->QueueSetAttr(a->handle, truncate, c, &out)) << "a size: the server";
  std::optional<Attr> b = ns_->Born(a->handle);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->mode, 0600u);
  ns_->Flush([] {});
  FakeServers::Sent cm = servers_.TakeCommit();
  ASSERT_EQ(cm.ops.size(), 2u);
  EXPECT_EQ(cm.ops[1].kind, CommitOp::kSetAttr);
  EXPECT_EQ(cm.ops[1].setattr.mode, 0600u);
  cm.cb(std::vector<Status>(2, Status::Ok()));
}

TEST_F(AsyncNsTest, ShutdownCommitsTheQueueAndEndsEveryLeaseSession) {
  ASSERT_TRUE(Hold());
  ASSERT_TRUE(ns_->Create(kDir, "new", 0644, false, client::Caller{}).has_value());
  std::thread answer([this] {
    FakeServers::Sent cm = servers_.TakeCommit();
    cm.cb(std::vector<Status>(cm.ops.size(), Status::Ok()));
  });
  ns_->Shutdown();
  answer.join();
  EXPECT_EQ(ns_->committed(), 1u);
  EXPECT_EQ(servers_.ended(), std::vector<ServerId>{1});
}

}  // namespace
}  // namespace clf::fuse
