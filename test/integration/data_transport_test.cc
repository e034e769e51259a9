// The data path over each transport (TCP data channel, RDMA over libfabric's
// tcp provider, inline gRPC), the fallback rule, and the TCP and RDMA data
// servers under hostile raw input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <random>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "client/list_io.h"
#include "common/config.h"
#include "common/object_ref.h"
#include "common/transport/frame.h"
#include "common/transport/tcp_protocol.h"
#include "common/transport/transport.h"
#include "test/support/cluster.h"
#include "test/support/scrape.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;
namespace tcp = transport::tcp;

constexpr uint64_t kKiB = 1024;

// ---------------------------------------------------------------- per transport

class DataTransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 3;
    o.stripe_size = 64 * kKiB;
    o.transport = GetParam();
    cluster_ = std::make_unique<TestCluster>(o);
    Status st = cluster_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  client::Client& c() { return cluster_->client(); }
  std::unique_ptr<TestCluster> cluster_;
};

// What libclf reports for a transport parameter ("rdma" runs libfabric's tcp provider).
std::string Reported(const std::string& t) { return t == "rdma" ? "rdma(tcp)" : t; }

INSTANTIATE_TEST_SUITE_P(Transports, DataTransportTest, ::testing::Values("tcp", "rdma", "grpc"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST_P(DataTransportTest, StripedRoundTripHolesAndSync) {
  Result<Attr> a = c().CreateSync(c().root(), "f", CreateArgs{});
  ASSERT_OK(a);
  const uint64_t off = 10000, len = 1024 * kKiB + 123;  // unaligned, every server
  const std::string data = PatternBytes(1, off, len);
  Result<uint64_t> w = c().WriteSync(a->handle, a->layout, off, data);
  ASSERT_OK(w);
  EXPECT_EQ(*w, len);
  Result<std::string> r = c().ReadSync(a->handle, a->layout, off, len);
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, data), -1);
  Result<std::string> hole = c().ReadSync(a->handle, a->layout, 0, off);
  ASSERT_OK(hole);
  EXPECT_EQ(*hole, std::string(off, '\0'));
  Result<std::string> past = c().ReadSync(a->handle, a->layout, off + len, 5000);
  ASSERT_OK(past);
  EXPECT_EQ(*past, std::string(5000, '\0'));
  ASSERT_OK(c().SyncSync(a->handle, a->layout));
  for (ServerId s = 0; s < 3; ++s) {
    EXPECT_EQ(c().DataTransportOf(s), Reported(GetParam())) << "server " << s;
  }
  Result<Attr> st = c().GetAttrSync(a->handle);
  ASSERT_OK(st);
  EXPECT_EQ(st->size, off + len);
  // clf status reports what each server offers.
  for (const client::ServerStatus& s : c().ServerStatuses()) {
    EXPECT_TRUE(s.up);
    EXPECT_EQ(s.transport, GetParam() == "grpc" ? "grpc" : Reported(GetParam()));
  }
}

