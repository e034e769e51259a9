// A server that is down: operations that need it fail with kUnavailable within
// a bounded time, everything else keeps working, and after a restart all
// acknowledged data and metadata are there. Also kill -9 in the middle of a
// workload.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "common/layout.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;
using client::FileType;

constexpr uint32_t kRpcTimeoutMs = 1000;
// A failing operation may take a few hops, each bounded by the RPC deadline.
constexpr int64_t kBoundMs = 8 * kRpcTimeoutMs;

CreateArgs DirArgs() {
  CreateArgs a;
  a.type = FileType::kDirectory;
  a.mode = 0755;
  return a;
}

class ServerDownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 3;
    o.stripe_size = 64 * 1024;
    o.rpc_timeout_ms = kRpcTimeoutMs;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  client::Client& c() { return cluster_->client(); }
  std::unique_ptr<TestCluster> cluster_;
};

// Times one call; fails the test if it took longer than kBoundMs.
template <typename F>
auto Timed(const char* what, F&& f) {
  const int64_t t0 = tools::NowMs();
  auto r = f();
  const int64_t took = tools::NowMs() - t0;
  EXPECT_LE(took, kBoundMs) << what << " took " << took << " ms with a server down";
  return r;
}

TEST_F(ServerDownTest, FailsFastThenRecovers) {
  // Directories until one lives on server 1 and one on server 2 (placement is by hash).
  std::map<ServerId, Attr> dir_on;
  int local_dir_index = -1;
  for (int i = 0; i < 64 && dir_on.size() < 3; ++i) {
    Result<Attr> d = c().CreateSync(c().root(), "d" + std::to_string(i), DirArgs());
    ASSERT_OK(d);
    if (dir_on.emplace(ServerOf(d->handle), *d).second && ServerOf(d->handle) == 1) {
      local_dir_index = i;
    }
  }
  ASSERT_TRUE(dir_on.count(1) && dir_on.count(2)) << "64 directories never landed on servers 1 and 2";
  const int down = 2;
  const Attr local_dir = dir_on.at(1);
  // New files below local_dir have one data server each (its first server is chosen by hash).
  client::SetAttrArgs sl;
  sl.valid = client::kSetLayout;
  sl.layout = c().cluster().default_layout;
  sl.layout.stripe_count = 1;
  ASSERT_OK(c().SetAttrSync(local_dir.handle, sl));

  // A file striped over every server, acknowledged (synced) before the crash.
  Result<Attr> wide = c().CreateSync(c().root(), "wide", CreateArgs{});
  ASSERT_OK(wide);
  ASSERT_EQ(wide->layout.stripe_count, 3u);
  const std::string wide_data = PatternBytes(11, 0, 1 << 20);
  ASSERT_OK(c().WriteSync(wide->handle, wide->layout, 0, wide_data));
  ASSERT_OK(c().SyncSync(wide->handle, wide->layout));
  // Metadata on the server that goes down.
  const Attr remote_dir = dir_on.at(2);
  ASSERT_OK(c().CreateSync(remote_dir.handle, "on-down-server", CreateArgs{}));

  ASSERT_OK(cluster_->KillServer(down, 9));

  // Needs the down server: fails with kUnavailable, quickly.
  EXPECT_STATUS(Code::kUnavailable, Timed("read of a wide file", [&] {
                  return c().ReadSync(wide->handle, wide->layout, 0, wide_data.size());
                }));
  EXPECT_STATUS(Code::kUnavailable, Timed("write of a wide file", [&] {
                  return c().WriteSync(wide->handle, wide->layout, 0, wide_data);
                }));
  EXPECT_STATUS(Code::kUnavailable, Timed("lookup in a dir on the down server", [&] {
                  return c().LookupSync(remote_dir.handle, "on-down-server");
                }));
  // One-hop create: a file striped over the down server is created by its
  // directory's server alone (objects appear on first write)...
  EXPECT_OK(Timed("create of a wide file", [&] {
    return c().CreateSync(c().root(), "wide2", CreateArgs{});
  }));
  // ...and a closed file's size is kept by its metadata server: stat needs no
  // data server, so it works (exact) with one of them down.
  Result<Attr> wide_st = Timed("stat of a wide file", [&] { return c().GetAttrSync(wide->handle); });
  ASSERT_OK(wide_st);
  EXPECT_EQ(wide_st->size, wide_data.size());
  EXPECT_OK(c().LookupSync(c().root(), "wide2"));
  {
    std::vector<client::ServerStatus> st =
        Timed("ServerStatuses", [&] { return c().ServerStatuses(); });
    ASSERT_EQ(st.size(), 3u);
    EXPECT_TRUE(st[0].up);
    EXPECT_TRUE(st[1].up);
    EXPECT_FALSE(st[2].up);
  }
  Result<client::StatFs> sf = Timed("statfs", [&] { return c().StatFsSync(); });
  if (sf.ok()) {
    EXPECT_EQ(sf->servers_down, 1u);
  } else {
    EXPECT_EQ(sf.status().code(), Code::kUnavailable);
  }

  // Does not need it: works. A create below local_dir (metadata on server 1)
  // always works; writing works whenever the file's one data server is up and
  // fails cleanly (and quickly) otherwise.
  std::optional<Attr> lf;
  int on_down = 0;
  for (int i = 0; i < 12; ++i) {
    Result<Attr> f = Timed("create of a one-server file", [&] {
      return c().CreateSync(local_dir.handle, "local" + std::to_string(i), CreateArgs{});
    });
    ASSERT_OK(f);
    ASSERT_EQ(f->layout.stripe_count, 1u);
    if (DataServers(f->layout, 3) == std::vector<ServerId>{down}) {
      ++on_down;
      EXPECT_STATUS(Code::kUnavailable, Timed("write to a file on the down server", [&] {
                      return c().WriteSync(f->handle, f->layout, 0, "x");
                    }));
      continue;
    }
    if (!lf) lf = *f;
  }
  ASSERT_TRUE(lf.has_value()) << "12 one-server files all landed on the down server";
  const std::string local_data = PatternBytes(12, 0, 200 * 1024);
  ASSERT_OK(c().WriteSync(lf->handle, lf->layout, 0, local_data));
  ASSERT_OK(c().SyncSync(lf->handle, lf->layout));
  Result<std::string> lr = c().ReadSync(lf->handle, lf->layout, 0, local_data.size());
  ASSERT_OK(lr);
  EXPECT_EQ(FirstDifference(*lr, local_data), -1);
  EXPECT_OK(c().LookupSync(c().root(), "d" + std::to_string(local_dir_index)));
  EXPECT_OK(c().GetAttrSync(c().root()));
  EXPECT_OK(c().ReadDirSync(local_dir.handle, "", 100, true));

  // Restart: everything acknowledged is there, and the cluster is whole again.
  ASSERT_OK(cluster_->RestartServer(down));
  // The server answers again; the test client's channel and the other servers'
  // peer channels to it reconnect (gRPC reconnect backoff, at most ~1 s here).
  // The stat collective (client -> server 0 -> peers) and a read of the restarted
  // server's units must work again within a bound.
  const int64_t recovered = TestCluster::PollUntil(
      [&] {
        return c().GetAttrSync(wide->handle).ok() &&
               c().ReadSync(wide->handle, wide->layout, 0, wide_data.size()).ok();
      },
      10000);
  ASSERT_GE(recovered, 0) << "no recovery 10 s after the restart";
  EXPECT_LE(recovered, 3000) << "operations kept failing " << recovered
                             << " ms after the restarted server answered";
  Result<std::string> wr = c().ReadSync(wide->handle, wide->layout, 0, wide_data.size());
  ASSERT_OK(wr);
  EXPECT_EQ(FirstDifference(*wr, wide_data), -1);
  Result<Attr> wa = c().GetAttrSync(wide->handle);
  ASSERT_OK(wa);
  EXPECT_EQ(wa->size, wide_data.size());
  EXPECT_OK(c().LookupSync(remote_dir.handle, "on-down-server"));
  Result<std::string> lr2 = c().ReadSync(lf->handle, lf->layout, 0, local_data.size());
  ASSERT_OK(lr2);
  EXPECT_EQ(FirstDifference(*lr2, local_data), -1);
  EXPECT_OK(c().CreateSync(c().root(), "wide3", CreateArgs{}));
  RecordProperty("files_on_down_server", on_down);
}

