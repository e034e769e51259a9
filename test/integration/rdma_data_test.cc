// The RDMA data path (libfabric, tcp provider here): the registration cache,
// the RDMA listener under hostile input from a raw libfabric client, the auto
// rule on a host without RDMA hardware, and (skipped without a device) verbs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "common/transport/rdma_fabric.h"
#include "common/transport/rdma_transport.h"
#include "common/transport/tcp_protocol.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;
namespace rdma = transport::rdma;
namespace tcp = transport::tcp;

constexpr uint64_t kKiB = 1024;

rdma::Clock::time_point In(int ms) { return rdma::Clock::now() + std::chrono::milliseconds(ms); }

// A raw libfabric client of the RDMA listener that sends exactly the messages a test says.
class RawRdma {
 public:
  Status Connect(const std::string& address) {
    std::string host, port;
    CLF_RETURN_IF_ERROR(tcp::SplitHostPort(address, &host, &port));
    CLF_ASSIGN_OR_RETURN(rdma::InfoPtr info, rdma::GetInfo("tcp", host, port, false));
    CLF_ASSIGN_OR_RETURN(domain_, rdma::Domain::Open(std::move(info)));
    ep_ = std::make_unique<rdma::Endpoint>(domain_);
    CLF_RETURN_IF_ERROR(ep_->Open(domain_->info()));
    return ep_->Connect(In(5000));
  }
  Status ReadChallenge(tcp::Nonce* nonce) {
    rdma::Message m;
    CLF_RETURN_IF_ERROR(Receive(&m));
    if (m.h.op != rdma::kChallenge || m.payload.size() != nonce->size()) {
      return Invalid("no challenge");
    }
    std::memcpy(nonce->data(), m.payload.data(), nonce->size());
    return Status::Ok();
  }
  Status Authenticate(const std::string& secret) {
    tcp::Nonce sn, cn{};
    CLF_RETURN_IF_ERROR(ReadChallenge(&sn));
    cn[0] = 7;
    tcp::Mac mac = tcp::AuthMac(secret, rdma::kClientLabel, sn, cn);
    rdma::Message a;
    a.h.op = rdma::kAuth;
    a.payload.assign(reinterpret_cast<const char*>(cn.data()), cn.size());
    a.payload.append(reinterpret_cast<const char*>(mac.data()), mac.size());
    CLF_RETURN_IF_ERROR(Send(a));
    return Reply(nullptr);
  }
  Status Send(const rdma::Message& m) {
    const size_t len = rdma::Encode(m, ep_->send_buf(), rdma::kMaxMessageBytes);
    if (len == 0) return Invalid("does not fit");
    return ep_->Send(len, In(5000));
  }
  Status SendRaw(const void* p, size_t n) {
    std::memcpy(ep_->send_buf(), p, n);
    return ep_->Send(n, In(5000));
  }
  Status Receive(rdma::Message* m) {
    CLF_ASSIGN_OR_RETURN(size_t n, ep_->WaitRecv(In(10000)));
    Status st = rdma::Decode(ep_->recv_buf(), n, m);
    CLF_RETURN_IF_ERROR(ep_->PostRecv());
    return st;
  }
  // One reply: its status (with the server's message).
  Status Reply(rdma::Message* out) {
    rdma::Message m;
    CLF_RETURN_IF_ERROR(Receive(&m));
    if (out) *out = m;
    if (m.h.status != 0) return Status(static_cast<Code>(m.h.status), m.payload);
    return Status::Ok();
  }
  // True once the server closed the endpoint (within timeout_ms).
  bool ClosedByServer(int timeout_ms) {
    Result<size_t> n = ep_->WaitRecv(In(timeout_ms));
    return !n.ok() && n.status().code() == Code::kUnavailable;
  }
  // Registers `buf` for the server to read (FI_REMOTE_READ) or write (FI_REMOTE_WRITE).
  Result<rdma::RemoteBuf> Expose(std::string* buf, uint64_t access) {
    CLF_ASSIGN_OR_RETURN(std::shared_ptr<rdma::MemoryRegion> r,
                         domain_->Register(buf->data(), buf->size(), access));
    regions_.push_back(r);
    const uintptr_t p = reinterpret_cast<uintptr_t>(buf->data());
    return rdma::RemoteBuf{r->RemoteAddr(p), buf->size(), r->key};
  }
  void Close() { ep_.reset(); }
  ~RawRdma() {
    ep_.reset();
    regions_.clear();
  }

 private:
  std::shared_ptr<rdma::Domain> domain_;
  std::unique_ptr<rdma::Endpoint> ep_;
  std::vector<std::shared_ptr<rdma::MemoryRegion>> regions_;
};

class RdmaDataServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 1;
    o.stripe_size = 64 * kKiB;
    o.transport = "rdma";
    o.rdma_provider = "tcp";
    o.rpc_timeout_ms = 1000;  // the server's request timeout
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
    Result<std::string> secret = ReadSecret(cluster_->config().secret_file);
    ASSERT_OK(secret);
    secret_ = *secret;
    Result<std::string> addr = RdmaAddressOf(cluster_->config().servers[0]);
    ASSERT_OK(addr);
    addr_ = *addr;
    client::Client& c = cluster_->client();
    Result<Attr> a = c.CreateSync(c.root(), "known", CreateArgs{});
    ASSERT_OK(a);
    known_ = *a;
    ASSERT_OK(c.WriteSync(known_.handle, known_.layout, 0, Known()));
    ASSERT_EQ(c.DataTransportOf(0), "rdma(tcp)");
  }
  static std::string Known() { return PatternBytes(5, 0, 200 * kKiB); }
  // A read of the known file's first `n` bytes into a registered buffer of `raw`.
  void ExpectRawRead(RawRdma& raw, size_t n) {
    std::string buf(n, 'x');
    Result<rdma::RemoteBuf> rb = raw.Expose(&buf, FI_REMOTE_WRITE);
    ASSERT_OK(rb);
    rdma::Message q;
    q.h.op = rdma::kRead;
    q.h.request_id = 9;
    q.h.handle = known_.handle;
    q.extents = {Extent{0, n}};
    q.buffers = {*rb};
    ASSERT_OK(raw.Send(q));
    rdma::Message rep;
    ASSERT_OK(raw.Reply(&rep));
    EXPECT_EQ(rep.h.request_id, 9u);
    EXPECT_EQ(rep.h.op, rdma::kRead | rdma::kReplyBit);
    EXPECT_EQ(buf, Known().substr(0, n));
  }
  // The server is alive, serves a fresh raw endpoint and libclf, and the known file is intact.
  void ExpectHealthy() {
    ASSERT_TRUE(cluster_->server_running(0)) << cluster_->LogTail(0);
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    ASSERT_OK(r.Authenticate(secret_));
    ExpectRawRead(r, 1000);
    client::Client& c = cluster_->client();
    Result<std::string> all = c.ReadSync(known_.handle, known_.layout, 0, Known().size());
    ASSERT_OK(all);
    EXPECT_EQ(FirstDifference(*all, Known()), -1);
  }
  std::unique_ptr<TestCluster> cluster_;
  std::string secret_, addr_;
  Attr known_;
};

