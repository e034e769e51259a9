// RenameIntents on a real RocksDB, server 0 of a notional 3-server cluster;
// the peers are a double that records what the table tells them.
#include "server/ops/rename_intents.h"

#include <atomic>
#include <thread>

#include "server/store/meta_store.h"
#include "test/support/no_peers.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

class RecordingPeers : public NoPeers {
 public:
  Result<v1::ForgetRenamesReply> ForgetRenames(ServerId to,
                                               const v1::ForgetRenamesRequest& q) override {
    told.emplace_back(to, q.settled_below());
    return v1::ForgetRenamesReply();
  }
  std::vector<std::pair<ServerId, uint64_t>> told;
};

class RenameIntentsTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    auto s = RocksMetaStore::Open(dir_.str() + "/meta", false);
    ASSERT_OK(s);
    store_ = std::move(*s);
    table_ = std::make_unique<RenameIntents>(0, 3, store_.get(), &peers_);
    ASSERT_OK(table_->Load());
  }
  void Reopen() {
    table_.reset();
    store_.reset();
    Open();
  }
  // An intent of server 0 from "a" in its root to "b" in a directory of server `dst`.
  static v1::RenameIntent Intent(uint64_t id, ServerId dst, const std::string& name = "a") {
    v1::RenameIntent in;
    in.set_id(id);
    in.set_src_parent(MakeHandle(0, 1));
    in.set_src_name(name);
    in.set_handle(MakeHandle(0, 77));
    in.set_type(v1::FT_REGULAR);
    in.set_dst_parent(MakeHandle(dst, 5));
    in.set_dst_name("b");
    return in;
  }

  clf::testing::TempDir dir_;
  RecordingPeers peers_;
  std::unique_ptr<RocksMetaStore> store_;
  std::unique_ptr<RenameIntents> table_;
};

TEST_F(RenameIntentsTest, AnIntentIsInFlightUntilItsGuardEnds) {
  uint64_t id = 0;
  {
    RenameIntents::InFlight f = table_->Begin();
    id = f.id();
    ASSERT_NE(id, 0u);
    EXPECT_EQ(ServerOf(id), 0u);
    ASSERT_OK(table_->Record(Intent(id, 1)));
    auto m = table_->Match([](const v1::RenameIntent&) { return true; });
    EXPECT_EQ(m.running, std::vector<uint64_t>{id});
    EXPECT_TRUE(m.idle.empty());
    EXPECT_EQ(table_->Idle(id).status().code(), Code::kBusy);
    EXPECT_TRUE(table_->IdleIds().empty());
  }
  auto m = table_->Match([](const v1::RenameIntent&) { return true; });
  EXPECT_TRUE(m.running.empty());
  ASSERT_EQ(m.idle.size(), 1u);
  EXPECT_EQ(m.idle[0].id(), id);
  EXPECT_EQ(table_->IdleIds(), std::vector<uint64_t>{id});
  EXPECT_TRUE(table_->HasPendingFor(MakeHandle(0, 1), "a"));
  EXPECT_FALSE(table_->HasPendingFor(MakeHandle(0, 1), "other"));
}

TEST_F(RenameIntentsTest, PendingIntentsSurviveARestartAndIdsAreNeverReused) {
  uint64_t first = 0, second = 0;
  {
    RenameIntents::InFlight f = table_->Begin();
    first = f.id();
    ASSERT_OK(table_->Record(Intent(first, 1)));
  }
  {
    RenameIntents::InFlight f = table_->Begin();
    second = f.id();
    ASSERT_OK(table_->Record(Intent(second, 2)));
    ASSERT_OK(table_->Drop(second));
  }
  EXPECT_GT(second, first);
  Reopen();
  auto pending = table_->Pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].first.id(), first);
  EXPECT_FALSE(pending[0].second);  // no call runs after a restart
  RenameIntents::InFlight f = table_->Begin();
  EXPECT_GT(f.id(), second);
}

