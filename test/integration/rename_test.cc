// The cross-server rename's intent protocol (docs/ARCHITECTURE.md, rename)
// against real clfd processes: opposite and cyclic renames between servers
// (no directory lock is held across servers, so none waits for a deadline),
// operations on a source name while its rename is in flight, the pruning of
// the destination's outcome records, and kill -9 of the source or the
// destination server at the protocol's critical points (test-only fault
// hooks: CLF_TEST_FAULT in the server's environment), with `clf fsck`
// reporting and settling what such a kill left pending. Afterwards every file
// has exactly one name and `clf fsck` finds nothing.
#include <grpcpp/grpcpp.h>
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
#include "clf/v1/peer.grpc.pb.h"
#include "common/status_grpc.h"
#include "common/tsan.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;
using client::FileType;

// Under TSan (several times slower, often on a loaded machine) a Create alone
// can outlast 1 s, and renames refused by each other (kBusy) retry only for a
// quarter of the RPC timeout before answering EBUSY.
constexpr uint32_t kRpcTimeoutMs = tsan::kActive ? 4000 : 1000;

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
    o.rpc_timeout_ms = rpc_timeout_ms_;
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

  tools::RunResult Fsck(bool repair) {
    std::vector<std::string> args = {"fsck", "--cluster", cluster_->cluster_file()};
    if (repair) args.push_back("--repair");
    return TestCluster::RunClf(args, 120000);
  }

  void ExpectFsckClean() {
    tools::RunResult r = Fsck(false);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("clean"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("pending"), std::string::npos) << r.output;
  }

  // Sums of the servers' rename record counts (Admin.Status); false if one is down.
  bool RenameRecords(uint64_t* intents, uint64_t* outcomes) {
    *intents = *outcomes = 0;
    for (const client::ServerStatus& s : c().ServerStatuses()) {
      if (!s.up) return false;
      *intents += s.rename_intents;
      *outcomes += s.rename_outcomes;
    }
    return true;
  }
  uint64_t OutcomesOn(ServerId k) {
    for (const client::ServerStatus& s : c().ServerStatuses()) {
      if (s.id == k) return s.rename_outcomes;
    }
    return ~uint64_t{0};
  }
  uint64_t IntentsOn(ServerId k) {
    for (const client::ServerStatus& s : c().ServerStatuses()) {
      if (s.id == k) return s.rename_intents;
    }
    return ~uint64_t{0};
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

  // One Peer call to server k as a server would make it (the peer secret), 5 s deadline.
  template <typename Fn>
  Status PeerCall(int k, Fn fn) {
    Result<std::string> secret = ReadSecret(cluster_->config().peer_secret_file);
    if (!secret.ok()) return secret.status();
    auto ch = grpc::CreateCustomChannel(cluster_->config().servers[static_cast<size_t>(k)].address,
                                        grpc::InsecureChannelCredentials(), ClfChannelArgs());
    std::unique_ptr<v1::Peer::Stub> stub = v1::Peer::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.AddMetadata(kSecretHeader, *secret);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return FromGrpc(fn(stub.get(), &ctx));
  }

  uint32_t rpc_timeout_ms_ = kRpcTimeoutMs;
  std::unique_ptr<TestCluster> cluster_;
  std::map<ServerId, Handle> dir_on_;  // a directory on each server
};

// With a longer RPC timeout: the destination's test-only 200 ms delay stays
// far inside the insert deadline on a loaded machine.
class RenameSlowDestinationTest : public RenameTest {
 protected:
  RenameSlowDestinationTest() { rpc_timeout_ms_ = 4000; }
};