TEST_F(RdmaDataServerTest, UnauthenticatedAndWrongSecretAreRefused) {
  {  // A request instead of the authentication message.
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    tcp::Nonce sn;
    ASSERT_OK(r.ReadChallenge(&sn));
    rdma::Message q;
    q.h.op = rdma::kRead;
    q.h.handle = known_.handle;
    ASSERT_OK(r.Send(q));
    EXPECT_STATUS(Code::kUnauthenticated, r.Reply(nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // A MAC over the wrong secret.
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    EXPECT_STATUS(Code::kUnauthenticated, r.Authenticate(secret_ + "x"));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // Silence: cut off after the request timeout (1 s here).
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    tcp::Nonce sn;
    ASSERT_OK(r.ReadChallenge(&sn));
    EXPECT_TRUE(r.ClosedByServer(5000));
  }
  ExpectHealthy();
}

TEST_F(RdmaDataServerTest, MalformedRequestsGetAnErrorAndAClosedEndpoint) {
  std::string mem(64 * kKiB, 'm');
  struct Case {
    const char* what;
    rdma::Message m;
    Code want;
  };
  std::vector<Case> cases;
  auto read_of = [&](uint64_t n) {
    rdma::Message m;
    m.h.op = rdma::kRead;
    m.h.handle = known_.handle;
    m.extents = {Extent{0, n}};
    return m;
  };
  {
    rdma::Message m = read_of(10);
    m.h.op = 77;
    cases.push_back({"unknown op", m, Code::kInvalid});
  }
  {
    rdma::Message m = read_of(10);
    m.payload = "inline";
    cases.push_back({"inline payload on a request", m, Code::kInvalid});
  }
  {
    rdma::Message m = read_of(10);
    m.buffers = {rdma::RemoteBuf{0x1000, 5, 1}};
    cases.push_back({"buffers shorter than the extents", m, Code::kInvalid});
  }
  {
    rdma::Message m = read_of(10);
    m.buffers = {rdma::RemoteBuf{0x1000, 10, 1}, rdma::RemoteBuf{0x3000, 0, 1}};
    cases.push_back({"an empty buffer", m, Code::kInvalid});
  }
  {
    rdma::Message m = read_of(10);
    m.buffers = {rdma::RemoteBuf{~uint64_t{0} - 4, 10, 1}};
    cases.push_back({"a buffer wrapping the address space", m, Code::kInvalid});
  }
  {
    rdma::Message m = read_of(10);
    m.buffers = {rdma::RemoteBuf{0x1000, kMaxIoBytes + 1, 1}};
    cases.push_back({"an oversized buffer", m, Code::kInvalid});
  }
  {
    rdma::Message m;
    m.h.op = rdma::kSync;
    m.h.handle = known_.handle;
    m.extents = {Extent{0, 1}};
    cases.push_back({"extents on a sync", m, Code::kInvalid});
  }
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.Send(k.m));
    EXPECT_STATUS(k.want, r.Reply(nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  struct RawCase {
    const char* what;
    std::string bytes;
  };
  std::vector<RawCase> raws;
  {
    rdma::Message m = read_of(10);
    std::string b(rdma::kMaxMessageBytes, '\0');
    b.resize(rdma::Encode(m, reinterpret_cast<uint8_t*>(b.data()), b.size()));
    std::string bad_magic = b;
    bad_magic[0] ^= 0x55;
    raws.push_back({"bad magic", bad_magic});
    std::string bad_version = b;
    bad_version[4] = 99;
    raws.push_back({"bad version", bad_version});
    std::string short_msg = b.substr(0, b.size() - 3);
    raws.push_back({"counts larger than the message", short_msg});
    raws.push_back({"shorter than a header", b.substr(0, 20)});
  }
  for (const RawCase& k : raws) {
    SCOPED_TRACE(k.what);
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    ASSERT_OK(r.Authenticate(secret_));
    ASSERT_OK(r.SendRaw(k.bytes.data(), k.bytes.size()));
    EXPECT_STATUS(Code::kInvalid, r.Reply(nullptr));
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  ExpectHealthy();
}

TEST_F(RdmaDataServerTest, BadKeysAndLengthsFailTheRequestNotTheServer) {
  {  // A key the client never registered: the RDMA READ fails on the server.
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    ASSERT_OK(r.Authenticate(secret_));
    rdma::Message q;
    q.h.op = rdma::kWrite;
    q.h.handle = known_.handle;
    q.extents = {Extent{0, 4096}};
    q.buffers = {rdma::RemoteBuf{0x10000, 4096, 0xdeadbeef}};
    ASSERT_OK(r.Send(q));
    Status st = r.Reply(nullptr);
    EXPECT_FALSE(st.ok());  // an error reply, or the endpoint already gone
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // A registered buffer, named with a length past its registration (a read: RDMA WRITE).
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    ASSERT_OK(r.Authenticate(secret_));
    std::string small(4096, 's');
    Result<rdma::RemoteBuf> rb = r.Expose(&small, FI_REMOTE_WRITE);
    ASSERT_OK(rb);
    rb->len = 100 * kKiB;
    rdma::Message q;
    q.h.op = rdma::kRead;
    q.h.handle = known_.handle;
    q.extents = {Extent{0, 100 * kKiB}};
    q.buffers = {*rb};
    ASSERT_OK(r.Send(q));
    EXPECT_FALSE(r.Reply(nullptr).ok());
    EXPECT_TRUE(r.ClosedByServer(3000));
  }
  {  // Extents the checks refuse, a missing object: an error reply, the endpoint stays usable.
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    ASSERT_OK(r.Authenticate(secret_));
    rdma::Message q;
    q.h.op = rdma::kRead;
    q.h.handle = known_.handle;
    q.extents = {Extent{~uint64_t{0} - 2, 10}};
    q.buffers = {rdma::RemoteBuf{0x1000, 10, 1}};
    ASSERT_OK(r.Send(q));
    EXPECT_STATUS(Code::kFileTooBig, r.Reply(nullptr));
    rdma::Message s;
    s.h.op = rdma::kSync;
    s.h.handle = known_.handle;
    ASSERT_OK(r.Send(s));
    EXPECT_OK(r.Reply(nullptr));
    ExpectRawRead(r, 4000);
  }
  ExpectHealthy();
}

TEST_F(RdmaDataServerTest, PeerThatDisconnectsMidOperation) {
  for (int i = 0; i < 3; ++i) {
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    ASSERT_OK(r.Authenticate(secret_));
    std::string big(32u << 20, 'b');
    Result<rdma::RemoteBuf> rb = r.Expose(&big, FI_REMOTE_READ);
    ASSERT_OK(rb);
    rdma::Message q;
    q.h.op = rdma::kWrite;
    q.h.handle = known_.handle + 777;  // a scratch object, not the known file
    q.extents = {Extent{0, big.size()}};
    q.buffers = {*rb};
    ASSERT_OK(r.Send(q));
    r.Close();  // gone while the server pulls 32 MiB
  }
  {  // Connected, then gone before authenticating.
    RawRdma r;
    ASSERT_OK(r.Connect(addr_));
    r.Close();
  }
  ExpectHealthy();
}

TEST_F(RdmaDataServerTest, RegistrationCacheReusesRegistrations) {
  transport::RdmaTransport t(addr_, "tcp", secret_, 5000);
  ASSERT_OK(t.Probe());
  EXPECT_EQ(t.provider(), "tcp");
  std::string buf = PatternBytes(9, 0, 256 * kKiB);
  // Two iovecs of one buffer, out of order: one registration covers both.
  std::vector<iovec> iov{iovec{buf.data() + 128 * kKiB, 128 * kKiB}, iovec{buf.data(), 128 * kKiB}};
  const Handle h = known_.handle + 4242;
  std::vector<Extent> ext{{0, 128 * kKiB}, {128 * kKiB, 128 * kKiB}};
  for (int i = 0; i < 10; ++i) ASSERT_OK(t.Write(h, ext, iov, false));
  transport::RdmaTransport::CacheStats s = t.cache_stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 9u);
  EXPECT_EQ(s.entries, 1u);
  std::string back(256 * kKiB, '\0');
  ASSERT_OK(t.Read(h, {{0, 256 * kKiB}}, {iovec{back.data(), back.size()}}));
  EXPECT_EQ(back.substr(0, 128 * kKiB), buf.substr(128 * kKiB));
  EXPECT_EQ(back.substr(128 * kKiB), buf.substr(0, 128 * kKiB));
  // Many extents: more than one message's worth (4 KiB pieces of 8 MiB) is cut into several.
  std::string many = PatternBytes(10, 0, 8u << 20);
  std::vector<Extent> ext2;
  std::vector<iovec> iov2;
  for (uint64_t o = 0; o < many.size(); o += 4096) {
    ext2.push_back({o, 4096});
    iov2.push_back(iovec{many.data() + o, 4096});
  }
  ASSERT_OK(t.Write(h + 1, ext2, iov2, true));
  std::string back2(many.size(), '\0');
  ASSERT_OK(t.Read(h + 1, {{0, many.size()}}, {iovec{back2.data(), back2.size()}}));
  EXPECT_EQ(FirstDifference(back2, many), -1);
  ASSERT_OK(t.Sync(h + 1));
}

TEST(RdmaSelection, AutoStaysOnTcpWithoutRdmaHardware) {
  if (transport::HardwareRdmaAvailable()) {
    GTEST_SKIP() << "this host has a verbs device: auto picks RDMA here";
  }
  ClusterOptions o;
  o.servers = 2;
  o.transport = "auto";
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  client::Client& c = cluster.client();
  Result<Attr> a = c.CreateSync(c.root(), "f", CreateArgs{});
  ASSERT_OK(a);
  ASSERT_OK(c.WriteSync(a->handle, a->layout, 0, PatternBytes(4, 0, 3 << 20)));
  EXPECT_EQ(c.DataTransportOf(0), "tcp");
  EXPECT_EQ(c.DataTransportOf(1), "tcp");
  for (const client::ServerStatus& s : c.ServerStatuses()) EXPECT_EQ(s.transport, "tcp");
}

TEST(RdmaHardware, VerbsRoundTrip) {
  if (!transport::HardwareRdmaAvailable()) {
    GTEST_SKIP() << "no libfabric verbs provider with a device on this host (no InfiniBand/RoCE "
                    "NIC, no rxe/siw): the verbs path is not run here; the same one-sided code "
                    "runs over the tcp provider in the other tests";
  }
  ClusterOptions o;
  o.servers = 2;
  o.transport = "rdma";
  o.rdma_provider = "verbs";
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  client::Client& c = cluster.client();
  Result<Attr> a = c.CreateSync(c.root(), "f", CreateArgs{});
  ASSERT_OK(a);
  const std::string data = PatternBytes(6, 0, 5 << 20);
  ASSERT_OK(c.WriteSync(a->handle, a->layout, 0, data));
  Result<std::string> r = c.ReadSync(a->handle, a->layout, 0, data.size());
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, data), -1);
  EXPECT_EQ(c.DataTransportOf(0), "rdma(verbs)");
}

}  // namespace
}  // namespace clf::testing
