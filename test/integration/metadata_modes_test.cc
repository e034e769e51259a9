// metadata_mode = "client" (paper 004's client-driven baseline) end to end on
// real clfd processes: the client creates / removes / stats every data object
// itself, the data servers check the metadata server's capabilities, the
// Baseline calls are refused outside client mode; and in collective mode a
// participant that stops or dies in the middle of creates leaves no entry,
// inode or object behind (clf fsck).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "clf/v1/admin.grpc.pb.h"
#include "clf/v1/baseline.grpc.pb.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/status_grpc.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;

bool Holds(client::Client& c, ServerId s, Handle h) {
  Result<client::Client::ObjectListing> l = c.ListObjects(s);
  if (!l.ok()) {
    ADD_FAILURE() << "ListObjects(" << s << "): " << l.status().ToString();
    return false;
  }
  return std::find(l->data_objects.begin(), l->data_objects.end(), h) != l->data_objects.end();
}

size_t DataObjects(client::Client& c, ServerId s) {
  Result<client::Client::ObjectListing> l = c.ListObjects(s);
  if (!l.ok()) {
    ADD_FAILURE() << "ListObjects(" << s << "): " << l.status().ToString();
    return 0;
  }
  return l->data_objects.size();
}

// Until every server reports no pending garbage (removals of data objects).
bool GarbageDrained(client::Client& c) {
  for (const client::ServerStatus& s : c.ServerStatuses()) {
    if (!s.up || s.garbage != 0) return false;
  }
  return true;
}

// SIGSTOP, then wait until the kernel shows the process stopped ('T' in /proc/pid/stat).
bool StopProcess(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  return TestCluster::PollUntil(
             [pid] {
               Result<std::string> st =
                   tools::ReadFileToString("/proc/" + std::to_string(pid) + "/stat");
               if (!st.ok()) return false;
               const size_t paren = st->rfind(')');
               return paren != std::string::npos && paren + 2 < st->size() &&
                      (*st)[paren + 2] == 'T';
             },
             5000) >= 0;
}

// `clf fsck` exit code and output (0: clean).
tools::RunResult Fsck(const TestCluster& cluster) {
  return TestCluster::RunClf({"fsck", "--cluster", cluster.cluster_file()}, 120000);
}

std::unique_ptr<TestCluster> StartCluster(MetadataMode mode, int servers, uint32_t timeout_ms) {
  ClusterOptions o;
  o.servers = servers;
  o.stripe_size = 64 * 1024;
  o.rpc_timeout_ms = timeout_ms;
  o.metadata_mode = mode;
  auto c = std::make_unique<TestCluster>(o);
  Status st = c->Start();
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return nullptr;
  return c;
}

