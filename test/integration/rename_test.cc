// The cross-server rename's intent protocol (docs/ARCHITECTURE.md, rename)
// against real clfd processes: opposite renames between two servers that wait
// on each other's directory lock until a deadline, and kill -9 of the source
// or the destination server at the protocol's critical points (test-only
// fault hooks: CLF_TEST_FAULT in the server's environment). Afterwards every
// file has exactly one name and `clf fsck` finds nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;
using client::FileType;

constexpr uint32_t kRpcTimeoutMs = 1000;

CreateArgs DirArgs() {
  CreateArgs a;
  a.type = FileType::kDirectory;
  a.mode = 0755;
  return a;
}

class RenameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 3;
    o.rpc_timeout_ms = kRpcTimeoutMs;
    o.stripe_size = 64 * 1024;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
    // Directories until each server holds one (placement is by hash).
    for (int i = 0; i < 128 && dir_on_.size() < 3; ++i) {
      Result<Attr> d = c().CreateSync(c().root(), "d" + std::to_string(i), DirArgs());
      ASSERT_OK(d);
      dir_on_.emplace(ServerOf(d->handle), d->handle);
    }
    ASSERT_EQ(dir_on_.size(), 3u) << "128 directories never covered the 3 servers";
  }
  void TearDown() override { ::unsetenv("CLF_TEST_FAULT"); }

  client::Client& c() { return cluster_->client(); }

  // name -> handle of every entry of `dir` (nullopt if it cannot be listed).
  std::optional<std::map<std::string, Handle>> Names(Handle dir) {
    std::map<std::string, Handle> out;
    std::string after;
    for (;;) {
      Result<client::DirPage> p = c().ReadDirSync(dir, after, 256, false);
      if (!p.ok()) return std::nullopt;
      for (const client::DirEntry& e : p->entries) out[e.name] = e.handle;
      if (p->eof || p->entries.empty()) break;
      after = p->entries.back().name;
    }
    return out;
  }

  void ExpectFsckClean() {
    tools::RunResult r =
        TestCluster::RunClf({"fsck", "--cluster", cluster_->cluster_file()}, 120000);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("clean"), std::string::npos) << r.output;
  }

  // Restarts server k with CLF_TEST_FAULT=fault (so only k has it).
  void RestartWithFault(int k, const char* fault) {
    ASSERT_OK(cluster_->StopServer(k));
    ::setenv("CLF_TEST_FAULT", fault, 1);
    Status s = cluster_->RestartServer(k);
    ::unsetenv("CLF_TEST_FAULT");
    ASSERT_OK(s);
  }

  // Waits until server k exited by itself (the fault hook's _exit), then starts it again.
  void AwaitDeathAndRestart(int k) {
    ASSERT_GE(TestCluster::PollUntil([&] { return !cluster_->server_running(k); }, 10000), 0)
        << "server " << k << " did not hit its fault point\n" << cluster_->LogTail(k);
    ASSERT_OK(cluster_->KillServer(k, SIGKILL));  // reaps the exited child
    ASSERT_OK(cluster_->RestartServer(k));
  }

  std::unique_ptr<TestCluster> cluster_;
  std::map<ServerId, Handle> dir_on_;  // a directory on each server
};