// Right after a server comes back, read-only calls that need it work on the
// first try, both from the client and through another server's peer channel,
// although those channels last saw it refuse connections and may still be
// waiting out gRPC's reconnect backoff (common/status_grpc.cc: such calls are
// retried when the server could not be reached, and reconnects are quick).
TEST_F(ServerDownTest, ReadOnlyCallsWorkAtOnceAfterARestart) {
  std::map<ServerId, Attr> dir_on;
  for (int i = 0; i < 64 && dir_on.size() < 3; ++i) {
    Result<Attr> d = c().CreateSync(c().root(), "d" + std::to_string(i), DirArgs());
    ASSERT_OK(d);
    dir_on.emplace(ServerOf(d->handle), *d);
  }
  ASSERT_TRUE(dir_on.count(1) && dir_on.count(2)) << "64 directories never landed on servers 1 and 2";
  const int down = 2;
  // A file made in the directory on server 2 and renamed into the one on
  // server 1: its name is on server 1, its inode stays on server 2, so a
  // lookup of it asks server 1, which asks server 2 (a peer call).
  Result<Attr> f = c().CreateSync(dir_on.at(2).handle, "f", CreateArgs{});
  ASSERT_OK(f);
  ASSERT_EQ(ServerOf(f->handle), static_cast<ServerId>(down));
  ASSERT_OK(c().RenameSync(dir_on.at(2).handle, "f", dir_on.at(1).handle, "moved"));
  const std::string data = PatternBytes(21, 0, 3000);
  ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, data));
  ASSERT_OK(c().SyncSync(f->handle, f->layout));
  Result<Attr> via_peer = c().LookupSync(dir_on.at(1).handle, "moved");
  ASSERT_OK(via_peer);
  ASSERT_EQ(via_peer->handle, f->handle);

  ASSERT_OK(cluster_->KillServer(down, 9));
  // Until just before the restart, both paths fail: the client's channel and
  // server 1's peer channel to server 2 each last saw a refused connection.
  EXPECT_STATUS(Code::kUnavailable, c().LookupSync(dir_on.at(1).handle, "moved"));
  EXPECT_STATUS(Code::kUnavailable, c().GetAttrSync(f->handle));
  ASSERT_OK(cluster_->RestartServer(down));
  // No polling: the first calls after the restart must work.
  Result<Attr> l = c().LookupSync(dir_on.at(1).handle, "moved");
  ASSERT_OK(l);
  EXPECT_EQ(l->handle, f->handle);
  EXPECT_EQ(l->size, data.size());
  Result<Attr> a = c().GetAttrSync(f->handle);
  ASSERT_OK(a);
  EXPECT_EQ(a->size, data.size());
  EXPECT_OK(c().ReadDirSync(dir_on.at(2).handle, "", 100, true));
  Result<std::string> r = c().ReadSync(f->handle, f->layout, 0, data.size());
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, data), -1);
}