TEST(ClientModeTest, CreateStatRemoveReachEveryDataServer) {
  auto cluster = StartCluster(MetadataMode::kClient, 3, 2000);
  ASSERT_NE(cluster, nullptr);
  client::Client& c = cluster->client();
  Result<Attr> f = c.CreateSync(c.root(), "f", CreateArgs{});
  ASSERT_OK(f);
  // The client created the object on each of the file's data servers (all three).
  const std::vector<ServerId> ds = DataServers(f->layout, 3);
  ASSERT_EQ(ds.size(), 3u);
  for (ServerId s : ds) EXPECT_TRUE(Holds(c, s, f->handle)) << "server " << s;

  // Written but never reported to M: only the client-driven stat of the objects sees the size.
  const std::string data = PatternBytes(3, 0, 200 * 1024);
  ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, data));
  Result<Attr> st = c.GetAttrSync(f->handle);
  ASSERT_OK(st);
  EXPECT_EQ(st->size, data.size());
  EXPECT_GT(st->blocks, 0u);

  // A second create of the same name: EEXIST, and no object left of the attempt.
  size_t before = 0;
  for (ServerId s : ds) before += DataObjects(c, s);
  Result<Attr> again = c.CreateSync(c.root(), "f", CreateArgs{});
  EXPECT_STATUS(Code::kExists, again);
  size_t after = 0;
  for (ServerId s : ds) after += DataObjects(c, s);
  EXPECT_EQ(after, before) << "the failed create left objects behind";

  // Remove: the objects are gone when the call returns (no background collective).
  ASSERT_OK(c.RemoveSync(c.root(), "f", false));
  for (ServerId s : ds) EXPECT_FALSE(Holds(c, s, f->handle)) << "server " << s;
  EXPECT_STATUS(Code::kNotFound, c.LookupSync(c.root(), "f"));
  tools::RunResult r = Fsck(*cluster);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Onehop removal of a closed file reaches only the servers its size (or
// the size a truncate shrank it from) reaches (CollFile.sized): a small
// file, a file shrunk after filling every server, and one truncated to
// nothing leave no object anywhere once the garbage drains, and fsck is
// clean.
TEST(OneHopRemoveTest, SizedRemovalLeavesNoObjects) {
  auto cluster = StartCluster(MetadataMode::kOneHop, 3, 2000);
  ASSERT_NE(cluster, nullptr);
  client::Client& c = cluster->client();
  struct Case {
    const char* name;
    uint64_t written, truncated_to;  // truncated_to == written: no truncate
  };
  const Case cases[] = {{"small", 1000, 1000}, {"shrunk", 300 * 1024, 10}, {"emptied", 200 * 1024, 0}};
  for (const Case& k : cases) {
    Result<Attr> f = c.CreateSync(c.root(), k.name, CreateArgs{});
    ASSERT_OK(f);
    ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, PatternBytes(5, 0, k.written)));
    client::ReportWriteArgs rw;
    rw.wrote = true;
    rw.size = k.written;
    rw.writers_delta = -1;  // the create counted this writer
    ASSERT_OK(c.ReportWriteSync(f->handle, rw));
    if (k.truncated_to != k.written) {
      client::SetAttrArgs t;
      t.valid = client::kSetSize;
      t.size = k.truncated_to;
      ASSERT_OK(c.SetAttrSync(f->handle, t));
    }
  }
  size_t held = 0;
  for (ServerId s = 0; s < 3; ++s) held += DataObjects(c, s);
  EXPECT_GE(held, 4u) << "the written files hold objects (shrunk: on every server)";
  for (const Case& k : cases) ASSERT_OK(c.RemoveSync(c.root(), k.name, false));
  ASSERT_GE(TestCluster::PollUntil([&] { return GarbageDrained(c); }, 20000), 0);
  for (ServerId s = 0; s < 3; ++s) EXPECT_EQ(DataObjects(c, s), 0u) << "server " << s;
  tools::RunResult r = Fsck(*cluster);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The purge throttle: removed files' objects stay while clients keep a