// Two opposite renames at once (a/xi -> b/xi on a's server, b/yi -> a/yi on
// b's). Each source server commits its intent and releases its source
// directory before asking the other server to insert, so neither insert waits
// for the other rename: every rename succeeds (before, each held its source
// directory while its insert waited for the other's, until the insert
// deadline failed both with ETIMEDOUT: 22-68 of 100). The outcome each client
// hears must match the namespace: OK means the new name only; never both
// names, never neither.
TEST_F(RenameTest, OppositeRenamesNeverLeaveTwoNames) {
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  constexpr int kRounds = 50;
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_OK(c().CreateSync(a, "x" + std::to_string(i), CreateArgs{}));
    ASSERT_OK(c().CreateSync(b, "y" + std::to_string(i), CreateArgs{}));
  }
  std::vector<Status> sx(kRounds), sy(kRounds);
  for (int i = 0; i < kRounds; ++i) {
    const std::string x = "x" + std::to_string(i), y = "y" + std::to_string(i);
    std::thread t([&] { sx[i] = c().RenameSync(a, x, b, x).status(); });
    sy[i] = c().RenameSync(b, y, a, y).status();
    t.join();
  }
  auto na = Names(a), nb = Names(b);
  ASSERT_TRUE(na && nb);
  int moved = 0, timed_out = 0, other = 0;
  for (int i = 0; i < kRounds; ++i) {
    for (int dir = 0; dir < 2; ++dir) {
      const std::string name = (dir == 0 ? "x" : "y") + std::to_string(i);
      const Status& st = dir == 0 ? sx[i] : sy[i];
      const auto& from = dir == 0 ? *na : *nb;
      const auto& to = dir == 0 ? *nb : *na;
      const bool in_from = from.count(name) > 0, in_to = to.count(name) > 0;
      EXPECT_NE(in_from, in_to) << name << ": in source " << in_from << ", in destination "
                                << in_to << ", rename said " << st.ToString();
      EXPECT_TRUE(st.ok()) << name << ": " << st.ToString();
      if (st.ok()) {
        ++moved;
        EXPECT_TRUE(in_to && !in_from) << name << " renamed OK but not (only) at the new name";
      } else if (st.code() == Code::kTimedOut) {
        ++timed_out;
      } else {
        ++other;
      }
    }
  }
  std::printf("opposite renames: %d of %d moved, %d ETIMEDOUT, %d other errors\n", moved,
              2 * kRounds, timed_out, other);
  EXPECT_EQ(timed_out, 0);
  ExpectFsckClean();
}

// A cycle of three renames over three servers (a -> b, b -> c, c -> a, each
// source directory on another server), all at once: no server waits for
// another's directory, so all complete.
TEST_F(RenameTest, CyclicRenamesOverThreeServersAllComplete) {
  const Handle d[3] = {dir_on_.at(0), dir_on_.at(1), dir_on_.at(2)};
  constexpr int kRounds = 20;
  for (int i = 0; i < kRounds; ++i) {
    for (int k = 0; k < 3; ++k) {
      const std::string n = "c" + std::to_string(k) + "_" + std::to_string(i);
      ASSERT_OK(c().CreateSync(d[k], n, CreateArgs{}));
    }
  }
  for (int i = 0; i < kRounds; ++i) {
    Status st[3];
    std::vector<std::thread> ts;
    for (int k = 0; k < 3; ++k) {
      ts.emplace_back([&, k] {
        const std::string n = "c" + std::to_string(k) + "_" + std::to_string(i);
        st[k] = c().RenameSync(d[k], n, d[(k + 1) % 3], n).status();
      });
    }
    for (std::thread& t : ts) t.join();
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(st[k].ok()) << "round " << i << " rename from server " << k << ": "
                              << st[k].ToString();
    }
  }
  for (int k = 0; k < 3; ++k) {
    auto names = Names(d[k]);
    ASSERT_TRUE(names);
    const int from = (k + 2) % 3;  // what moved into d[k]
    for (int i = 0; i < kRounds; ++i) {
      EXPECT_EQ(names->count("c" + std::to_string(k) + "_" + std::to_string(i)), 0u);
      EXPECT_EQ(names->count("c" + std::to_string(from) + "_" + std::to_string(i)), 1u);
    }
  }
  ExpectFsckClean();
}