// ReadToPipe: a range on one server arrives in the pipe over the TCP data
// channel (spliced from the socket), in memory over the others; a range that
// spans servers arrives in memory on every transport; holes and bytes past
// the end are zeros either way; the pipe holds nothing else.
TEST_P(DataTransportTest, ReadToPipeSplicesOneServersRange) {
  Result<Attr> a = c().CreateSync(c().root(), "p", CreateArgs{});
  ASSERT_OK(a);
  const uint64_t len = 200 * kKiB;  // servers 0, 1, 2, then 8 KiB on server 0
  const std::string data = PatternBytes(9, 0, len);
  ASSERT_OK(c().WriteSync(a->handle, a->layout, 0, data));
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  ASSERT_GE(::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20), 256 * 1024);
  auto read_to_pipe = [&](uint64_t off, uint64_t n) {
    std::promise<Result<client::Client::PipedRead>> done;
    c().ReadToPipe(a->handle, a->layout, off, n, fds[1], fds[0], std::string(),
                   [&](Result<client::Client::PipedRead> r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  };
  auto pipe_bytes = [&] {
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  };
  const bool splices = GetParam() == "tcp";
  struct Case {
    uint64_t off, n;
    bool one_server;
  };
  // One stripe unit; part of one; the last unit (8 KiB of data, then zeros
  // past the end); two units on two servers.
  for (const Case k : std::vector<Case>{{64 * kKiB, 64 * kKiB, true},
                                        {70 * kKiB, 10 * kKiB, true},
                                        {192 * kKiB, 64 * kKiB, true},
                                        {32 * kKiB, 64 * kKiB, false}}) {
    SCOPED_TRACE(std::to_string(k.off) + "+" + std::to_string(k.n));
    Result<client::Client::PipedRead> r = read_to_pipe(k.off, k.n);
    ASSERT_OK(r);
    std::string want = k.off < len ? data.substr(k.off, std::min(k.n, len - k.off)) : "";
    want.resize(k.n, '\0');
    EXPECT_EQ(r->in_pipe, splices && k.one_server);
    const std::string got = r->in_pipe ? pipe_bytes() : r->bytes;
    EXPECT_EQ(FirstDifference(got, want), -1);
    EXPECT_EQ(pipe_bytes(), "") << "the pipe holds only what the read put there";
  }
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_P(DataTransportTest, ConcurrentWritersAndBigRequests) {
  Result<Attr> a = c().CreateSync(c().root(), "g", CreateArgs{});
  ASSERT_OK(a);
  constexpr int kThreads = 8;
  const uint64_t region = 3 * 1024 * kKiB + 7;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      const uint64_t o = region * static_cast<uint64_t>(i);
      if (!c().WriteSync(a->handle, a->layout, o, PatternBytes(2, o, region)).ok()) ++failures;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  Result<std::string> r = c().ReadSync(a->handle, a->layout, 0, region * kThreads);
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, PatternBytes(2, 0, region * kThreads)), -1);
  // A request over the per-call limit is refused, a missing object is stale.
  EXPECT_STATUS(Code::kTooBig, c().ReadSync(a->handle, a->layout, 0, kMaxIoBytes + 1));
  const Handle missing = a->handle + 1000000;
  EXPECT_STATUS(Code::kStale, c().WriteSync(missing, a->layout, 0, "x"));
  EXPECT_OK(c().WriteSync(a->handle, a->layout, 0, "still fine"));
}

// ---------------------------------------------------------------- list I/O

// Random extent lists (any order, overlapping, zero-length, crossing stripe
// units and servers) written with WriteList read back equal to a byte model
// of the file, with ReadList and with plain reads, on every transport.
TEST_P(DataTransportTest, ListIoRandomExtentsRoundTrip) {
  Result<Attr> a = c().CreateSync(c().root(), "list", CreateArgs{});
  ASSERT_OK(a);
  const uint64_t file = 2 * 1024 * kKiB;  // 32 stripe units of 64 KiB over 3 servers
  std::string model(file, '\0');
  std::mt19937_64 rng(42);
  auto random_list = [&](size_t n, uint64_t max_len) {
    std::vector<client::FileExtent> l;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t len = rng() % 8 == 0 ? 0 : 1 + rng() % max_len;
      l.push_back({rng() % (file - len), len});
    }
    return l;
  };
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<client::FileExtent> l = random_list(round == 3 ? 10000 : 700, round == 2 ? 200 * kKiB : 3000);
    std::string data;
    for (const client::FileExtent& e : l) {
      const std::string bytes = PatternBytes(100 + round, data.size(), e.length);
      model.replace(e.offset, e.length, bytes);  // a later extent's bytes win
      data += bytes;
    }
    // Mapping: one request per data server that holds any piece.
    uint64_t total = 0;
    Result<std::vector<client::ListRequest>> plan =
        client::PlanListIo(a->layout, 3, l, &total);
    ASSERT_OK(plan);
    EXPECT_EQ(total, data.size());
    EXPECT_LE(plan->size(), 3u);
    for (size_t i = 1; i < plan->size(); ++i) EXPECT_LT((*plan)[i - 1].server, (*plan)[i].server);
    Result<uint64_t> w = c().WriteListSync(a->handle, a->layout, l, data);
    ASSERT_OK(w);
    EXPECT_EQ(*w, data.size());
    Result<std::string> whole = c().ReadSync(a->handle, a->layout, 0, file);
    ASSERT_OK(whole);
    ASSERT_EQ(FirstDifference(*whole, model), -1);
    std::vector<client::FileExtent> q = random_list(900, 100 * kKiB);
    std::string want;
    for (const client::FileExtent& e : q) want += model.substr(e.offset, e.length);
    Result<std::string> got = c().ReadListSync(a->handle, a->layout, q);
    ASSERT_OK(got);
    ASSERT_EQ(FirstDifference(*got, want), -1);
    Result<std::string> same = c().ReadListSync(a->handle, a->layout, l);
    ASSERT_OK(same);
    std::string expect_same;
    for (const client::FileExtent& e : l) expect_same += model.substr(e.offset, e.length);
    ASSERT_EQ(FirstDifference(*same, expect_same), -1);
  }
  // Past every object's end: zeros.
  Result<std::string> past =
      c().ReadListSync(a->handle, a->layout, {{file + 5, 10}, {10 * file, 70 * kKiB}});
  ASSERT_OK(past);
  EXPECT_EQ(*past, std::string(10 + 70 * kKiB, '\0'));
  // Empty lists and lists of zero-length extents move nothing.
  Result<uint64_t> none = c().WriteListSync(a->handle, a->layout, {}, "");
  ASSERT_OK(none);
  EXPECT_EQ(*none, 0u);
  Result<std::string> nothing = c().ReadListSync(a->handle, a->layout, {{5, 0}, {9, 0}});
  ASSERT_OK(nothing);
  EXPECT_EQ(*nothing, "");
}