// server busy (a request less than purge_idle_ms ago), go once the servers
// are quiet, and go anyway once purge_max_defer_ms has passed.
TEST(PurgeThrottleTest, RemovalWaitsForQuietButNotForever) {
  ClusterOptions o;
  o.servers = 2;
  o.stripe_size = 64 * 1024;
  o.purge_idle_ms = 1500;
  o.purge_max_defer_ms = 8000;
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  client::Client& c = cluster.client();
  // A file on both servers that the busy client keeps reading.
  Result<Attr> keep = c.CreateSync(c.root(), "keep", CreateArgs{});
  ASSERT_OK(keep);
  ASSERT_OK(c.WriteSync(keep->handle, keep->layout, 0, PatternBytes(7, 0, 128 * 1024)));
  const int kFiles = 6;
  for (int i = 0; i < kFiles; ++i) {
    Result<Attr> f = c.CreateSync(c.root(), "f" + std::to_string(i), CreateArgs{});
    ASSERT_OK(f);
    ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, PatternBytes(i, 0, 128 * 1024)));
  }
  auto objects = [&] { return DataObjects(c, 0) + DataObjects(c, 1); };
  ASSERT_EQ(objects(), size_t{2 * kFiles + 2});
  // Busy: a read reaching both servers every 100 ms (far below the 1.5 s
  // idle time) while the files go.
  std::atomic<bool> busy{true};
  std::thread fg([&] {
    while (busy.load()) {
      (void)c.ReadSync(keep->handle, keep->layout, 0, 128 * 1024);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto removed = std::chrono::steady_clock::now();
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_OK(c.RemoveSync(c.root(), "f" + std::to_string(i), false));
  }
  // A window in which nothing may happen: unthrottled, the collector frees
  // removed files' objects within its batch delay (GarbageCollector::kDelayMs,
  // 500 ms); busy servers must keep them over two idle periods.
  WaitPast(std::chrono::milliseconds(2 * o.purge_idle_ms));
  const size_t while_busy = objects();
  // Still busy: the max defer (8 s after the removal) lets them go regardless.
  const int64_t drained_ms = TestCluster::PollUntil([&] { return objects() == 2; }, 20000);
  const auto waited = std::chrono::steady_clock::now() - removed;
  busy = false;
  fg.join();
  EXPECT_EQ(while_busy, size_t{2 * kFiles + 2}) << "removed while a client kept the servers busy";
  ASSERT_GE(drained_ms, 0) << "objects still there 20 s after the max defer";
  EXPECT_GE(waited, std::chrono::milliseconds(7000));

  // Quiet: a removal goes about purge_idle_ms after the last request.
  ASSERT_OK(c.RemoveSync(c.root(), "keep", false));
  EXPECT_GE(TestCluster::PollUntil([&] { return objects() == 0 && GarbageDrained(c); }, 6000), 0)
      << "a quiet cluster kept removed objects";
}

class BaselineRawTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = StartCluster(MetadataMode::kClient, 2, 2000);
    ASSERT_NE(cluster_, nullptr);
    Result<std::string> secret = ReadSecret(cluster_->config().secret_file);
    ASSERT_OK(secret);
    secret_ = *secret;
    for (const ServerConfig& s : cluster_->config().servers) {
      auto ch = grpc::CreateCustomChannel(s.address, grpc::InsecureChannelCredentials(),
                                          ClfChannelArgs());
      base_.push_back(v1::Baseline::NewStub(ch));
      admin_.push_back(v1::Admin::NewStub(ch));
    }
  }
  // With the client secret, a 5 s deadline.
  template <typename Fn>
  Status Call(Fn fn) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kSecretHeader, secret_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return FromGrpc(fn(&ctx));
  }
  Status CreateObject(int k, const v1::Capability& cap) {
    v1::ObjectRequest r;
    *r.mutable_cap() = cap;
    v1::ObjectReply rep;
    return Call([&](grpc::ClientContext* ctx) { return base_[k]->CreateObject(ctx, r, &rep); });
  }
  Status RemoveObject(int k, const v1::Capability& cap) {
    v1::ObjectRequest r;
    *r.mutable_cap() = cap;
    v1::ObjectReply rep;
    return Call([&](grpc::ClientContext* ctx) { return base_[k]->RemoveObject(ctx, r, &rep); });
  }
  std::unique_ptr<TestCluster> cluster_;
  std::string secret_;
  std::vector<std::unique_ptr<v1::Baseline::Stub>> base_;
  std::vector<std::unique_ptr<v1::Admin::Stub>> admin_;
};