// a/x -> b/x and b/x -> a/x at once: each rename's target is the other's
// source, held by the other while it is in flight. The destination answers
// such an insert kBusy (it never waits there), the refused rename rolls back
// and retries: both renames end as one of the two serial orders. Either way
// the file that stays keeps its own name and the other file, replaced, is
// gone; never two names, never a lost link count.
TEST_F(RenameTest, CrossingRenamesOfOneNameSerialize) {
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  constexpr int kRounds = 20;
  int both_ok = 0;
  for (int i = 0; i < kRounds; ++i) {
    const std::string x = "s" + std::to_string(i);
    Result<Attr> fa = c().CreateSync(a, x, CreateArgs{});
    Result<Attr> fb = c().CreateSync(b, x, CreateArgs{});
    ASSERT_OK(fa);
    ASSERT_OK(fb);
    Status sa, sb;
    std::thread t([&] { sa = c().RenameSync(a, x, b, x).status(); });
    sb = c().RenameSync(b, x, a, x).status();
    t.join();
    // Serial orders: a's rename first (b's then moves a's file back) or b's first.
    for (const Status* st : {&sa, &sb}) {
      EXPECT_TRUE(st->ok() || st->code() == Code::kNotFound) << x << ": " << st->ToString();
    }
    if (sa.ok() && sb.ok()) ++both_ok;
    auto na = Names(a), nb = Names(b);
    ASSERT_TRUE(na && nb);
    const bool in_a = na->count(x) > 0, in_b = nb->count(x) > 0;
    ASSERT_NE(in_a, in_b) << x << ": in a " << in_a << ", in b " << in_b << "; renames said "
                          << sa.ToString() << " / " << sb.ToString();
    const Handle kept = in_a ? fa->handle : fb->handle, lost = in_a ? fb->handle : fa->handle;
    EXPECT_EQ(in_a ? na->at(x) : nb->at(x), kept) << x;
    Result<Attr> k = c().GetAttrSync(kept);
    ASSERT_OK(k);
    EXPECT_EQ(k->nlink, 1u) << x;
    EXPECT_FALSE(c().GetAttrSync(lost).ok()) << x << ": the replaced file still exists";
  }
  std::printf("crossing renames of one name: both succeeded in %d of %d rounds\n", both_ok,
              kRounds);
  ExpectFsckClean();
}

// Remove and rename of a source name while its cross-server rename is in
// flight (the destination is slow: CLF_TEST_FAULT=insert_slow): they wait for
// it instead of aborting it, then answer ENOENT (the name moved); the file
// keeps its one new name.
TEST_F(RenameSlowDestinationTest, OperationsOnASourceNameWaitForItsRename) {
  const int s = 1, d = 2;
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  RestartWithFault(d, "insert_slow");
  for (int round = 0; round < 2; ++round) {
    const std::string f = "f" + std::to_string(round), g = "g" + std::to_string(round);
    Result<Attr> fa = c().CreateSync(a, f, CreateArgs{});
    ASSERT_OK(fa);
    Status renamed = Internal("not run");
    std::thread t([&] { renamed = c().RenameSync(a, f, b, g).status(); });
    // In flight: the source server holds the intent while the insert sleeps.
    const int64_t seen = TestCluster::PollUntil([&] { return IntentsOn(s) == 1; }, 10000);
    Status second = round == 0 ? c().RemoveSync(a, f, false).status()
                               : c().RenameSync(a, f, a, f + "x").status();
    t.join();
    ASSERT_GE(seen, 0) << "the rename never showed as in flight";
    EXPECT_OK(renamed);
    EXPECT_EQ(second.code(), Code::kNotFound)
        << (round == 0 ? "remove: " : "rename: ") << second.ToString();
    auto na = Names(a), nb = Names(b);
    ASSERT_TRUE(na && nb);
    EXPECT_EQ(na->count(f), 0u);
    EXPECT_EQ(na->count(f + "x"), 0u);
    ASSERT_EQ(nb->count(g), 1u);
    EXPECT_EQ(nb->at(g), fa->handle);
    Result<Attr> attr = c().GetAttrSync(fa->handle);
    ASSERT_OK(attr);
    EXPECT_EQ(attr->nlink, 1u);
  }
  ExpectFsckClean();
}