TEST_P(DataTransportTest, ListIoBadListsAreRefusedBeforeAnythingIsSent) {
  Result<Attr> a = c().CreateSync(c().root(), "bad", CreateArgs{});
  ASSERT_OK(a);
  const std::string orig = PatternBytes(7, 0, 300 * kKiB);
  ASSERT_OK(c().WriteSync(a->handle, a->layout, 0, orig));
  const Handle h = a->handle;
  const Layout& l = a->layout;
  // The first extent is fine: nothing of a refused list may land.
  EXPECT_STATUS(Code::kFileTooBig, c().WriteListSync(h, l, {{0, 4}, {kMaxFileSize - 2, 4}}, "xxxxxxxx"));
  EXPECT_STATUS(Code::kFileTooBig, c().WriteListSync(h, l, {{0, 4}, {~uint64_t{0} - 1, 4}}, "xxxxxxxx"));
  EXPECT_STATUS(Code::kFileTooBig, c().ReadListSync(h, l, {{0, 4}, {1, ~uint64_t{0}}}));
  EXPECT_STATUS(Code::kTooBig,
                c().WriteListSync(h, l, std::vector<client::FileExtent>(kMaxExtents + 1, {0, 1}),
                                  std::string(kMaxExtents + 1, 'x')));
  EXPECT_STATUS(Code::kTooBig, c().WriteListSync(h, l, {{0, 4}, {0, client::kMaxListIoBytes}}, "xxxx"));
  EXPECT_STATUS(Code::kTooBig, c().ReadListSync(h, l, {{0, client::kMaxListIoBytes}, {0, 1}}));
  EXPECT_STATUS(Code::kInvalid, c().WriteListSync(h, l, {{0, 4}, {100, 4}}, "xxxxxxx"));
  EXPECT_STATUS(Code::kInvalid, c().WriteListSync(h, l, {{0, 4}}, "xxxxx"));
  Layout bad = l;
  bad.stripe_size = 0;
  EXPECT_STATUS(Code::kInvalid, c().WriteListSync(h, bad, {{0, 4}}, "xxxx"));
  Result<std::string> r = c().ReadSync(h, l, 0, orig.size());
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, orig), -1);
  // A good list still works.
  ASSERT_OK(c().WriteListSync(h, l, {{1, 2}, {200 * kKiB, 3}}, "abcde"));
  Result<std::string> g = c().ReadListSync(h, l, {{200 * kKiB, 3}, {0, 4}});
  ASSERT_OK(g);
  EXPECT_EQ(*g, std::string("cde") + orig[0] + "ab" + orig[3]);
}