TEST_F(BaselineRawTest, ObjectCallsNeedTheMetadataServersCapability) {
  client::Client& c = cluster_->client();
  v1::ReserveRequest rr;
  rr.set_parent(c.root());
  v1::ReserveReply res;
  ASSERT_OK(Call([&](grpc::ClientContext* ctx) { return base_[0]->Reserve(ctx, rr, &res); }));
  ASSERT_NE(res.handle(), 0u);
  EXPECT_EQ(res.create().op(), v1::CAP_CREATE);
  EXPECT_EQ(res.undo().op(), v1::CAP_REMOVE);
  const int k = 1;

  v1::Capability forged = res.create();
  forged.mutable_mac()->at(0) ^= 1;
  EXPECT_STATUS(Code::kPermission, CreateObject(k, forged));
  v1::Capability other_handle = res.create();
  other_handle.set_handle(res.handle() + 1);
  EXPECT_STATUS(Code::kPermission, CreateObject(k, other_handle));
  v1::Capability later = res.create();
  later.set_expires_ms(later.expires_ms() + 3600 * 1000);  // extending it breaks the signature
  EXPECT_STATUS(Code::kPermission, CreateObject(k, later));
  // The undo (REMOVE) capability does not create, the CREATE one does not remove.
  EXPECT_STATUS(Code::kPermission, CreateObject(k, res.undo()));
  EXPECT_STATUS(Code::kPermission, RemoveObject(k, res.create()));
  v1::Capability short_mac = res.create();
  short_mac.set_mac("x");
  EXPECT_STATUS(Code::kInvalid, CreateObject(k, short_mac));
  v1::Capability stale = res.create();
  stale.set_handle(uint64_t{77} << 48);  // names no server of this cluster
  EXPECT_STATUS(Code::kStale, CreateObject(k, stale));
  v1::ObjectRequest no_cap;
  v1::ObjectReply orep;
  EXPECT_STATUS(Code::kInvalid, Call([&](grpc::ClientContext* ctx) {
                  return base_[k]->CreateObject(ctx, no_cap, &orep);
                }));
  EXPECT_FALSE(Holds(c, k, res.handle())) << "a refused capability created an object";

  // The real one works; then the undo capability removes it again.
  ASSERT_OK(CreateObject(k, res.create()));
  EXPECT_TRUE(Holds(c, k, res.handle()));
  ASSERT_OK(RemoveObject(k, res.undo()));
  EXPECT_FALSE(Holds(c, k, res.handle()));

  // Baseline.Create only with a regular file and a handle this server reserved.
  v1::CreateRequest cr;
  cr.set_parent(c.root());
  cr.set_name("x");
  cr.set_type(v1::FT_REGULAR);
  cr.set_mode(0644);
  cr.set_handle(MakeHandle(0, uint64_t{1} << 40));  // far past the counter
  v1::AttrReply arep;
  EXPECT_STATUS(Code::kInvalid, Call([&](grpc::ClientContext* ctx) {
                  return base_[0]->Create(ctx, cr, &arep);
                }));
  cr.set_handle(0);
  EXPECT_STATUS(Code::kStale, Call([&](grpc::ClientContext* ctx) {
                  return base_[0]->Create(ctx, cr, &arep);
                }));
  cr.set_handle(res.handle());
  cr.set_type(v1::FT_DIRECTORY);
  EXPECT_STATUS(Code::kInvalid, Call([&](grpc::ClientContext* ctx) {
                  return base_[0]->Create(ctx, cr, &arep);
                }));
  // A client still may not remove objects through the servers' Admin call.
  v1::RemoveObjectRequest ro;
  ro.set_handle(res.handle());
  v1::RemoveObjectReply rorep;
  EXPECT_STATUS(Code::kPermission, Call([&](grpc::ClientContext* ctx) {
                  return admin_[k]->RemoveObject(ctx, ro, &rorep);
                }));
  for (int s = 0; s < 2; ++s) EXPECT_TRUE(cluster_->server_running(s)) << cluster_->LogTail(s);
}

TEST(ClientModeTest, BaselineCallsRefusedInOtherModes) {
  auto cluster = StartCluster(MetadataMode::kOneHop, 1, 2000);
  ASSERT_NE(cluster, nullptr);
  Result<std::string> secret = ReadSecret(cluster->config().secret_file);
  ASSERT_OK(secret);
  auto ch = grpc::CreateCustomChannel(cluster->config().servers[0].address,
                                      grpc::InsecureChannelCredentials(), ClfChannelArgs());
  auto stub = v1::Baseline::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.AddMetadata(kSecretHeader, *secret);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ReserveRequest rr;
  rr.set_parent(kRootHandle);
  v1::ReserveReply res;
  EXPECT_STATUS(Code::kNotSupported, FromGrpc(stub->Reserve(&ctx, rr, &res)));
  grpc::ClientContext ctx2;
  ctx2.AddMetadata(kSecretHeader, *secret);
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::StatObjectRequest sr;
  sr.set_handle(MakeHandle(0, 5));
  v1::ObjectReply orep;
  EXPECT_STATUS(Code::kNotSupported, FromGrpc(stub->StatObject(&ctx2, sr, &orep)));
}