// Two opposite renames at once (a/xi -> b/xi on a's server, b/yi -> a/yi on
// b's): each server holds its source directory's lock while it waits for the
// other's insert, so both inserts wait until the insert deadline. The
// outcome each client hears must match the namespace: OK means the new name
// only, a definite error (the server settled it) the old name only; never
// both names, never neither. kUnavailable is the client's own deadline (the
// outcome is unknown to it): then only "exactly one name" is checked.
TEST_F(RenameTest, OppositeRenamesNeverLeaveTwoNames) {
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  constexpr int kRounds = 50;
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_OK(c().CreateSync(a, "x" + std::to_string(i), CreateArgs{}));
    ASSERT_OK(c().CreateSync(b, "y" + std::to_string(i), CreateArgs{}));
  }
  std::vector<Status> sx(kRounds), sy(kRounds);
  int64_t worst_ms = 0;
  for (int i = 0; i < kRounds; ++i) {
    const std::string x = "x" + std::to_string(i), y = "y" + std::to_string(i);
    const int64_t t0 = tools::NowMs();
    std::thread t([&] { sx[i] = c().RenameSync(a, x, b, x).status(); });
    sy[i] = c().RenameSync(b, y, a, y).status();
    t.join();
    worst_ms = std::max(worst_ms, tools::NowMs() - t0);
  }
  // A deadlock broken by the insert deadline costs one deadline, not more.
  EXPECT_LE(worst_ms, 3 * kRpcTimeoutMs) << "a round took " << worst_ms << " ms";
  // Settled: nothing is left for the background to do (no Unavailable answers).
  auto na = Names(a), nb = Names(b);
  ASSERT_TRUE(na && nb);
  int moved = 0, failed = 0, unknown = 0;
  for (int i = 0; i < kRounds; ++i) {
    for (int dir = 0; dir < 2; ++dir) {
      const std::string name = (dir == 0 ? "x" : "y") + std::to_string(i);
      const Status& st = dir == 0 ? sx[i] : sy[i];
      const auto& from = dir == 0 ? *na : *nb;
      const auto& to = dir == 0 ? *nb : *na;
      const bool in_from = from.count(name) > 0, in_to = to.count(name) > 0;
      EXPECT_NE(in_from, in_to) << name << ": in source " << in_from << ", in destination "
                                << in_to << ", rename said " << st.ToString();
      if (st.ok()) {
        ++moved;
        EXPECT_TRUE(in_to && !in_from) << name << " renamed OK but not (only) at the new name";
      } else if (st.code() == Code::kUnavailable) {
        // The client's own deadline passed first (a loaded machine): it cannot
        // know the outcome; the namespace must still hold one name (above).
        ++unknown;
      } else {
        ++failed;
        EXPECT_TRUE(in_from && !in_to) << name << " rename failed (" << st.ToString()
                                       << ") but the name moved";
      }
    }
  }
  std::printf("opposite renames: %d moved, %d failed cleanly, %d unknown to the client, worst "
              "round %lld ms\n",
              moved, failed, unknown, static_cast<long long>(worst_ms));
  // Most answers are definite: the source server settles within the client's deadline.
  EXPECT_LE(unknown, kRounds / 2);
  ExpectFsckClean();
}

// kill -9 of the source server S right after the destination D applied the
// insert (before S deleted the source entry): at restart S replays its intent,
// asks D, and completes the rename.
TEST_F(RenameTest, SourceKilledAfterInsertCompletesAtRestart) {
  const int s = 1;
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  Result<Attr> f = c().CreateSync(a, "f", CreateArgs{});
  ASSERT_OK(f);
  RestartWithFault(s, "rename_after_insert");
  Result<client::RemoveResult> r = c().RenameSync(a, "f", b, "g");
  EXPECT_FALSE(r.ok()) << "the source server should have died in the rename";
  AwaitDeathAndRestart(s);
  std::optional<std::map<std::string, Handle>> na, nb;
  const int64_t took = TestCluster::PollUntil(
      [&] {
        na = Names(a);
        nb = Names(b);
        return na && nb && na->count("f") == 0 && nb->count("g") == 1;
      },
      10000);
  ASSERT_GE(took, 0) << "not settled: f in a " << (na ? na->count("f") : 9) << ", g in b "
                     << (nb ? nb->count("g") : 9) << "\n" << cluster_->LogTail(s);
  EXPECT_EQ(nb->at("g"), f->handle);
  Result<Attr> attr = c().GetAttrSync(f->handle);
  ASSERT_OK(attr);
  EXPECT_EQ(attr->nlink, 1u);
  ExpectFsckClean();
}