// A list whose share of one server passes one request's limits (64 MiB or
// 2^18 pieces) goes as several requests; the bytes are still exact.
TEST(ListIoPlan, LargeSharesAreSplitIntoBoundedRequests) {
  Layout l;
  l.stripe_size = 64 * kKiB;
  l.stripe_count = 2;
  std::vector<client::FileExtent> many;
  for (uint64_t i = 0; i < 600000; ++i) many.push_back({i * 8, 4});  // all on 2 servers, not adjacent
  uint64_t total = 0;
  Result<std::vector<client::ListRequest>> p = client::PlanListIo(l, 3, many, &total);
  ASSERT_OK(p);
  EXPECT_EQ(total, 600000u * 4);
  size_t pieces = 0;
  uint64_t bytes = 0;
  for (const client::ListRequest& r : *p) {
    EXPECT_LE(r.extents.size(), client::kMaxListExtentsPerRequest);
    EXPECT_EQ(r.extents.size(), r.buffer_offsets.size());
    pieces += r.extents.size();
    bytes += r.bytes;
  }
  EXPECT_EQ(pieces, 600000u);
  EXPECT_EQ(bytes, total);
  EXPECT_GE(p->size(), 4u);  // 300,000 pieces per server > 2^18
  // Adjacent extents merge: one piece per stripe unit (units 0 and 2 are
  // adjacent in server 0's object but not in the buffer).
  std::vector<client::FileExtent> seq;
  for (uint64_t i = 0; i < 1024; ++i) seq.push_back({i * 256, 256});  // 256 KiB contiguous
  Result<std::vector<client::ListRequest>> q = client::PlanListIo(l, 3, seq, &total);
  ASSERT_OK(q);
  ASSERT_EQ(q->size(), 2u);
  EXPECT_EQ((*q)[0].extents.size(), 2u);
  EXPECT_EQ((*q)[1].extents.size(), 2u);
  EXPECT_EQ((*q)[0].bytes, 128 * kKiB);
  // 80 MiB on one server: two requests, the first exactly 64 MiB.
  Layout one;
  one.stripe_size = 1u << 20;
  one.stripe_count = 1;
  Result<std::vector<client::ListRequest>> big =
      client::PlanListIo(one, 3, {{0, 80ull << 20}}, &total);
  ASSERT_OK(big);
  ASSERT_EQ(big->size(), 2u);
  EXPECT_EQ((*big)[0].bytes, kMaxIoBytes);
  EXPECT_EQ((*big)[1].bytes, 16ull << 20);
  EXPECT_EQ((*big)[1].buffer_offsets[0], kMaxIoBytes);
}

// ---------------------------------------------------------------- selection

TEST(DataTransportSelection, AutoFallsBackToGrpcOnlyWhenTheDataPortIsUnreachable) {
  ClusterOptions o;
  o.servers = 2;
  o.transport = "grpc";  // the servers open no data port
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  client::ClientOptions auto_opts;
  auto_opts.transport = "auto";
  Result<std::unique_ptr<client::Client>> ac = client::Client::Open(cluster.cluster_file(), auto_opts);
  ASSERT_OK(ac);
  client::Client& c = **ac;
  Result<Attr> a = c.CreateSync(c.root(), "f", CreateArgs{});
  ASSERT_OK(a);
  const std::string data = PatternBytes(3, 0, 2500 * kKiB);  // both servers
  ASSERT_OK(c.WriteSync(a->handle, a->layout, 0, data));
  Result<std::string> r = c.ReadSync(a->handle, a->layout, 0, data.size());
  ASSERT_OK(r);
  EXPECT_EQ(*r, data);
  EXPECT_EQ(c.DataTransportOf(0), "grpc");
  EXPECT_EQ(c.DataTransportOf(1), "grpc");

  // An explicit tcp does not fall back.
  client::ClientOptions tcp_opts;
  tcp_opts.transport = "tcp";
  Result<std::unique_ptr<client::Client>> tc = client::Client::Open(cluster.cluster_file(), tcp_opts);
  ASSERT_OK(tc);
  EXPECT_STATUS(Code::kUnavailable, (*tc)->ReadSync(a->handle, a->layout, 0, 10));

  // An explicit rdma does not fall back either: these servers run no RDMA listener.
  client::ClientOptions rdma_opts;
  rdma_opts.transport = "rdma";
  Result<std::unique_ptr<client::Client>> rc =
      client::Client::Open(cluster.cluster_file(), rdma_opts);
  ASSERT_OK(rc);
  EXPECT_STATUS(Code::kUnavailable, (*rc)->ReadSync(a->handle, a->layout, 0, 10));
  EXPECT_EQ((*rc)->DataTransportOf(0), "");

  // rdma parses, with its provider; the RDMA port defaults to the data port + 1.
  Result<ClusterConfig> rdma_cfg = ParseClusterConfig(
      "[cluster]\nsecret_file = \"s\"\ntransport = \"rdma\"\n"
      "rdma_provider = \"tcp\"\n"
      "[[server]]\nid = 0\naddress = \"127.0.0.1:7000\"\n"
      "data_dir = \"d\"\n",
      "/tmp");
  ASSERT_OK(rdma_cfg);
  EXPECT_EQ(rdma_cfg->rdma_provider, "tcp");
  Result<std::string> rdma_addr = RdmaAddressOf(rdma_cfg->servers[0]);
  ASSERT_OK(rdma_addr);
  EXPECT_EQ(*rdma_addr, "127.0.0.1:8001");
  EXPECT_STATUS(Code::kInvalid,
                ParseClusterConfig("[cluster]\nsecret_file = \"s\"\ntransport = \"rdma\"\n"
                                   "rdma_provider = \"psm2\"\n"
                                   "[[server]]\nid = 0\naddress = \"127.0.0.1:7000\"\n"
                                   "data_dir = \"d\"\n",
                                   "/tmp"));
  EXPECT_STATUS(Code::kInvalid,
                ParseClusterConfig("[cluster]\nsecret_file = \"s\"\ntransport = \"udp\"\n"
                                   "[[server]]\nid = 0\naddress = \"127.0.0.1:7000\"\n"
                                   "data_dir = \"d\"\n",
                                   "/tmp"));
}