// Paper 004: "a failed participant means undoing the work already done". A data
// server stopped (SIGSTOP) during a batch of collective creates: each create
// fails with a clear error, the directory stays unchanged, and once the server
// runs again fsck finds no orphan inode or object.
TEST(CollectiveFailureTest, StoppedParticipantLeavesNothingBehind) {
  constexpr uint32_t kTimeoutMs = 1000;
  auto cluster = StartCluster(MetadataMode::kCollective, 3, kTimeoutMs);
  ASSERT_NE(cluster, nullptr);
  client::Client& c = cluster->client();
  for (int i = 0; i < 5; ++i) ASSERT_OK(c.CreateSync(c.root(), "ok" + std::to_string(i), CreateArgs{}));
  const int victim = 2;
  ASSERT_TRUE(StopProcess(cluster->server_pid(victim)));
  int failed = 0;
  for (int i = 0; i < 4; ++i) {
    const int64_t t0 = tools::NowMs();
    Result<Attr> a = c.CreateSync(c.root(), "new" + std::to_string(i), CreateArgs{});
    const int64_t took = tools::NowMs() - t0;
    if (!a.ok()) {
      ++failed;
      EXPECT_EQ(a.status().code(), Code::kUnavailable) << a.status().ToString();
      EXPECT_NE(a.status().message().find("server 2"), std::string::npos) << a.status().ToString();
    }
    EXPECT_LE(took, 6 * kTimeoutMs) << "a create with a stopped participant took " << took << " ms";
  }
  EXPECT_EQ(failed, 4) << "every file has all three servers as data servers";
  ASSERT_EQ(::kill(cluster->server_pid(victim), SIGCONT), 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_STATUS(Code::kNotFound, c.LookupSync(c.root(), "new" + std::to_string(i)));
  }
  Result<client::DirPage> page = c.ReadDirSync(c.root(), "", 100, false);
  ASSERT_OK(page);
  EXPECT_EQ(page->entries.size(), 5u);
  // The stopped server answers the requests queued while it was stopped (a
  // late create is refused once the undo's removal got there first, or its
  // object is removed by it); the undo's garbage records are removed by the
  // background collective once it answers.
  EXPECT_GE(TestCluster::PollUntil([&] { return GarbageDrained(c); }, 30000), 0)
      << "garbage of the failed creates never removed";
  tools::RunResult r;
  const int64_t waited = TestCluster::PollUntil(
      [&] {
        r = Fsck(*cluster);
        return r.exit_code == 0;
      },
      30000);
  EXPECT_GE(waited, 0) << "fsck never clean:\n" << r.output;
  for (int k = 0; k < 3; ++k) {
    // 5 files on 3 data servers each; nothing of the failed creates.
    EXPECT_EQ(DataObjects(c, k), 5u) << "server " << k;
  }
}