TEST_F(ServerDownTest, CleanStopAndRestartKeepsEverything) {
  std::vector<std::pair<Attr, std::string>> files;
  for (int i = 0; i < 20; ++i) {
    Result<Attr> f = c().CreateSync(c().root(), "f" + std::to_string(i), CreateArgs{});
    ASSERT_OK(f);
    std::string data = PatternBytes(100 + static_cast<uint64_t>(i), 0, 1000u * static_cast<size_t>(i * 7 + 1));
    ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, data));
    files.emplace_back(*f, std::move(data));
  }
  ASSERT_OK(c().SetXattrSync(files[0].first.handle, "user.k", "v", 0));
  for (int k = 0; k < cluster_->size(); ++k) ASSERT_OK(cluster_->StopServer(k));
  for (int k = 0; k < cluster_->size(); ++k) ASSERT_OK(cluster_->RestartServer(k));
  // Channels reconnect after gRPC's reconnect backoff (at most ~1 s here).
  const int64_t recovered = TestCluster::PollUntil(
      [&] { return c().GetAttrSync(files.back().first.handle).ok(); }, 10000);
  ASSERT_GE(recovered, 0) << "no recovery 10 s after the restart";
  EXPECT_LE(recovered, 3000);
  for (const auto& [a, data] : files) {
    Result<Attr> got = c().GetAttrSync(a.handle);
    ASSERT_OK(got);
    EXPECT_EQ(got->size, data.size());
    Result<std::string> r = c().ReadSync(a.handle, a.layout, 0, data.size());
    ASSERT_OK(r);
    EXPECT_EQ(FirstDifference(*r, data), -1);
  }
  Result<std::string> x = c().GetXattrSync(files[0].first.handle, "user.k");
  ASSERT_OK(x);
  EXPECT_EQ(*x, "v");
}