TEST_F(RenameIntentsTest, WaitEndedReturnsWhenTheCallEndsAndFalseAtTheLimit) {
  std::atomic<uint64_t> id{0};
  std::atomic<bool> end{false};
  std::thread call([&] {  // a Rename call that runs until told to end
    RenameIntents::InFlight f = table_->Begin();
    id = f.id();
    while (!end) std::this_thread::yield();
  });
  ASSERT_TRUE(clf::testing::WaitUntil([&] { return id != 0; }, std::chrono::seconds(30)));
  EXPECT_FALSE(table_->WaitEnded({id}, std::chrono::steady_clock::now() +
                                           std::chrono::milliseconds(20)));
  end = true;
  EXPECT_TRUE(table_->WaitEnded({id}, std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  call.join();
}

TEST_F(RenameIntentsTest, AnUnansweredIntentIsAbortedOnceAndForAll) {
  const uint64_t id = MakeHandle(1, 9);  // an intent of server 1, this server its destination
  {
    std::lock_guard<std::mutex> l(table_->Lock(id));
    auto prior = table_->PriorOutcome(id);
    ASSERT_OK(prior);
    EXPECT_FALSE(prior->has_value());  // nothing decided: the insert may apply
  }
  auto r = table_->Resolve(id);
  ASSERT_OK(r);
  EXPECT_FALSE(r->applied());
  std::lock_guard<std::mutex> l(table_->Lock(id));
  EXPECT_EQ(table_->PriorOutcome(id).status().code(), Code::kCancelled);  // a late insert
}

TEST_F(RenameIntentsTest, AnAppliedOutcomeAnswersRepeatsAndResolve) {
  const uint64_t id = MakeHandle(1, 10);
  v1::InsertEntryReply rep;
  rep.set_replaced_handle(MakeHandle(2, 3));
  RocksMetaStore::Batch b;
  RenameIntents::PutApplied(id, rep, &b);
  ASSERT_OK(store_->Commit(b));
  {
    std::lock_guard<std::mutex> l(table_->Lock(id));
    auto prior = table_->PriorOutcome(id);
    ASSERT_OK(prior);
    ASSERT_TRUE(prior->has_value());
    EXPECT_EQ((*prior)->replaced_handle(), MakeHandle(2, 3));
  }
  auto r = table_->Resolve(id);
  ASSERT_OK(r);
  EXPECT_TRUE(r->applied());
  EXPECT_EQ(r->reply().replaced_handle(), MakeHandle(2, 3));
  EXPECT_EQ(table_->outcome_count(), 1u);
}

TEST_F(RenameIntentsTest, ForgottenOutcomesRefuseLateInsertsAndCannotBeGuessed) {
  const uint64_t old_id = MakeHandle(1, 10), new_id = MakeHandle(1, 20);
  ASSERT_OK(table_->Resolve(old_id));
  ASSERT_OK(table_->Resolve(new_id));
  auto n = table_->ForgetBelow(MakeHandle(1, 15));
  ASSERT_OK(n);
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(table_->outcome_count(), 1u);
  {
    std::lock_guard<std::mutex> l(table_->Lock(old_id));
    EXPECT_EQ(table_->PriorOutcome(old_id).status().code(), Code::kCancelled);
  }
  EXPECT_EQ(table_->Resolve(old_id).status().code(), Code::kInternal);
  auto again = table_->ForgetBelow(MakeHandle(1, 12));  // below the mark: nothing
  ASSERT_OK(again);
  EXPECT_EQ(*again, 0u);
}

TEST_F(RenameIntentsTest, DestinationsAreToldBelowTheLowestUnsettledIntent) {
  uint64_t pending_id = 0;
  {
    RenameIntents::InFlight f = table_->Begin();
    pending_id = f.id();
    ASSERT_OK(table_->Record(Intent(pending_id, 1)));
  }
  {
    RenameIntents::InFlight f = table_->Begin();
    ASSERT_OK(table_->Record(Intent(f.id(), 1)));
    ASSERT_OK(table_->Drop(f.id()));
  }
  table_->TellSettled();
  ASSERT_EQ(peers_.told.size(), 1u);  // only server 1 was sent an intent
  EXPECT_EQ(peers_.told[0].first, 1u);
  EXPECT_EQ(peers_.told[0].second, pending_id);
  ASSERT_OK(table_->Drop(pending_id));
  RenameIntents::InFlight running = table_->Begin();  // in flight: not settled
  peers_.told.clear();
  table_->TellSettled();
  ASSERT_EQ(peers_.told.size(), 1u);
  EXPECT_EQ(peers_.told[0].second, running.id());
  peers_.told.clear();
  table_->TellSettled();  // nothing new settled: nobody is told again
  EXPECT_TRUE(peers_.told.empty());
}

}  // namespace
}  // namespace clf::server
