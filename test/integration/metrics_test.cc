// clfd's observability against real servers: Prometheus text on each
// metrics_address (checked by promtool when installed), the metrics endpoint
// surviving malformed HTTP, the gRPC health service, and `clf status`'s health
// line, --json and --watch.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "clf/client.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

int Connect(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends `request` raw and returns everything the server answers until it closes.
std::string Exchange(const std::string& address, const std::string& request) {
  int fd = Connect(address);
  if (fd < 0) return "";
  size_t off = 0;
  while (off < request.size()) {
    ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);  // end of request: a cut-off request is answered or dropped now
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string Get(const std::string& address, const std::string& path = "/metrics") {
  return Exchange(address, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

std::string Body(const std::string& http) {
  size_t p = http.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : http.substr(p + 4);
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
  for (const grpc::Slice& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
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
  EXPECT_EQ(r.output.rfind("health: HEALTH_WARN: 1 of 2 servers down (clfd 1)\n", 0), 0u) << r.output;
  r = Clf({"status", "--cluster", cluster_->cluster_file(), "--json"});
  j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["health"]["status"], "HEALTH_WARN");
  EXPECT_EQ(j["health"]["checks"][0]["code"], "SERVER_DOWN");
  EXPECT_EQ(j["servers_down"], 1);

  // --watch 1 refreshes until killed (here by timeout(1) after 3.5 s).
  Result<tools::RunResult> w = tools::Run(
      {"timeout", "3.5", TestCluster::Binary("CLF", "clf"), "status", "--cluster",
       cluster_->cluster_file(), "--watch", "1"},
      30000);
  ASSERT_OK(w);
  size_t rounds = 0;
  for (size_t p = w->output.find("health: "); p != std::string::npos; p = w->output.find("health: ", p + 1)) {
    ++rounds;
  }
  EXPECT_GE(rounds, 2u) << w->output;
}

}  // namespace
}  // namespace clf::testing