// Collective deadlines are relative (CollectiveRequest.budget_ms): with
// server 1's wall clock a minute ahead and server 2's a minute behind (the
// skewed_clock shim), collective creates, stats and removes still work,
// every server initiating some. With absolute deadlines server 1 refused
// every create as late and server 2's hops expired at once.
TEST(ClockSkewTest, CollectivesIgnoreSkewedClocks) {
  const char* shim = std::getenv("SKEWED_CLOCK");
  ASSERT_NE(shim, nullptr) << "SKEWED_CLOCK (set by meson) names the shim";
  auto skewed = [&](const char* ms) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    std::string opts = asan != nullptr ? std::string(asan) + ":" : "";
    return std::vector<std::string>{std::string("LD_PRELOAD=") + shim,
                                    std::string("CLF_TEST_CLOCK_SKEW_MS=") + ms,
                                    "ASAN_OPTIONS=" + opts + "verify_asan_link_order=0"};
  };
  ClusterOptions o;
  o.servers = 3;
  o.stripe_size = 64 * 1024;
  o.rpc_timeout_ms = 2000;
  o.metadata_mode = MetadataMode::kCollective;
  o.server_env[1] = skewed("60000");
  o.server_env[2] = skewed("-60000");
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  client::Client& c = cluster.client();
  // The shim took: the servers' clocks are that far off this client's.
  std::vector<client::ServerStatus> st = c.ServerStatuses();
  ASSERT_EQ(st.size(), 3u);
  EXPECT_NEAR(static_cast<double>(st[0].clock_skew_ms), 0, 2000);
  EXPECT_NEAR(static_cast<double>(st[1].clock_skew_ms), 60000, 2000);
  EXPECT_NEAR(static_cast<double>(st[2].clock_skew_ms), -60000, 2000);
  // Directories until each server holds one (placement by hash): each is
  // the initiator of its files' collectives.
  std::vector<Handle> dirs;
  std::set<ServerId> covered;
  for (int i = 0; i < 40 && covered.size() < 3; ++i) {
    CreateArgs da;
    da.type = client::FileType::kDirectory;
    da.mode = 0755;
    Result<Attr> d = c.CreateSync(c.root(), "d" + std::to_string(i), da);
    ASSERT_OK(d);
    if (covered.insert(ServerOf(d->handle)).second) dirs.push_back(d->handle);
  }
  ASSERT_EQ(covered.size(), 3u);
  for (Handle dir : dirs) {
    SCOPED_TRACE("directory on server " + std::to_string(ServerOf(dir)));
    for (int i = 0; i < 4; ++i) {
      const std::string name = "f" + std::to_string(i);
      Result<Attr> f = c.CreateSync(dir, name, CreateArgs{});
      ASSERT_OK(f);
      const std::string data = PatternBytes(i, 0, 100 * 1024 + static_cast<uint64_t>(i));
      ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, data));
      Result<Attr> a = c.GetAttrSync(f->handle);
      ASSERT_OK(a);
      EXPECT_EQ(a->size, data.size());
    }
    for (int i = 0; i < 4; ++i) ASSERT_OK(c.RemoveSync(dir, "f" + std::to_string(i), false));
  }
  EXPECT_GE(TestCluster::PollUntil([&] { return GarbageDrained(c); }, 20000), 0);
  for (ServerId s = 0; s < 3; ++s) EXPECT_EQ(DataObjects(c, s), 0u) << "server " << s;
  tools::RunResult r = Fsck(cluster);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The same with SIGKILL in the middle of a create storm, then a restart.
TEST(CollectiveFailureTest, KilledParticipantLeavesNothingBehind) {
  constexpr uint32_t kTimeoutMs = 1000;
  auto cluster = StartCluster(MetadataMode::kCollective, 3, kTimeoutMs);
  ASSERT_NE(cluster, nullptr);
  client::Client& c = cluster->client();
  std::atomic<bool> stop{false};
  std::atomic<int> created{0}, failed{0};
  std::vector<std::string> made;
  std::mutex mu;
  std::thread storm([&] {
    for (int i = 0; i < 400 && !stop; ++i) {
      const std::string name = "s" + std::to_string(i);
      Result<Attr> a = c.CreateSync(c.root(), name, CreateArgs{});
      if (a.ok()) {
        ++created;
        std::lock_guard<std::mutex> l(mu);
        made.push_back(name);
      } else {
        ++failed;
      }
    }
  });
  TestCluster::PollUntil([&] { return created >= 20; }, 20000);
  ASSERT_OK(cluster->KillServer(2, SIGKILL));
  TestCluster::PollUntil([&] { return failed >= 3; }, 20000);
  stop = true;
  storm.join();
  EXPECT_GE(failed.load(), 1);
  ASSERT_OK(cluster->RestartServer(2));
  // Exactly the acknowledged creates are in the directory.
  size_t entries = 0;
  std::string after;
  for (;;) {
    Result<client::DirPage> page = c.ReadDirSync(c.root(), after, 1000, false);
    ASSERT_OK(page);
    entries += page->entries.size();
    if (page->eof || page->entries.empty()) break;
    after = page->entries.back().name;
  }
  EXPECT_EQ(entries, static_cast<size_t>(created.load()));
  EXPECT_GE(TestCluster::PollUntil([&] { return GarbageDrained(c); }, 30000), 0)
      << "garbage of the failed creates never removed";
  tools::RunResult r;
  const int64_t waited = TestCluster::PollUntil(
      [&] {
        r = Fsck(*cluster);
        return r.exit_code == 0;
      },
      30000);
  EXPECT_GE(waited, 0) << "fsck never clean:\n" << r.output;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(DataObjects(c, k), static_cast<size_t>(created.load())) << "server " << k;
  }
}

}  // namespace
}  // namespace clf::testing