// ---------------------------------------------------------------- raw sockets

// A raw client of the TCP data channel that sends exactly the bytes a test says.
class RawConn {
 public:
  explicit RawConn(const std::string& address) {
    Result<int> fd = tcp::Dial(address, 2000);
    if (fd.ok()) fd_ = *fd;
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  Status Send(const void* p, size_t n) {
    return tcp::WritevFull(fd_, {iovec{const_cast<void*>(p), n}}, Deadline(5000));
  }
  Status SendHeader(const tcp::FrameHeader& h) {
    tcp::HeaderBytes b = tcp::Encode(h);
    return Send(b.data(), b.size());
  }
  // A request's header and its extents; its payload (payload_len bytes), if
  // any, is the caller's to send.
  Status SendRequest(uint16_t op, uint64_t handle, const std::vector<Extent>& extents,
                     uint64_t payload_len) {
    tcp::FrameHeader h;
    h.op = op;
    h.handle = handle;
    h.extent_count = static_cast<uint32_t>(extents.size());
    h.payload_len = payload_len;
    CLF_RETURN_IF_ERROR(SendHeader(h));
    return Send(extents.data(), extents.size() * sizeof(Extent));
  }
  Status ReadChallenge(tcp::Nonce* nonce) {
    tcp::FrameHeader h;
    CLF_RETURN_IF_ERROR(ReadHeader(&h));
    if (h.op != tcp::kChallenge || h.payload_len != nonce->size()) return Invalid("no challenge");
    return tcp::ReadFull(fd_, nonce->data(), nonce->size(), Deadline(5000));
  }
  // Answers the challenge with a MAC over `secret`; returns the server's verdict.
  Status Authenticate(const std::string& secret) {
    tcp::Nonce sn, cn{};
    CLF_RETURN_IF_ERROR(ReadChallenge(&sn));
    cn[0] = 42;
    tcp::Mac mac = tcp::AuthMac(secret, tcp::kClientLabel, sn, cn);
    tcp::FrameHeader a;
    a.op = tcp::kAuth;
    a.payload_len = cn.size() + mac.size();
    CLF_RETURN_IF_ERROR(SendHeader(a));
    CLF_RETURN_IF_ERROR(Send(cn.data(), cn.size()));
    CLF_RETURN_IF_ERROR(Send(mac.data(), mac.size()));
    return ReadReply(nullptr, nullptr);
  }
  Status ReadHeader(tcp::FrameHeader* h) {
    uint8_t b[tcp::kHeaderBytes];
    CLF_RETURN_IF_ERROR(tcp::ReadFull(fd_, b, sizeof b, Deadline(10000)));
    return tcp::Decode(b, h);
  }
  // Reads one reply: its status (with the server's message) and payload.
  Status ReadReply(tcp::FrameHeader* out, std::string* payload) {
    tcp::FrameHeader h;
    CLF_RETURN_IF_ERROR(ReadHeader(&h));
    if (out) *out = h;
    std::string body(h.payload_len, '\0');
    CLF_RETURN_IF_ERROR(tcp::ReadFull(fd_, body.data(), body.size(), Deadline(10000)));
    if (h.status != 0) return Status(static_cast<Code>(h.status), body);
    if (payload) *payload = std::move(body);
    return Status::Ok();
  }
  // True once the server closed the connection (within timeout_ms).
  bool ClosedByServer(int timeout_ms) {
    const auto end = tcp::Clock::now() + std::chrono::milliseconds(timeout_ms);
    char b[4096];
    while (tcp::Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t n = ::recv(fd_, b, sizeof b, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
    return false;
  }
  int fd() const { return fd_; }

 private:
  static tcp::Clock::time_point Deadline(int ms) {
    return tcp::Clock::now() + std::chrono::milliseconds(ms);
  }
  int fd_ = -1;
};

class TcpDataServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 1;
    o.stripe_size = 64 * kKiB;
    o.transport = "tcp";
    o.rpc_timeout_ms = 1000;  // the server's frame timeout
    o.direct_write_kib = DirectWriteKib();
    o.metrics = true;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
    Result<std::string> secret = ReadSecret(cluster_->config().secret_file);
    ASSERT_OK(secret);
    secret_ = *secret;
    Result<std::string> addr = DataAddressOf(cluster_->config().servers[0]);
    ASSERT_OK(addr);
    addr_ = *addr;
    client::Client& c = cluster_->client();
    Result<Attr> a = c.CreateSync(c.root(), "known", CreateArgs{});
    ASSERT_OK(a);
    known_ = *a;
    ASSERT_OK(c.WriteSync(known_.handle, known_.layout, 0, Known()));
  }
  virtual uint32_t DirectWriteKib() const { return 0; }
  static std::string Known() { return PatternBytes(5, 0, 200 * kKiB); }
  // The server is alive, serves a fresh raw connection and libclf, and the
  // known file is intact.
  void ExpectHealthy() {
    ASSERT_TRUE(cluster_->server_running(0)) << cluster_->LogTail(0);
    RawConn r(addr_);
    ASSERT_TRUE(r.ok());
    ASSERT_OK(r.Authenticate(secret_));
    tcp::FrameHeader q;
    q.op = tcp::kRead;
    q.request_id = 9;
    q.handle = known_.handle;
    q.extent_count = 1;
    ASSERT_OK(r.SendHeader(q));
    Extent e{0, 1000};
    ASSERT_OK(r.Send(&e, sizeof e));
    std::string got;
    tcp::FrameHeader rep;
    ASSERT_OK(r.ReadReply(&rep, &got));
    EXPECT_EQ(rep.request_id, 9u);
    EXPECT_EQ(got, Known().substr(0, 1000));
    client::Client& c = cluster_->client();
    Result<std::string> all = c.ReadSync(known_.handle, known_.layout, 0, Known().size());
    ASSERT_OK(all);
    EXPECT_EQ(FirstDifference(*all, Known()), -1);
  }
  std::unique_ptr<TestCluster> cluster_;
  std::string secret_, addr_;
  Attr known_;
};

TEST_F(TcpDataServerTest, UnauthenticatedAndWrongSecretAreRefused) {
  {  // A request instead of the authentication frame.
    RawConn r(addr_);
    tcp::Nonce sn;
    ASSERT_OK(r.ReadChallenge(&sn));
    tcp::FrameHeader q;
    q.op = tcp::kRead;
    q.handle = known_.handle;
    ASSERT_OK(r.SendHeader(q));
    EXPECT_STATUS(Code::kUnauthenticated, r.ReadReply(nullptr, nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // A MAC over the wrong secret.
    RawConn r(addr_);
    EXPECT_STATUS(Code::kUnauthenticated, r.Authenticate(secret_ + "x"));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // Silence: cut off after the frame timeout.
    RawConn r(addr_);
    EXPECT_TRUE(r.ClosedByServer(5000));
  }
  ExpectHealthy();
}

// A forwarded copy's request (the acting primary's forwarded writes, syncs
// and resync cuts) is taken from a server only: a connection that proved the
// clients' secret is refused and closed; one that proved the servers' peer
// secret is served.
TEST_F(TcpDataServerTest, ForwardedRequestsAreTakenFromServersOnly) {
  Result<std::string> peer = ReadSecret(cluster_->config().peer_secret_file);
  ASSERT_OK(peer);
  const uint32_t forwarded =
      transport::frame::ObjectFlags(ObjectRef::Forwarded(known_.handle, 1, 2, 0));
  auto forwarded_request = [&](RawConn& r, uint16_t op, std::vector<Extent> extents) {
    tcp::FrameHeader q;
    q.op = op;
    q.request_id = 7;
    q.handle = known_.handle;
    q.flags = forwarded;
    q.extent_count = static_cast<uint32_t>(extents.size());
    q.payload_len = op == tcp::kWrite ? extents[0].length : 0;
    ASSERT_OK(r.SendHeader(q));
    ASSERT_OK(r.Send(extents.data(), extents.size() * sizeof(Extent)));
    if (op == tcp::kWrite) {
      // A refusing server answers after the extents and closes: the payload
      // may find the connection gone.
      const std::string payload(extents[0].length, 'f');
      r.Send(payload.data(), payload.size()).IgnoreError();
    }
  };
  for (uint16_t op : {tcp::kWrite, tcp::kSync, tcp::kTruncate}) {
    SCOPED_TRACE(op);
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    std::vector<Extent> extents;
    if (op == tcp::kWrite) extents = {{0, 16}};
    if (op == tcp::kTruncate) extents = {{0, 0}};
    forwarded_request(r, op, extents);
    EXPECT_STATUS(Code::kPermission, r.ReadReply(nullptr, nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // The servers' secret: a server's connection; its forwarded sync is served.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(*peer));
    forwarded_request(r, tcp::kSync, {});
    EXPECT_OK(r.ReadReply(nullptr, nullptr));
  }
  ExpectHealthy();
}

TEST_F(TcpDataServerTest, MalformedFramesGetAnErrorAndAClosedConnection) {
  struct Case {
    const char* what;
    tcp::FrameHeader h;
    Code want;
  };
  std::vector<Case> cases;
  {
    tcp::FrameHeader h;
    h.magic = 0x12345678;
    h.op = tcp::kRead;
    cases.push_back({"bad magic", h, Code::kInvalid});
  }
  {
    tcp::FrameHeader h;
    h.version = 99;
    h.op = tcp::kRead;
    cases.push_back({"bad version", h, Code::kInvalid});
  }
  {
    tcp::FrameHeader h;
    h.op = 77;
    cases.push_back({"unknown op", h, Code::kInvalid});
  }
  {
    tcp::FrameHeader h;
    h.op = tcp::kWrite;
    h.handle = known_.handle;
    h.extent_count = 1;
    h.payload_len = kMaxIoBytes + 1;
    cases.push_back({"oversized payload", h, Code::kTooBig});
  }
  {
    tcp::FrameHeader h;
    h.op = tcp::kRead;
    h.handle = known_.handle;
    h.extent_count = static_cast<uint32_t>(kMaxExtents + 1);
    cases.push_back({"too many extents", h, Code::kTooBig});
  }
  {
    tcp::FrameHeader h;
    h.op = tcp::kRead;
    h.payload_len = 10;
    cases.push_back({"payload on a read", h, Code::kInvalid});
  }
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.SendHeader(k.h));
    EXPECT_STATUS(k.want, r.ReadReply(nullptr, nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // Extents the checks refuse: past the maximum file size, and a payload that does not match.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.SendRequest(tcp::kWrite, known_.handle, {{~uint64_t{0} - 2, 10}}, 10));
    EXPECT_STATUS(Code::kFileTooBig, r.ReadReply(nullptr, nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.SendRequest(tcp::kWrite, known_.handle, {{0, 10}}, 5));
    EXPECT_STATUS(Code::kInvalid, r.ReadReply(nullptr, nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // A list read whose extents total more than one request may carry.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(
        r.SendRequest(tcp::kRead, known_.handle, {{0, 10}, {100, kMaxIoBytes - 5}, {7, 1}}, 0));
    EXPECT_STATUS(Code::kTooBig, r.ReadReply(nullptr, nullptr));
  }
  ExpectHealthy();
}

TEST_F(TcpDataServerTest, TruncatedAndStalledFramesAreCutOff) {
  {  // Half a header, then a close.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    tcp::HeaderBytes b = tcp::Encode(tcp::FrameHeader{});
    ASSERT_OK(r.Send(b.data(), 20));
  }
  {  // A write whose payload stops short, then a close.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.SendRequest(tcp::kWrite, known_.handle, {{0, 100000}}, 100000));
    std::string junk(100, 'J');
    ASSERT_OK(r.Send(junk.data(), junk.size()));
  }
  {  // A peer that stalls mid-header: closed after the frame timeout (1 s here).
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    tcp::HeaderBytes b = tcp::Encode(tcp::FrameHeader{});
    ASSERT_OK(r.Send(b.data(), 10));
    EXPECT_TRUE(r.ClosedByServer(5000));
  }
  {  // A peer that stalls mid-payload: an error reply, then closed.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.SendRequest(tcp::kWrite, known_.handle, {{0, 4096}}, 4096));
    ASSERT_OK(r.Send("abc", 3));
    EXPECT_STATUS(Code::kTimedOut, r.ReadReply(nullptr, nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // An idle authenticated connection is kept (persistent), and serves after a pause.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    EXPECT_FALSE(r.ClosedByServer(2500));
    tcp::FrameHeader q;
    q.op = tcp::kSync;
    q.handle = known_.handle;
    ASSERT_OK(r.SendHeader(q));
    EXPECT_OK(r.ReadReply(nullptr, nullptr));
  }
  {  // A write to a handle with no object yet creates it (objects are made by the
     // first write); the connection stays usable for the next frame.
    RawConn r(addr_);
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.SendRequest(tcp::kWrite, known_.handle + 12345, {{0, 3}}, 3));
    ASSERT_OK(r.Send("abc", 3));
    EXPECT_OK(r.ReadReply(nullptr, nullptr));
    tcp::FrameHeader q;
    q.op = tcp::kSync;
    q.handle = known_.handle;
    ASSERT_OK(r.SendHeader(q));
    EXPECT_OK(r.ReadReply(nullptr, nullptr));
  }
  ExpectHealthy();
}

// The same server with direct writes on (direct_write_kib = 64: the stripe
// unit here, and libclf sends a request per unit): large
// aligned writes over the TCP channel are received into aligned memory and
// written with O_DIRECT; they read back exactly, mixed with buffered ones,
// and a direct-sized write whose payload stops short writes nothing.
class TcpDataServerDirectTest : public TcpDataServerTest {
 protected:
  uint32_t DirectWriteKib() const override { return 64; }
  double DirectWrites() {
    return Sample(Body(Get(cluster_->config().servers[0].metrics_address)),
                  "clf_object_direct_writes_total");
  }
};

TEST_F(TcpDataServerDirectTest, AlignedWritesGoDirectAndReadBackExactly) {
  client::Client& c = cluster_->client();
  Result<Attr> a = c.CreateSync(c.root(), "direct", CreateArgs{});
  ASSERT_OK(a);
  const double before = DirectWrites();
  ASSERT_GE(before, 0) << "no clf_object_direct_writes_total on the server";
  // 4 MiB from offset 0 (aligned: direct), then 1 MiB + 100 bytes at an odd
  // offset over part of it (buffered), then 512 KiB aligned over that (direct).
  std::string want = PatternBytes(31, 0, 4096 * kKiB);
  ASSERT_OK(c.WriteSync(a->handle, a->layout, 0, want));
  const double after_aligned = DirectWrites();
  EXPECT_GT(after_aligned, before) << "a 4 MiB aligned write was not direct";
  const std::string odd = PatternBytes(32, 1000001, 1024 * kKiB + 100);
  ASSERT_OK(c.WriteSync(a->handle, a->layout, 1000001, odd));
  want.replace(1000001, odd.size(), odd);
  const std::string over = PatternBytes(33, 1024 * kKiB, 512 * kKiB);
  ASSERT_OK(c.WriteSync(a->handle, a->layout, 1024 * kKiB, over));
  want.replace(1024 * kKiB, over.size(), over);
  EXPECT_GT(DirectWrites(), after_aligned);
  ASSERT_OK(c.SyncSync(a->handle, a->layout));
  Result<std::string> r = c.ReadSync(a->handle, a->layout, 0, want.size());
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, want), -1);

  // A 1 MiB aligned write of which only `sent` payload bytes arrive.
  auto start_cut_write = [&](RawConn& raw, size_t sent) {
    ASSERT_OK(raw.Authenticate(secret_));
    ASSERT_OK(raw.SendRequest(tcp::kWrite, a->handle, {{0, 1024 * kKiB}}, 1024 * kKiB));
    std::string junk(sent, 'J');
    ASSERT_OK(raw.Send(junk.data(), junk.size()));
  };
  {  // Stops short, then a close.
    RawConn raw(addr_);
    start_cut_write(raw, 300 * kKiB);
    ASSERT_FALSE(HasFatalFailure());
  }
  {  // Stalls: an error reply after the frame timeout, then closed.
    RawConn raw(addr_);
    start_cut_write(raw, 4096);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_STATUS(Code::kTimedOut, raw.ReadReply(nullptr, nullptr));
    EXPECT_TRUE(raw.ClosedByServer(3000));
  }
  r = c.ReadSync(a->handle, a->layout, 0, want.size());
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, want), -1) << "a cut-off direct write changed the file";
  ExpectHealthy();
}

}  // namespace
}  // namespace clf::testing
