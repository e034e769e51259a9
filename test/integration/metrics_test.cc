// clfd's observability against real servers: Prometheus text on each
// metrics_address (checked by promtool when installed), the metrics endpoint
// surviving malformed HTTP, the gRPC health service, and `clf status`'s health
// line, --json and --watch; the data bytes per transport, open files and lock
// gauges moving by exactly what real traffic did, and back to 0.
#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "clf/lock_client.h"
#include "test/support/cluster.h"
#include "test/support/scrape.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

// Runs promtool (Debian's prometheus package) on `body` when it is installed.
void ExpectPromtoolAccepts(const std::string& dir, const std::string& body) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return;
  const std::string file = dir + "/promtool_input.txt";
  std::ofstream(file) << body;
  Result<tools::RunResult> r = tools::Run({"sh", "-c", "promtool check metrics < " + file}, 60000);
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 0) << r->output;
}

std::string DataBytes(const std::string& transport, const std::string& direction) {
  return "clf_data_bytes_total{transport=\"" + transport + "\",direction=\"" + direction + "\"}";
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 2;
    o.metrics = true;
    o.rpc_timeout_ms = 1000;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  tools::RunResult Clf(std::vector<std::string> args) {
    return TestCluster::RunClf(std::move(args), 60000);
  }
  const std::string& metrics(int k) const {
    return cluster_->config().servers[static_cast<size_t>(k)].metrics_address;
  }
  std::unique_ptr<TestCluster> cluster_;
};

TEST_F(MetricsTest, ServesPrometheusTextWithRpcCountsSizesAndHistograms) {
  client::Client& c = cluster_->client();
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(c.CreateSync(c.root(), "f" + std::to_string(i), client::CreateArgs{}));
  }
  Result<client::Attr> f = c.LookupSync(c.root(), "f0");
  ASSERT_OK(f);
  ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, std::string(100000, 'x')));
  bool saw_create = false;
  for (int k = 0; k < 2; ++k) {
    const std::string resp = Get(metrics(k));
    ASSERT_EQ(resp.rfind("HTTP/1.1 200", 0), 0u) << resp.substr(0, 200);
    EXPECT_NE(resp.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
    const std::string body = Body(resp);
    for (const char* want :
         {"# TYPE clf_rpc_duration_seconds histogram", "clf_inodes ", "clf_rocksdb_bytes ",
          "clf_object_store_bytes ", "clf_garbage_backlog_files ", "clf_build_info{version=\"",
          "clf_transport_received_bytes_total{transport=\"grpc\"} ",
          "clf_rpc_duration_seconds_bucket{method=\"/clf.v1.Admin/Status\",le=\"+Inf\"} "}) {
      EXPECT_NE(body.find(want), std::string::npos) << "server " << k << " lacks " << want << "\n"
                                                    << body;
    }
    saw_create = saw_create ||
                 body.find("clf_rpc_handled_total{method=\"/clf.v1.Meta/Create\",code=\"OK\"}") !=
                     std::string::npos;
    // The data write reached at least one server's received-bytes counter.
    if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
      const std::string file = cluster_->dir() + "/metrics" + std::to_string(k) + ".txt";
      std::ofstream(file) << body;
      Result<tools::RunResult> r =
          tools::Run({"sh", "-c", "promtool check metrics < " + file}, 60000);
      ASSERT_OK(r);
      EXPECT_EQ(r->exit_code, 0) << r->output;
    }
  }
  EXPECT_TRUE(saw_create);
  // Both servers are counted in inodes: 5 files plus the root directory.
  uint64_t inodes = 0;
  for (int k = 0; k < 2; ++k) {
    const std::string body = Body(Get(metrics(k)));
    const size_t p = body.find("\nclf_inodes ");
    ASSERT_NE(p, std::string::npos);
    inodes += std::stoull(body.substr(p + 12));
  }
  EXPECT_EQ(inodes, 6u);
}

