// ReplicaStateOps (M's record of stale copies) on a real RocksDB, as server 0
// of a four-server cluster; telling the holders is recorded, not sent.
#include "server/ops/replica_state.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "common/layout_proto.h"
#include "server/ops/dir_locks.h"
#include "server/store/meta_store.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

class ReplicaStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (ServerId k = 0; k < 4; ++k) {
      ServerConfig s;
      s.id = k;
      s.address = "127.0.0.1:" + std::to_string(1 + k);
      s.data_dir = dir_.str();
      cluster_.servers.push_back(s);
    }
    auto st = RocksMetaStore::Open(dir_.str() + "/meta", false);
    ASSERT_OK(st);
    store_ = std::move(*st);
    ops_ = std::make_unique<ReplicaStateOps>(
        cluster_, 0, store_.get(), &locks_,
        [this](ServerId to, Handle h, std::function<void(Status)> done) {
          {
            std::lock_guard<std::mutex> l(mu_);
            told_.emplace_back(to, h);
          }
          done(Status::Ok());
        });
  }
  // A regular file of server 0 striped over servers 1 and 2, two copies:
  // copies on 1 (slot 0 of 1), 2 (slot 0 of 2, slot 1 of 1), 3 (slot 1 of 2).
  Handle PutFile(uint64_t counter, uint32_t replicas = 2) {
    v1::Attr a;
    a.set_handle(MakeHandle(0, counter));
    a.set_type(v1::FT_REGULAR);
    a.set_nlink(1);
    *a.mutable_layout() = ToProto(Layout{4096, 2, 1, replicas});
    RocksMetaStore::Batch b;
    b.PutAttr(a);
    EXPECT_OK(store_->Commit(b));
    return a.handle();
  }
  Result<v1::ReplicasReply> Mark(Handle h, v1::ReplicasOp op, ServerId primary, uint32_t slot) {
    v1::ReplicasRequest r;
    r.set_handle(h);
    r.set_op(op);
    r.mutable_copy()->set_primary(primary);
    r.mutable_copy()->set_slot(slot);
    return ops_->Serve(r);
  }
  std::vector<std::pair<ServerId, Handle>> Told() {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::pair<ServerId, Handle>> out = told_;
    told_.clear();
    std::sort(out.begin(), out.end());
    return out;
  }

  clf::testing::TempDir dir_;
  ClusterConfig cluster_;
  std::unique_ptr<RocksMetaStore> store_;
  DirLocks locks_;
  std::unique_ptr<ReplicaStateOps> ops_;
  std::mutex mu_;
  std::vector<std::pair<ServerId, Handle>> told_;
};

TEST_F(ReplicaStateTest, MarksAreDurableIdempotentAndToldToEveryHolder) {
  const Handle h = PutFile(5);
  Result<v1::ReplicasReply> r = Mark(h, v1::REPLICAS_MARK_STALE, 2, 1);
  ASSERT_OK(r);
  ASSERT_EQ(r->stale_size(), 1);
  EXPECT_EQ(r->stale(0).primary(), 2u);
  EXPECT_EQ(r->stale(0).slot(), 1u);
  // Every server holding a copy hears of it (1, 2, 3; not 0).
  EXPECT_EQ(Told(), (std::vector<std::pair<ServerId, Handle>>{{1, h}, {2, h}, {3, h}}));
  EXPECT_EQ(store_->Degraded(), std::vector<Handle>{h});
  Result<v1::Attr> a = store_->GetAttr(h);
  ASSERT_OK(a);
  EXPECT_EQ(a->stale_replicas_size(), 1);
  // The same mark again changes nothing and tells nobody.
  r = Mark(h, v1::REPLICAS_MARK_STALE, 2, 1);
  ASSERT_OK(r);
  EXPECT_EQ(r->stale_size(), 1);
  EXPECT_TRUE(Told().empty());
  // The other copy of server 2's units is the last current one: refused.
  EXPECT_STATUS(Code::kUnavailable, Mark(h, v1::REPLICAS_MARK_STALE, 2, 0));
  // Server 1's units are independent.
  ASSERT_OK(Mark(h, v1::REPLICAS_MARK_STALE, 1, 0));
  // Current again: removed, and the work list empties with the last one.
  Told();
  ASSERT_OK(Mark(h, v1::REPLICAS_MARK_CURRENT, 2, 1));
  EXPECT_EQ(store_->Degraded(), std::vector<Handle>{h});
  r = Mark(h, v1::REPLICAS_MARK_CURRENT, 1, 0);
  ASSERT_OK(r);
  EXPECT_EQ(r->stale_size(), 0);
  EXPECT_TRUE(store_->Degraded().empty());
}

TEST_F(ReplicaStateTest, RefusesCopiesTheFileDoesNotHave) {
  const Handle h = PutFile(6);
  EXPECT_STATUS(Code::kInvalid, Mark(h, v1::REPLICAS_MARK_STALE, 0, 1));  // 0 holds no units
  EXPECT_STATUS(Code::kInvalid, Mark(h, v1::REPLICAS_MARK_STALE, 1, 2));  // slot past replicas
  const Handle one = PutFile(7, 1);
  EXPECT_STATUS(Code::kInvalid, Mark(one, v1::REPLICAS_MARK_STALE, 1, 0));  // not replicated
  EXPECT_STATUS(Code::kStale, Mark(MakeHandle(0, 99), v1::REPLICAS_GET, 0, 0));  // no such file
  EXPECT_STATUS(Code::kStale, Mark(MakeHandle(1, 5), v1::REPLICAS_GET, 0, 0));  // not M here
}

TEST_F(ReplicaStateTest, LostCopiesAndTheResyncReminder) {
  const Handle h = PutFile(8);
  const Handle one = PutFile(9, 1);
  (void)one;
  // Server 2's first store (a new cluster) holds nothing yet: nothing to mark.
  EXPECT_EQ(*ops_->AnnounceStore(2, true), 0u);
  EXPECT_EQ(*ops_->AnnounceStore(2, false), 0u);
  EXPECT_TRUE(store_->GetAttr(h)->stale_replicas().empty());
  // Then it lost its store: slot 0 of its own units and slot 1 of server 1's.
  Result<uint64_t> marked = ops_->AnnounceStore(2, true);
  ASSERT_OK(marked);
  EXPECT_EQ(*marked, 2u);
  Result<v1::Attr> a = store_->GetAttr(h);
  ASSERT_OK(a);
  std::vector<std::pair<uint32_t, uint32_t>> stale;
  for (const v1::ReplicaRef& x : a->stale_replicas()) stale.emplace_back(x.primary(), x.slot());
  std::sort(stale.begin(), stale.end());
  EXPECT_EQ(stale, (std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {2, 0}}));
  EXPECT_EQ(*ops_->AnnounceStore(2, true), 0u);  // again: nothing new
  Told();
  // The reminder tells each stale copy's acting primary: server 1 (slot 0
  // of its own units) and server 3 (slot 1 of server 2's).
  EXPECT_EQ(ops_->NudgeOnce(), 2u);
  EXPECT_EQ(ops_->stale_copies(), 2u);
  EXPECT_EQ(Told(), (std::vector<std::pair<ServerId, Handle>>{{1, h}, {3, h}}));
}

}  // namespace
}  // namespace clf::server