// A handle is never given twice, not even by a server restarted by kill -9:
// not a handle reserved for a lease holder's creates (it may be used after
// the restart), not a removed file's (its objects may not be purged yet).
// Before, a restart resumed the counter at the highest handle in use, and
// both came back.
TEST_F(ServerDownTest, HandlesAreNeverGivenTwiceAcrossARestart) {
  Result<Attr> a = c().CreateSync(c().root(), "a", CreateArgs{});
  ASSERT_OK(a);
  std::promise<Result<client::DirLeaseGrant>> got;
  c().AcquireDirLease(c().root(), 16, false, client::Caller{},
                      [&](Result<client::DirLeaseGrant> g) { got.set_value(std::move(g)); });
  Result<client::DirLeaseGrant> g = got.get_future().get();
  ASSERT_OK(g);
  ASSERT_TRUE(g->granted) << g->refused;
  ASSERT_EQ(g->handle_count, 16u);
  std::promise<Status> released;
  c().ReleaseDirLease(c().root(), [&](Status st) { released.set_value(st); });
  ASSERT_OK(released.get_future().get());
  Result<Attr> b = c().CreateSync(c().root(), "b", CreateArgs{});
  ASSERT_OK(b);
  ASSERT_OK(c().RemoveSync(c().root(), "b", false));
  const Handle given = std::max(b->handle, g->handle_first + g->handle_count - 1);
  const int server = static_cast<int>(ServerOf(c().root()));
  ASSERT_OK(cluster_->KillServer(server, 9));
  ASSERT_OK(cluster_->RestartServer(server));
  Result<Attr> fresh = Status(Code::kUnavailable, "not tried");
  TestCluster::PollUntil([&] { return (fresh = c().CreateSync(c().root(), "c", CreateArgs{})).ok(); }, 10000);
  ASSERT_OK(fresh);
  EXPECT_EQ(ServerOf(fresh->handle), ServerOf(given));
  EXPECT_GT(fresh->handle, given) << "a handle came back after the restart";
}

// kill -9 of one server while a writer creates, writes and syncs files; after a
// restart every acknowledged file is there with its data.
TEST_F(ServerDownTest, Kill9MidWorkloadLosesNothingAcknowledged) {
  struct Acked {
    std::string name;
    Attr attr;
    std::string data;
  };
  std::mutex mu;
  std::vector<Acked> acked;
  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};
  auto writer = [&](int id) {
    for (int i = 0; !stop.load() && i < 100000; ++i) {
      std::string name = "w" + std::to_string(id) + "-" + std::to_string(i);
      Result<Attr> f = c().CreateSync(c().root(), name, CreateArgs{});
      if (!f.ok()) {
        ++failures;
        continue;
      }
      std::string data = PatternBytes(static_cast<uint64_t>(id * 100000 + i), 0,
                                      static_cast<size_t>(4096 + (i % 17) * 20000));
      if (!c().WriteSync(f->handle, f->layout, 0, data).ok() ||
          !c().SyncSync(f->handle, f->layout).ok()) {
        ++failures;
        continue;
      }
      std::lock_guard<std::mutex> l(mu);
      acked.push_back({name, *f, std::move(data)});
    }
  };
  std::thread t1(writer, 1), t2(writer, 2);
  auto acked_count = [&] {
    std::lock_guard<std::mutex> l(mu);
    return acked.size();
  };
  // Let the workload get going (progress, not time, decides).
  const int64_t deadline = tools::NowMs() + 60000;
  while (acked_count() < 30 && tools::NowMs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const size_t before_kill = acked_count();
  Status killed = cluster_->KillServer(1, 9);
  // Keep the workload running against the damaged cluster for a while.
  const int before_fail = failures.load();
  const int64_t d2 = tools::NowMs() + 20000;
  while (failures.load() < before_fail + 4 && tools::NowMs() < d2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Status restarted = killed.ok() ? cluster_->RestartServer(1) : killed;
  // And after the restart, until new files are acknowledged again.
  const size_t after_restart = acked_count();
  const int64_t d3 = tools::NowMs() + 30000;
  while (acked_count() < after_restart + 10 && tools::NowMs() < d3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  t1.join();
  t2.join();
  ASSERT_OK(killed);
  ASSERT_OK(restarted);
  EXPECT_GE(before_kill, 30u);
  EXPECT_GE(acked_count(), after_restart + 10) << "no progress after the restart";
  EXPECT_GE(failures.load(), before_fail + 4) << "ops with a server killed did not fail";

  for (const Acked& a : acked) {
    SCOPED_TRACE(a.name);
    Result<Attr> l = c().LookupSync(c().root(), a.name);
    ASSERT_OK(l);
    EXPECT_EQ(l->handle, a.attr.handle);
    EXPECT_EQ(l->size, a.data.size());
    Result<std::string> r = c().ReadSync(a.attr.handle, a.attr.layout, 0, a.data.size());
    ASSERT_OK(r);
    ASSERT_EQ(FirstDifference(*r, a.data), -1);
  }
}

}  // namespace
}  // namespace clf::testing