TEST_F(MetricsTest, MalformedHttpNeverTakesTheServerDown) {
  const std::string addr = metrics(0);
  EXPECT_NE(Get(addr, "/nothing").find(" 404"), std::string::npos);
  EXPECT_NE(Exchange(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
                .find(" 405"),
            std::string::npos);
  Exchange(addr, std::string("\x00\x01\x02garbage\r\n\r\n", 14));
  Exchange(addr, "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(200000, 'a') + "\r\n\r\n");
  Exchange(addr, "GET /metrics HTTP/1.1\r\nHost");  // cut off, then closed
  Exchange(addr, "GET /" + std::string(100000, '%') + " HTTP/1.1\r\n\r\n");
  Exchange(addr, "GET /metrics HTTP/9.9\r\nContent-Length: -5\r\n\r\n");
  for (int i = 0; i < 20; ++i) Exchange(addr, "\r\n\r\n");
  EXPECT_TRUE(cluster_->server_running(0));
  const std::string again = Get(addr);
  EXPECT_EQ(again.rfind("HTTP/1.1 200", 0), 0u) << again.substr(0, 200);
  EXPECT_OK(cluster_->client().GetAttrSync(cluster_->client().root()));
}

// grpc.health.v1.Health/Check with an empty request (service ""); the reply
// HealthCheckResponse{status: SERVING} is the two bytes 08 01.
TEST_F(MetricsTest, GrpcHealthServiceSaysServing) {
  auto channel = grpc::CreateChannel(cluster_->config().servers[1].address,
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty{std::string()};
  grpc::ByteBuffer req(&empty, 1), resp;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                 [&done](grpc::Status s) { done.set_value(s); });
  grpc::Status s = done.get_future().get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(resp.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& sl : slices)
    bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

TEST_F(MetricsTest, StatusOpensWithHealthAndWarnsOfADownServer) {
  tools::RunResult r = Clf({"status", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("health: HEALTH_OK\n", 0), 0u) << r.output;
  r = Clf({"status", "--cluster", cluster_->cluster_file(), "--json"});
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["health"]["status"], "HEALTH_OK");
  EXPECT_EQ(j["servers"].size(), 2u);
  EXPECT_EQ(j["servers"][0]["garbage"], 0);

  ASSERT_OK(cluster_->KillServer(1, 9));
  r = Clf({"status", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("health: HEALTH_WARN: 1 of 2 servers down (clfd 1)\n", 0), 0u)
      << r.output;
  r = Clf({"status", "--cluster", cluster_->cluster_file(), "--json"});
  j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["health"]["status"], "HEALTH_WARN");
  EXPECT_EQ(j["health"]["checks"][0]["code"], "SERVER_DOWN");
  EXPECT_EQ(j["servers_down"], 1);

  // --watch 1 refreshes until killed (here by timeout(1) after 3.5 s).
  Result<tools::RunResult> w =
      tools::Run({"timeout", "3.5", TestCluster::Binary("CLF", "clf"), "status", "--cluster",
                  cluster_->cluster_file(), "--watch", "1"},
                 30000);
  ASSERT_OK(w);
  size_t rounds = 0;
  for (size_t p = w->output.find("health: "); p != std::string::npos;
       p = w->output.find("health: ", p + 1)) {
    ++rounds;
  }
  EXPECT_GE(rounds, 2u) << w->output;
}

// Payload bytes per data path, exactly: a write of N bytes over path T moves
// clf_data_bytes_total{transport=T,direction="in"} (summed over the servers the
// stripes went to) by N, a read of them the "out" one by N, and no other path.
TEST(MetricsDataBytes, CountExactlyThePayloadOfEachTransport) {
  struct Case {
    std::string cluster_transport, label, client_sees;
  };
  for (const Case& tc : {Case{"tcp", "tcp", "tcp"}, Case{"rdma", "rdma", "rdma(tcp)"},
                         Case{"grpc", "grpc", "grpc"}}) {
    SCOPED_TRACE(tc.cluster_transport);
    ClusterOptions o;
    o.servers = 2;
    o.metrics = true;
    o.stripe_size = 64 * 1024;
    o.transport = tc.cluster_transport;
    o.rdma_provider = "tcp";
    TestCluster cluster(o);
    ASSERT_OK(cluster.Start());
    client::Client& c = cluster.client();
    Result<client::Attr> f = c.CreateSync(c.root(), "data", client::CreateArgs{});
    ASSERT_OK(f);
    const size_t n = 300000;  // stripes on both servers
    ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, std::string(n, 'd')));
    EXPECT_EQ(c.DataTransportOf(0), tc.client_sees);
    EXPECT_EQ(c.DataTransportOf(1), tc.client_sees);
    for (const char* t : {"tcp", "rdma", "grpc"}) {
      EXPECT_EQ(SumOverServers(cluster, DataBytes(t, "in")), t == tc.label ? n : 0) << t;
      EXPECT_EQ(SumOverServers(cluster, DataBytes(t, "out")), 0) << t;
    }
    Result<std::string> back = c.ReadSync(f->handle, f->layout, 0, n);
    ASSERT_OK(back);
    ASSERT_EQ(back->size(), n);
    const size_t tail = 1000;  // a short read from the middle of the second stripe
    ASSERT_OK(c.ReadSync(f->handle, f->layout, 70000, tail));
    for (const char* t : {"tcp", "rdma", "grpc"}) {
      EXPECT_EQ(SumOverServers(cluster, DataBytes(t, "in")), t == tc.label ? n : 0) << t;
      EXPECT_EQ(SumOverServers(cluster, DataBytes(t, "out")), t == tc.label ? n + tail : 0) << t;
    }
    // The TCP channel splices every one of these write payloads without a
    // buffer (plaintext, each server's share within the splice pipe).
    EXPECT_EQ(SumOverServers(cluster, "clf_data_zero_copy_bytes_total{direction=\"in\"}"),
              tc.label == "tcp" ? n : 0);
    const std::string body = Body(Get(cluster.config().servers[0].metrics_address));
    EXPECT_NE(body.find("# TYPE clf_data_bytes_total counter"), std::string::npos) << body;
    ExpectPromtoolAccepts(cluster.dir(), body);
  }
}

// Files open for writing, writers and orphans as the servers know them
// (Meta.Create open_for_write, ReportWrite's writers_delta, Remove keep_orphan).
TEST_F(MetricsTest, OpenFilesFollowOpensAndCloses) {
  client::Client& c = cluster_->client();
  auto sum = [this](const std::string& s) { return SumOverServers(*cluster_, s); };
  EXPECT_EQ(sum("clf_open_files"), 0);
  EXPECT_EQ(sum("clf_open_writers"), 0);
  EXPECT_EQ(sum("clf_orphan_files"), 0);
  client::CreateArgs open_args;
  open_args.open_for_write = true;
  Result<client::Attr> a = c.CreateSync(c.root(), "a", open_args);
  ASSERT_OK(a);
  Result<client::Attr> b = c.CreateSync(c.root(), "b", open_args);
  ASSERT_OK(b);
  ASSERT_OK(c.CreateSync(c.root(), "closed", client::CreateArgs{}));
  EXPECT_EQ(sum("clf_open_files"), 2);
  EXPECT_EQ(sum("clf_open_writers"), 2);
  client::ReportWriteArgs open;
  open.writers_delta = +1;
  ASSERT_OK(c.ReportWriteSync(a->handle, open));  // a second writer of a
  EXPECT_EQ(sum("clf_open_files"), 2);
  EXPECT_EQ(sum("clf_open_writers"), 3);

  // b is unlinked while open: an orphan until Destroy.
  std::promise<Result<client::RemoveResult>> removed;
  c.Remove(c.root(), "b", false, /*keep_orphan=*/true, client::Caller{},
           [&removed](Result<client::RemoveResult> r) { removed.set_value(std::move(r)); });
  Result<client::RemoveResult> rr = removed.get_future().get();
  ASSERT_OK(rr);
  EXPECT_TRUE(rr->orphaned);
  EXPECT_EQ(sum("clf_orphan_files"), 1);

  client::ReportWriteArgs close;
  close.writers_delta = -1;
  ASSERT_OK(c.ReportWriteSync(a->handle, close));
  EXPECT_EQ(sum("clf_open_files"), 2);
  EXPECT_EQ(sum("clf_open_writers"), 2);
  ASSERT_OK(c.ReportWriteSync(a->handle, close));
  ASSERT_OK(c.ReportWriteSync(b->handle, close));
  EXPECT_EQ(sum("clf_open_files"), 0);
  EXPECT_EQ(sum("clf_open_writers"), 0);
  std::promise<Status> destroyed;
  c.Destroy(b->handle, [&destroyed](Status s) { destroyed.set_value(s); });
  ASSERT_OK(destroyed.get_future().get());
  EXPECT_EQ(sum("clf_orphan_files"), 0);
}

// Lock sessions and locks granted/waiting per server, in the metrics and in
// `clf status --json`, through a real lock, a waiter, the hand-over and release.
TEST_F(MetricsTest, LockSessionsAndLocksFollowAcquireAndRelease) {
  auto sum = [this](const std::string& s) { return SumOverServers(*cluster_, s); };
  auto status = [this] {
    tools::RunResult r = Clf({"status", "--cluster", cluster_->cluster_file(), "--json"});
    nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.output;
    return j;
  };
  // Status totals: {sessions, granted, waiting} over the servers.
  auto status_totals = [&status] {
    nlohmann::json j = status();
    std::array<uint64_t, 3> t{};
    for (const auto& s : j["servers"]) {
      t[0] += s["lock_sessions"].get<uint64_t>();
      t[1] += s["locks_granted"].get<uint64_t>();
      t[2] += s["locks_waiting"].get<uint64_t>();
    }
    return t;
  };
  EXPECT_EQ(sum("clf_lock_sessions"), 0);
  EXPECT_EQ(sum("clf_locks{state=\"granted\"}"), 0);
  EXPECT_EQ(sum("clf_locks{state=\"waiting\"}"), 0);
  EXPECT_EQ(sum("clf_lock_grace"), 0);
  EXPECT_EQ(sum("clf_lock_reclaim_sessions"), 0);

  client::Client& c = cluster_->client();
  Result<client::Attr> f = c.CreateSync(c.root(), "locked", client::CreateArgs{});
  ASSERT_OK(f);
  const std::string& owner_metrics = metrics(static_cast<int>(ServerOf(f->handle)));
  client::LockClientOptions ao, bo;
  ao.client_name = "a";
  bo.client_name = "b";
  Result<std::unique_ptr<client::LockClient>> la = client::LockClient::Open(cluster_->config(), ao);
  ASSERT_OK(la);
  Result<std::unique_ptr<client::LockClient>> lb = client::LockClient::Open(cluster_->config(), bo);
  ASSERT_OK(lb);
  Result<client::HeldLock> held = (*la)->LockWholeFile(f->handle, client::LockMode::kExclusive, 1);
  ASSERT_OK(held);
  EXPECT_EQ(sum("clf_lock_sessions"), 1);
  EXPECT_EQ(sum("clf_locks{state=\"granted\"}"), 1);
  EXPECT_EQ(Sample(Body(Get(owner_metrics)), "clf_locks{state=\"granted\"}"), 1);
  EXPECT_EQ(sum("clf_locks{state=\"waiting\"}"), 0);
  EXPECT_EQ(status_totals(), (std::array<uint64_t, 3>{1, 1, 0}));

  // b waits for the lock a holds.
  std::future<Result<client::HeldLock>> waiter = std::async(std::launch::async, [&lb, &f] {
    return (*lb)->LockWholeFile(f->handle, client::LockMode::kExclusive, 2);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sum("clf_locks{state=\"waiting\"}") != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(sum("clf_locks{state=\"waiting\"}"), 1);
  EXPECT_EQ(sum("clf_lock_sessions"), 2);
  EXPECT_EQ(status_totals(), (std::array<uint64_t, 3>{2, 1, 1}));
  ExpectPromtoolAccepts(cluster_->dir(), Body(Get(owner_metrics)));

  ASSERT_OK((*la)->Unlock(*held));
  Result<client::HeldLock> got = waiter.get();
  ASSERT_OK(got);
  EXPECT_EQ(sum("clf_locks{state=\"granted\"}"), 1);
  EXPECT_EQ(sum("clf_locks{state=\"waiting\"}"), 0);
  ASSERT_OK((*lb)->Unlock(*got));
  EXPECT_EQ(sum("clf_locks{state=\"granted\"}"), 0);
  EXPECT_EQ(sum("clf_lock_sessions"), 2);

  // POSIX locks count too: two fcntl segments of one owner and a flock.
  auto posix = [&la, &f](client::PosixLockType type, uint64_t start, uint64_t len) {
    std::promise<Status> done;
    (*la)->PosixLock(f->handle, 7, type, start, len, /*wait=*/false, 1234,
                     [&done](Status s) { done.set_value(s); });
    return done.get_future().get();
  };
  ASSERT_OK(posix(client::PosixLockType::kWrite, 0, 10));
  ASSERT_OK(posix(client::PosixLockType::kRead, 100, 10));
  std::promise<Status> flocked;
  (*la)->Flock(f->handle, 8, client::FlockOp::kShared, /*wait=*/false, 1234,
               [&flocked](Status s) { flocked.set_value(s); });
  ASSERT_OK(flocked.get_future().get());
  EXPECT_EQ(sum("clf_locks{state=\"granted\"}"), 3);
  EXPECT_EQ(status_totals(), (std::array<uint64_t, 3>{2, 3, 0}));
  std::promise<Status> released;
  (*la)->PosixRelease(f->handle, {7, 8}, /*flock=*/true,
                      [&released](Status s) { released.set_value(s); });
  ASSERT_OK(released.get_future().get());
  EXPECT_EQ(sum("clf_locks{state=\"granted\"}"), 0);

  // Closing the clients closes their sessions.
  la->reset();
  lb->reset();
  EXPECT_EQ(sum("clf_lock_sessions"), 0);
  EXPECT_EQ(status_totals(), (std::array<uint64_t, 3>{0, 0, 0}));
  tools::RunResult table = Clf({"status", "--cluster", cluster_->cluster_file()});
  EXPECT_NE(table.output.find("sessions"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("waiting"), std::string::npos) << table.output;
}

}  // namespace
}  // namespace clf::testing