// kill -9 of D after it committed the insert, before it answered: S cannot
// learn the outcome, keeps the intent (the source entry stays and cannot be
// renamed or removed meanwhile), and completes once D is back. The insert
// replaced a file whose metadata lives on a third server: D's link drop for it
// is replayed at D's restart, once.
TEST_F(RenameTest, DestinationKilledAfterCommitSettlesWhenBack) {
  const int s = 1, d = 2;
  const Handle a = dir_on_.at(1), b = dir_on_.at(2), third = dir_on_.at(0);
  Result<Attr> f = c().CreateSync(a, "f", CreateArgs{});
  ASSERT_OK(f);
  // b/g with its metadata on server 0: created there, then renamed into b.
  Result<Attr> g = c().CreateSync(third, "g", CreateArgs{});
  ASSERT_OK(g);
  ASSERT_EQ(ServerOf(g->handle), 0u);
  ASSERT_OK(c().RenameSync(third, "g", b, "g"));
  RestartWithFault(d, "insert_after_commit");
  Result<client::RemoveResult> r = c().RenameSync(a, "f", b, "g");
  EXPECT_FALSE(r.ok()) << "the destination server should have died in the rename";
  ASSERT_GE(TestCluster::PollUntil([&] { return !cluster_->server_running(d); }, 10000), 0);
  ASSERT_OK(cluster_->KillServer(d, SIGKILL));  // reaps the exited child
  // While D is down the outcome is unknown: the source name is held.
  Result<client::RemoveResult> again = c().RenameSync(a, "f", a, "f2");
  EXPECT_STATUS(Code::kUnavailable, again.status());
  Result<client::RemoveResult> rm = c().RemoveSync(a, "f", false);
  EXPECT_STATUS(Code::kUnavailable, rm.status());
  ASSERT_OK(cluster_->RestartServer(d));
  std::optional<std::map<std::string, Handle>> na, nb;
  const int64_t took = TestCluster::PollUntil(
      [&] {
        na = Names(a);
        nb = Names(b);
        return na && nb && na->count("f") == 0 && nb->count("g") == 1;
      },
      10000);
  ASSERT_GE(took, 0) << "not settled\n" << cluster_->LogTail(s);
  EXPECT_EQ(nb->at("g"), f->handle);
  // The replaced file lost its only link: gone (once, not twice: f keeps nlink 1).
  EXPECT_GE(TestCluster::PollUntil([&] { return !c().GetAttrSync(g->handle).ok(); }, 10000), 0)
      << "replaced file " << g->handle << " still exists";
  Result<Attr> attr = c().GetAttrSync(f->handle);
  ASSERT_OK(attr);
  EXPECT_EQ(attr->nlink, 1u);
  ExpectFsckClean();
}

// kill -9 of D before it committed the insert: S learns at D's restart that
// the insert was never applied and rolls back; the file keeps its old name.
TEST_F(RenameTest, DestinationKilledBeforeCommitRollsBack) {
  const int d = 2;
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  Result<Attr> f = c().CreateSync(a, "f", CreateArgs{});
  ASSERT_OK(f);
  RestartWithFault(d, "insert_before_commit");
  Result<client::RemoveResult> r = c().RenameSync(a, "f", b, "g");
  EXPECT_FALSE(r.ok());
  AwaitDeathAndRestart(d);
  // Settled by the background (or by this rename, which settles first): the
  // name is free to rename again, and the first rename left nothing behind.
  Status again = Internal("not tried");
  ASSERT_GE(TestCluster::PollUntil(
                [&] {
                  again = c().RenameSync(a, "f", a, "f2").status();
                  return again.ok();
                },
                10000),
            0)
      << again.ToString();
  auto na = Names(a), nb = Names(b);
  ASSERT_TRUE(na && nb);
  EXPECT_EQ(na->count("f2"), 1u);
  EXPECT_EQ(na->count("f"), 0u);
  EXPECT_EQ(nb->count("g"), 0u);
  ExpectFsckClean();
}

// A cross-server rename onto another hard link of the same file changes
// nothing (POSIX): both names stay, nlink stays 2.
TEST_F(RenameTest, OntoOwnHardLinkAcrossServersIsNoOp) {
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  Result<Attr> f = c().CreateSync(a, "f", CreateArgs{});
  ASSERT_OK(f);
  ASSERT_OK(c().LinkSync(f->handle, b, "h"));
  ASSERT_OK(c().RenameSync(a, "f", b, "h"));
  auto na = Names(a), nb = Names(b);
  ASSERT_TRUE(na && nb);
  EXPECT_EQ(na->count("f"), 1u);
  EXPECT_EQ(nb->count("h"), 1u);
  Result<Attr> attr = c().GetAttrSync(f->handle);
  ASSERT_OK(attr);
  EXPECT_EQ(attr->nlink, 2u);
  ExpectFsckClean();
}

}  // namespace
}  // namespace clf::testing
