// WriteIntents (records of copies that may hold unsynced writes) on a real
// RocksDB and a real object store in a temporary folder.
#include "server/ops/write_intents.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "server/data/copy_stores.h"
#include "server/data/object_store.h"
#include "server/store/meta_store.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

using Copy = WriteIntents::Copy;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class WriteIntentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenStore();
    auto objects = ObjectStore::Open(dir_.str() + "/objects", 0, 0);
    ASSERT_OK(objects);
    objects_ = std::move(*objects);
    copies_ = std::make_unique<CopyStores>(objects_.get(), CopyStores::Settings{});
  }
  void OpenStore() {
    auto st = RocksMetaStore::Open(dir_.str() + "/meta", false);
    ASSERT_OK(st);
    store_ = std::move(*st);
  }
  // The server restarts: the records are read again from RocksDB.
  void Reopen() {
    intents_.reset();
    store_.reset();
    OpenStore();
    intents_ = std::make_unique<WriteIntents>(store_.get(), copies_.get());
  }
  std::vector<Copy> Records() const { return store_->Unsynced(); }

  clf::testing::TempDir dir_{"clf-write-intents"};
  std::unique_ptr<RocksMetaStore> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<CopyStores> copies_;
  std::unique_ptr<WriteIntents> intents_;
};

TEST_F(WriteIntentsTest, AWriteIsRecordedBeforeItRunsAndDroppedOnceSyncedAndIdle) {
  intents_ = std::make_unique<WriteIntents>(store_.get(), copies_.get());
  const Handle h = MakeHandle(2, 7);
  ASSERT_OK(objects_->Create(h));
  {
    auto w = intents_->Begin(h, 0);
    ASSERT_OK(w);
    EXPECT_EQ(Records(), (std::vector<Copy>{{h, 0}}));
    ASSERT_OK(objects_->Write(h, {Extent{0, 5}}, "hello", false));
    // A second write of the same copy while the first runs: no new record.
    auto w2 = intents_->Begin(h, 0);
    ASSERT_OK(w2);
    EXPECT_EQ(intents_->records_written(), 1u);
  }
  // The flusher syncs the idle copy and drops its record.
  EXPECT_TRUE(clf::testing::WaitUntil([&] { return Records().empty(); }, std::chrono::seconds(10)));
  EXPECT_EQ(intents_->records_dropped(), 1u);
  // A later write records it again.
  {
    auto w = intents_->Begin(h, 0);
    ASSERT_OK(w);
    EXPECT_EQ(Records(), (std::vector<Copy>{{h, 0}}));
  }
  EXPECT_EQ(intents_->records_written(), 2u);
}

TEST_F(WriteIntentsTest, AWriteInProgressKeepsItsRecord) {
  intents_ = std::make_unique<WriteIntents>(store_.get(), copies_.get());
  const Handle h = MakeHandle(1, 3);
  auto w = intents_->Begin(h, 1);
  ASSERT_OK(w);
  // Longer than the flusher's idle period: the copy is still being written.
  // (Polled: the property is that nothing drops it over that time.)
  const int64_t t0 = NowMs();
  while (NowMs() - t0 < 3 * WriteIntents::kIdleMs) {
    ASSERT_EQ(Records(), (std::vector<Copy>{{h, 1}}));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST_F(WriteIntentsTest, RecordsLeftByAnUncleanStopWaitUntilSettled) {
  intents_ = std::make_unique<WriteIntents>(store_.get(), copies_.get());
  const Handle a = MakeHandle(0, 1), b = MakeHandle(0, 2), c = MakeHandle(3, 9);
  for (const Copy& cp : std::vector<Copy>{{a, 0}, {b, 1}}) {
    auto w = intents_->Begin(cp.first, cp.second);
    ASSERT_OK(w);
  }
  // kill -9: no Close, the records stay.
  Reopen();
  EXPECT_EQ(intents_->leftover(), (std::vector<Copy>{{a, 0}, {b, 1}}));
  // b is written again after the restart; c is new.
  {
    auto w = intents_->Begin(b, 1);
    ASSERT_OK(w);
    auto w2 = intents_->Begin(c, 2);
    ASSERT_OK(w2);
  }
  EXPECT_EQ(intents_->records_written(), 1u);  // c only: b's record was there
  // A clean stop drops c's record; a and b may have lost writes in the
  // unclean stop and are not settled: theirs stay.
  intents_->Close();
  EXPECT_EQ(Records(), (std::vector<Copy>{{a, 0}, {b, 1}}));

  Reopen();
  EXPECT_EQ(intents_->leftover(), (std::vector<Copy>{{a, 0}, {b, 1}}));
  {
    auto w = intents_->Begin(b, 1);
    ASSERT_OK(w);
  }
  intents_->Settled(a, 0);  // never written since: dropped at once
  intents_->Settled(b, 1);  // written since: dropped once synced
  EXPECT_EQ(Records(), (std::vector<Copy>{{b, 1}}));
  EXPECT_TRUE(clf::testing::WaitUntil([&] { return Records().empty(); }, std::chrono::seconds(10)));
  Reopen();
  EXPECT_TRUE(intents_->leftover().empty());
}

TEST_F(WriteIntentsTest, ConcurrentFirstWritesShareOneRecord) {
  intents_ = std::make_unique<WriteIntents>(store_.get(), copies_.get());
  const Handle h = MakeHandle(2, 11);
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      for (int j = 0; j < 50; ++j) {
        auto w = intents_->Begin(h, 0);
        EXPECT_OK(w);
      }
    });
  }
  for (auto& t : ts) t.join();
  // Each new record follows a drop; with writes back to back no drop can
  // happen (the copy is never idle for kIdleMs), so one record.
  EXPECT_EQ(intents_->records_written(), 1u);
}

}  // namespace
}  // namespace clf::server