// The destination's outcome records ('P') are deleted once the source server
// tells it (Peer.ForgetRenames, from its background pass) that they are
// settled: held back while the source's background pass is off, back to 0
// once it runs again. The intents themselves are gone at once.
TEST_F(RenameTest, OutcomeRecordsArePrunedOnceSettled) {
  const int s = 1, d = 2;
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  RestartWithFault(s, "no_background_settle");
  constexpr int kRenames = 40;
  for (int i = 0; i < kRenames; ++i) {
    const std::string n = "p" + std::to_string(i);
    ASSERT_OK(c().CreateSync(a, n, CreateArgs{}));
    ASSERT_OK(c().RenameSync(a, n, b, n));
  }
  EXPECT_EQ(IntentsOn(s), 0u);
  EXPECT_EQ(OutcomesOn(d), static_cast<uint64_t>(kRenames));
  ASSERT_OK(cluster_->StopServer(s));
  ASSERT_OK(cluster_->RestartServer(s));
  uint64_t intents = 0, outcomes = 0;
  EXPECT_GE(TestCluster::PollUntil(
                [&] { return RenameRecords(&intents, &outcomes) && intents == 0 && outcomes == 0; },
                10000),
            0)
      << intents << " intents, " << outcomes << " outcome records left";
  // The namespace is untouched by the pruning, and a new intent of the
  // source (above the destination's mark) is served.
  auto nb = Names(b);
  ASSERT_TRUE(nb);
  for (int i = 0; i < kRenames; ++i) EXPECT_EQ(nb->count("p" + std::to_string(i)), 1u);
  ASSERT_OK(c().CreateSync(a, "later", CreateArgs{}));
  ASSERT_OK(c().RenameSync(a, "later", b, "later"));
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

// Peer.ForgetRenames, raw (as a source server would send it): the mark is
// validated, the receiver's outcome records below it are deleted, and from
// then on an InsertEntry carrying an intent id below the mark is refused
// whether its record existed or not (a late insert cannot apply once its
// record is gone); one above the mark is served.
TEST_F(RenameTest, ForgottenIntentsAreFencedAtTheDestination) {
  const int k = 2;  // the destination
  const Handle b = dir_on_.at(2);
  Result<Attr> f = c().CreateSync(b, "f", CreateArgs{});
  ASSERT_OK(f);
  v1::ForgetRenamesReply rep;
  auto forget = [&](uint64_t below) {
    v1::ForgetRenamesRequest q;
    q.set_settled_below(below);
    return PeerCall(k, [&](v1::Peer::Stub* p, grpc::ClientContext* ctx) {
      return p->ForgetRenames(ctx, q, &rep);
    });
  };
  EXPECT_STATUS(Code::kInvalid, forget(0));
  EXPECT_STATUS(Code::kInvalid, forget(MakeHandle(1, 0)));
  EXPECT_STATUS(Code::kInvalid, forget(MakeHandle(k, 5)));  // the receiver's own ids
  EXPECT_STATUS(Code::kInvalid, forget(MakeHandle(3, 5)));  // no such server

  // An aborted outcome record of an intent of server 1 (ResolveRename fences it).
  const uint64_t old_id = MakeHandle(1, 800000);
  v1::ResolveRenameRequest rq;
  rq.set_intent_id(old_id);
  v1::ResolveRenameReply rrep;
  auto resolve = [&] {
    return PeerCall(k, [&](v1::Peer::Stub* p, grpc::ClientContext* ctx) {
      return p->ResolveRename(ctx, rq, &rrep);
    });
  };
  ASSERT_OK(resolve());
  EXPECT_FALSE(rrep.applied());
  EXPECT_GE(OutcomesOn(k), 1u);
  ASSERT_OK(forget(MakeHandle(1, 900000)));
  EXPECT_GE(rep.pruned(), 1u);
  EXPECT_EQ(OutcomesOn(k), 0u);
  ASSERT_OK(forget(MakeHandle(1, 900000)));  // again: nothing left
  EXPECT_EQ(rep.pruned(), 0u);
  EXPECT_STATUS(Code::kInternal, resolve());  // forgotten: the outcome is never guessed

  v1::InsertEntryRequest ie;
  ie.set_parent(b);
  ie.set_name("late");
  ie.set_handle(f->handle);
  ie.set_type(v1::FT_REGULAR);
  v1::InsertEntryReply irep;
  auto insert = [&](uint64_t id) {
    ie.set_intent_id(id);
    return PeerCall(k, [&](v1::Peer::Stub* p, grpc::ClientContext* ctx) {
      return p->InsertEntry(ctx, ie, &irep);
    });
  };
  EXPECT_STATUS(Code::kCancelled, insert(old_id));                 // its record was deleted
  EXPECT_STATUS(Code::kCancelled, insert(MakeHandle(1, 850000)));  // never seen, below the mark
  auto nb = Names(b);
  ASSERT_TRUE(nb);
  EXPECT_EQ(nb->count("late"), 0u);
  // Above the mark: served (onto the file's own name: nothing changes).
  ie.set_name("f");
  ASSERT_OK(insert(MakeHandle(1, 900001)));
  EXPECT_TRUE(irep.same_file());
  ExpectFsckClean();
}

// kill -9 of S after it committed its intent, before it called D: at restart
// S asks D, which fences the intent; S rolls back, the file keeps its name.
TEST_F(RenameTest, SourceKilledAfterIntentRollsBackAtRestart) {
  const int s = 1;
  const Handle a = dir_on_.at(1), b = dir_on_.at(2);
  Result<Attr> f = c().CreateSync(a, "f", CreateArgs{});
  ASSERT_OK(f);
  RestartWithFault(s, "rename_after_intent");
  Result<client::RemoveResult> r = c().RenameSync(a, "f", b, "g");
  EXPECT_FALSE(r.ok()) << "the source server should have died in the rename";
  AwaitDeathAndRestart(s);
  uint64_t intents = 0, outcomes = 0;
  ASSERT_GE(TestCluster::PollUntil(
                [&] { return RenameRecords(&intents, &outcomes) && intents == 0 && outcomes == 0; },
                10000),
            0)
      << intents << " intents, " << outcomes << " outcome records left\n" << cluster_->LogTail(s);
  auto na = Names(a), nb = Names(b);
  ASSERT_TRUE(na && nb);
  ASSERT_EQ(na->count("f"), 1u);
  EXPECT_EQ(na->at("f"), f->handle);
  EXPECT_EQ(nb->count("g"), 0u);
  ExpectFsckClean();
  ASSERT_OK(c().RenameSync(a, "f", b, "g"));  // the name is free again
  ExpectFsckClean();
}

// `clf fsck` and a rename left pending: S killed after D applied the insert,
// restarted with its background settling off (CLF_TEST_FAULT=
// no_background_settle), so the file (or directory) has both names until
// someone settles. fsck reports the pending rename and not what it explains
// (a wrong link count for a file's two names; for a directory its second
// entry and its two parents' link counts) as corruption; --repair settles it
// as the background would.
class RenameFsckTest : public RenameTest {
 protected:
  void PendingRenameThenFsck(bool directory) {
    const int s = 1;
    const Handle a = dir_on_.at(1), b = dir_on_.at(2);
    Result<Attr> f = c().CreateSync(a, "f", directory ? DirArgs() : CreateArgs{});
    ASSERT_OK(f);
    RestartWithFault(s, "rename_after_insert");
    EXPECT_FALSE(c().RenameSync(a, "f", b, "g").ok());
    ASSERT_GE(TestCluster::PollUntil([&] { return !cluster_->server_running(s); }, 10000), 0);
    ASSERT_OK(cluster_->KillServer(s, SIGKILL));  // reaps the exited child
    ::setenv("CLF_TEST_FAULT", "no_background_settle", 1);
    Status up = cluster_->RestartServer(s);
    ::unsetenv("CLF_TEST_FAULT");
    ASSERT_OK(up);
    auto na = Names(a), nb = Names(b);
    ASSERT_TRUE(na && nb);
    ASSERT_EQ(na->count("f"), 1u) << "settled already: the test saw nothing pending";
    ASSERT_EQ(nb->count("g"), 1u);
    EXPECT_EQ(IntentsOn(s), 1u);

    tools::RunResult r = Fsck(false);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("pending-rename: rename"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("'f' of directory"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("1 cross-server rename(s) pending"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("wrong-link-count"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("directory-with-several-entries"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("clean"), std::string::npos) << r.output;

    r = Fsck(true);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("settled pending-rename"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("repaired"), std::string::npos) << r.output;
    na = Names(a);
    nb = Names(b);
    ASSERT_TRUE(na && nb);
    EXPECT_EQ(na->count("f"), 0u);
    ASSERT_EQ(nb->count("g"), 1u);
    EXPECT_EQ(nb->at("g"), f->handle);
    Result<Attr> attr = c().GetAttrSync(f->handle);
    ASSERT_OK(attr);
    EXPECT_EQ(attr->nlink, directory ? 2u : 1u);
    EXPECT_EQ(IntentsOn(s), 0u);
    ExpectFsckClean();
  }
};

TEST_F(RenameFsckTest, PendingFileRenameReportedAndSettledByRepair) {
  PendingRenameThenFsck(false);
}

TEST_F(RenameFsckTest, PendingDirectoryRenameReportedAndSettledByRepair) {
  PendingRenameThenFsck(true);
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
