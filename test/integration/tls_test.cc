// Mutual TLS on real clfd processes: certificates made by `clf certs`, gRPC
// with SslServerCredentials requiring a client certificate, the TCP data
// channel inside TLS, and the role a certificate carries (OU server / client)
// deciding who may call Peer and Admin.RemoveObject. Refusals are checked with
// raw gRPC stubs and raw transports, not through libclf's own checks.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "clf/client.h"
#include "clf/v1/admin.grpc.pb.h"
#include "clf/v1/meta.grpc.pb.h"
#include "clf/v1/peer.grpc.pb.h"
#include "common/config.h"
#include "common/credentials.h"
#include "common/layout.h"
#include "common/status_grpc.h"
#include "common/transport/tcp_transport.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

constexpr int kServers = 3;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions o;
    o.servers = kServers;
    o.stripe_size = 64 * 1024;
    o.transport = "tcp";  // data must go over the TLS data channel, no fallback
    o.tls = true;
    cluster_ = new TestCluster(o);
    Status st = cluster_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    // A second CA with its own client certificate: trusted by nobody here.
    tools::RunResult r = *tools::Run({TestCluster::Binary("CLF", "clf"), "certs", "--cluster",
                                      cluster_->cluster_file(), "--dir", ForeignDir()},
                                     60000);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    client::Client& c = cluster_->client();
    Result<client::Attr> a = c.CreateSync(c.root(), "keep", client::CreateArgs{});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    keep_ = new client::Attr(*a);
    ASSERT_OK(c.WriteSync(a->handle, a->layout, 0, Content()));
    ASSERT_OK(c.SyncSync(a->handle, a->layout));
  }
  static void TearDownTestSuite() {
    delete keep_;
    keep_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    ASSERT_NE(keep_, nullptr);
  }
  // After every test: every server alive, the known file intact.
  void TearDown() override {
    if (cluster_ == nullptr || keep_ == nullptr) return;
    for (int k = 0; k < kServers; ++k) {
      EXPECT_TRUE(cluster_->server_running(k)) << "clfd " << k << " died:\n"
                                               << cluster_->LogTail(k);
    }
    client::Client& c = cluster_->client();
    Result<client::Attr> a = c.LookupSync(c.root(), "keep");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->size, Content().size());
    Result<std::string> r = c.ReadSync(a->handle, a->layout, 0, Content().size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(FirstDifference(*r, Content()), -1);
  }

  static std::string Content() { return PatternBytes(5, 0, 300 * 1024); }
  static std::string ForeignDir() { return cluster_->dir() + "/foreign-ca"; }
  static std::string Tls(const std::string& f) { return cluster_->tls_dir() + "/" + f; }

  static std::string Pem(const std::string& path, bool key) {
    Result<std::string> p = ReadPemFile(path, key);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : std::string();
  }

  // A channel to server k presenting cert/key and trusting `ca`.
  static std::shared_ptr<grpc::Channel> TlsChannel(int k, const std::string& ca,
                                                   const std::string& cert,
                                                   const std::string& key) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Pem(ca, false);
    o.pem_cert_chain = Pem(cert, false);
    o.pem_private_key = Pem(key, true);
    return grpc::CreateCustomChannel(cluster_->config().servers[static_cast<size_t>(k)].address,
                                     grpc::SslCredentials(o), ClfChannelArgs());
  }
  static std::shared_ptr<grpc::Channel> ClientChannel(int k) {
    return TlsChannel(k, Tls("ca.crt"), Tls("client.crt"), Tls("client.key"));
  }
  static std::shared_ptr<grpc::Channel> ServerChannel(int k) {
    return TlsChannel(k, Tls("ca.crt"), Tls("server-" + std::to_string(k) + ".crt"),
                      Tls("server-" + std::to_string(k) + ".key"));
  }

  template <typename Fn>
  static Status Call(Fn fn) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return FromGrpc(fn(&ctx));
  }
  static Status AdminStatus(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = v1::Admin::NewStub(ch);
    v1::StatusRequest req;
    v1::StatusReply rep;
    return Call([&](grpc::ClientContext* ctx) { return stub->Status(ctx, req, &rep); });
  }

  // A REMOVE collective of the known file's objects, sent to server k.
  static v1::CollectiveRequest RemoveKeep(int k) {
    v1::CollectiveRequest r;
    r.set_op(v1::COLL_REMOVE);
    r.set_server_count(kServers);
    r.add_targets(static_cast<uint32_t>(k));
    v1::CollFile* f = r.add_files();
    f->set_handle(keep_->handle);
    f->mutable_layout()->set_stripe_size(keep_->layout.stripe_size);
    f->mutable_layout()->set_stripe_count(keep_->layout.stripe_count);
    f->mutable_layout()->set_first_server(keep_->layout.first_server);
    f->mutable_layout()->set_replicas(keep_->layout.replicas);
    return r;
  }

  static TestCluster* cluster_;
  static client::Attr* keep_;
};

TestCluster* TlsTest::cluster_ = nullptr;
client::Attr* TlsTest::keep_ = nullptr;

TEST_F(TlsTest, ClusterWorksEndToEndOverTls) {
  client::Client& c = cluster_->client();
  // A directory (made on another server by Peer.MakeDir: server-to-server TLS)
  // and a file striped over every server, written and read on the data channel.
  client::CreateArgs dir_args;
  dir_args.type = client::FileType::kDirectory;
  dir_args.mode = 0755;
  Result<client::Attr> d = c.CreateSync(c.root(), "dir", dir_args);
  ASSERT_OK(d);
  Result<client::Attr> f = c.CreateSync(d->handle, "f", client::CreateArgs{});
  ASSERT_OK(f);
  const std::string data = PatternBytes(9, 0, 1 << 20);
  ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, data));
  Result<std::string> back = c.ReadSync(f->handle, f->layout, 0, data.size());
  ASSERT_OK(back);
  EXPECT_EQ(FirstDifference(*back, data), -1);
  for (int k = 0; k < kServers; ++k) {
    EXPECT_EQ(c.DataTransportOf(static_cast<ServerId>(k)), "tcp") << "server " << k;
  }
  // A second client opened from the cluster file alone (its [tls] section).
  Result<std::unique_ptr<client::Client>> other = client::Client::Open(cluster_->cluster_file());
  ASSERT_OK(other);
  Result<client::Attr> a = (*other)->LookupSync(d->handle, "f");
  ASSERT_OK(a);
  EXPECT_EQ(a->size, data.size());
  ASSERT_OK(c.RemoveSync(d->handle, "f", false));
  ASSERT_OK(c.RemoveSync(c.root(), "dir", true));
}

TEST_F(TlsTest, PlaintextClientIsRefused) {
  // gRPC without TLS, even with the clients' secret: no TLS handshake, no call.
  Result<std::string> secret = ReadSecret(cluster_->config().secret_file);
  ASSERT_OK(secret);
  for (int k = 0; k < kServers; ++k) {
    auto ch = grpc::CreateCustomChannel(cluster_->config().servers[static_cast<size_t>(k)].address,
                                        grpc::InsecureChannelCredentials(), ClfChannelArgs());
    auto stub = v1::Admin::NewStub(ch);
    v1::StatusRequest req;
    v1::StatusReply rep;
    Status s = Call([&](grpc::ClientContext* ctx) {
      ctx->AddMetadata(kSecretHeader, *secret);
      return stub->Status(ctx, req, &rep);
    });
    EXPECT_STATUS(Code::kUnavailable, s);
  }
  // libclf with the same cluster file minus [tls] (secret auth) gets nothing either.
  ClusterConfig plain = cluster_->config();
  plain.tls = TlsConfig();
  client::ClientOptions o;
  o.rpc_timeout_ms = 2000;
  Result<std::unique_ptr<client::Client>> c = client::Client::Open(plain, o);
  ASSERT_OK(c);
  EXPECT_FALSE((*c)->GetAttrSync(kRootHandle).ok());
}

TEST_F(TlsTest, CertificateFromAnotherCaIsRefused) {
  const std::string fca = ForeignDir() + "/ca.crt";
  const std::string fcert = ForeignDir() + "/client.crt";
  const std::string fkey = ForeignDir() + "/client.key";
  for (int k = 0; k < kServers; ++k) {
    // Trusting the real CA (so the server's certificate passes) but presenting
    // the foreign client certificate: the server refuses the handshake.
    EXPECT_STATUS(Code::kUnavailable, AdminStatus(TlsChannel(k, Tls("ca.crt"), fcert, fkey)));
    // Trusting only the foreign CA: the client refuses the server.
    EXPECT_STATUS(Code::kUnavailable, AdminStatus(TlsChannel(k, fca, fcert, fkey)));
    // Control: the cluster's own client certificate is accepted.
    EXPECT_OK(AdminStatus(ClientChannel(k)));
  }
  // libclf given the foreign certificate (-o tls_cert=, tls_key=) reaches nothing.
  client::ClientOptions o;
  o.rpc_timeout_ms = 2000;
  o.tls_cert = fcert;
  o.tls_key = fkey;
  Result<std::unique_ptr<client::Client>> c = client::Client::Open(cluster_->cluster_file(), o);
  ASSERT_OK(c);
  EXPECT_FALSE((*c)->GetAttrSync(kRootHandle).ok());
}

TEST_F(TlsTest, ClientCertificateCannotCallPeerOrRemoveObject) {
  for (int k = 0; k < kServers; ++k) {
    auto peer = v1::Peer::NewStub(ClientChannel(k));
    auto admin = v1::Admin::NewStub(ClientChannel(k));
    v1::CollectiveRequest coll = RemoveKeep(k);
    v1::CollectiveReply crep;
    EXPECT_STATUS(Code::kPermission, Call([&](grpc::ClientContext* ctx) {
                    return peer->Collective(ctx, coll, &crep);
                  }));
    v1::RemoveObjectRequest ro;
    ro.set_handle(keep_->handle);
    v1::RemoveObjectReply rorep;
    EXPECT_STATUS(Code::kPermission, Call([&](grpc::ClientContext* ctx) {
                    return admin->RemoveObject(ctx, ro, &rorep);
                  }));
    v1::MakeDirRequest md;
    md.set_parent(kRootHandle);
    v1::AttrOnly mrep;
    EXPECT_STATUS(Code::kPermission,
                  Call([&](grpc::ClientContext* ctx) { return peer->MakeDir(ctx, md, &mrep); }));
    // Read-only Admin calls stay open to clients.
    v1::ListObjectsRequest lo;
    v1::ListObjectsReply lorep;
    EXPECT_OK(Call([&](grpc::ClientContext* ctx) { return admin->ListObjects(ctx, lo, &lorep); }));
  }
  // A server certificate passes the role check (a harmless request: the
  // handle's server does not exist, so validation answers ESTALE, not EPERM).
  auto admin = v1::Admin::NewStub(ServerChannel(1));
  v1::RemoveObjectRequest ro;
  ro.set_handle(MakeHandle(0xFFFF, 1));
  v1::RemoveObjectReply rorep;
  EXPECT_STATUS(Code::kStale, Call([&](grpc::ClientContext* ctx) {
                  return admin->RemoveObject(ctx, ro, &rorep);
                }));
  // TearDown reads the known file back: the refused REMOVE removed nothing.
}

// clf fsck lists with the client certificate; removing an orphan needs a
// server's: with the client certificate every removal is refused and the
// object stays; by default (the first server key this host can read) it goes.
TEST_F(TlsTest, FsckRepairNeedsAServerCertificate) {
  const std::string clf = TestCluster::Binary("CLF", "clf");
  ASSERT_OK(cluster_->StopServer(1));
  const Handle ghost = MakeHandle(1, 0xABCDE12345ull);
  char rel[64];
  std::snprintf(rel, sizeof rel, "/objects/%02x/%016" PRIx64, static_cast<unsigned>(ghost % 256),
                ghost);
  const std::string ghost_path = cluster_->data_dir(1) + rel;
  ASSERT_TRUE(std::filesystem::is_directory(std::filesystem::path(ghost_path).parent_path()))
      << "object folder layout changed: " << ghost_path;
  ASSERT_OK(tools::WriteFileWithMode(ghost_path, "orphaned bytes", 0600));
  ASSERT_OK(cluster_->RestartServer(1));

  Result<tools::RunResult> r =
      tools::Run({clf, "fsck", "--cluster", cluster_->cluster_file()}, 60000);
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 1) << r->output;
  EXPECT_NE(r->output.find("1 orphaned data object"), std::string::npos) << r->output;
  r = tools::Run({clf, "fsck", "--cluster", cluster_->cluster_file(), "--repair", "--tls-cert",
                  Tls("client.crt"), "--tls-key", Tls("client.key")},
                 60000);
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 1) << r->output;
  EXPECT_NE(r->output.find("for servers only"), std::string::npos) << r->output;
  EXPECT_TRUE(std::filesystem::exists(ghost_path));
  r = tools::Run({clf, "fsck", "--cluster", cluster_->cluster_file(), "--repair"}, 60000);
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find("removed 1 orphaned"), std::string::npos) << r->output;
  EXPECT_FALSE(std::filesystem::exists(ghost_path));
}

TEST_F(TlsTest, DataChannelRefusesWrongCertificates) {
  const std::string addr = *DataAddressOf(cluster_->config().servers[0]);
  auto transport_with =
      [&](const std::string& ca, const std::string& cert,
          const std::string& key) -> Result<std::unique_ptr<transport::TcpTransport>> {
    Credentials cred;
    cred.tls = true;
    cred.ca_pem = Pem(ca, false);
    cred.cert_pem = Pem(cert, false);
    cred.key_pem = Pem(key, true);
    CLF_ASSIGN_OR_RETURN(SslCtxPtr ctx, MakeDataTlsContext(cred, false));
    transport::DataChannelAuth auth;
    auth.tls = ctx;
    return std::make_unique<transport::TcpTransport>(addr, auth, 2000, 1);
  };
  {  // Control: the cluster's client certificate.
    Result<std::unique_ptr<transport::TcpTransport>> t =
        transport_with(Tls("ca.crt"), Tls("client.crt"), Tls("client.key"));
    ASSERT_OK(t);
    EXPECT_OK((*t)->Probe());
  }
  {  // A client certificate from another CA: the server refuses it.
    Result<std::unique_ptr<transport::TcpTransport>> t =
        transport_with(Tls("ca.crt"), ForeignDir() + "/client.crt", ForeignDir() + "/client.key");
    ASSERT_OK(t);
    EXPECT_STATUS(Code::kUnauthenticated, (*t)->Probe());
  }
  {  // Trusting another CA: the client refuses the server's certificate.
    Result<std::unique_ptr<transport::TcpTransport>> t = transport_with(
        ForeignDir() + "/ca.crt", ForeignDir() + "/client.crt", ForeignDir() + "/client.key");
    ASSERT_OK(t);
    EXPECT_STATUS(Code::kUnauthenticated, (*t)->Probe());
  }
  {  // A server's certificate presented by a client is from the CA with a role: accepted.
    Result<std::unique_ptr<transport::TcpTransport>> t =
        transport_with(Tls("ca.crt"), Tls("server-1.crt"), Tls("server-1.key"));
    ASSERT_OK(t);
    EXPECT_OK((*t)->Probe());
  }
  {  // The secret challenge (no TLS) gets no answer from a TLS data port.
    Result<std::string> secret = ReadSecret(cluster_->config().secret_file);
    ASSERT_OK(secret);
    transport::TcpTransport t(addr, *secret, 1000, 1);
    EXPECT_FALSE(t.Probe().ok());
  }
}

// [tls] encrypt_data = false: the data channel authenticates with TLS, then
// carries frames in plaintext; data still round-trips, gRPC stays on TLS.
TEST(TlsPlaintextDataTest, AuthenticatedPlaintextBulk) {
  ClusterOptions o;
  o.servers = 2;
  o.stripe_size = 64 * 1024;
  o.transport = "tcp";
  o.tls = true;
  o.encrypt_data = false;
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  EXPECT_FALSE(cluster.config().tls.encrypt_data);
  client::Client& c = cluster.client();
  Result<client::Attr> f = c.CreateSync(c.root(), "f", client::CreateArgs{});
  ASSERT_OK(f);
  const std::string data = PatternBytes(3, 0, 777 * 1024);
  ASSERT_OK(c.WriteSync(f->handle, f->layout, 0, data));
  for (int round = 0; round < 3; ++round) {  // reused (unwrapped) pooled connections
    Result<std::string> back = c.ReadSync(f->handle, f->layout, 0, data.size());
    ASSERT_OK(back);
    EXPECT_EQ(FirstDifference(*back, data), -1);
  }
  EXPECT_EQ(c.DataTransportOf(0), "tcp");
  EXPECT_EQ(c.DataTransportOf(1), "tcp");
}

}  // namespace
}  // namespace clf::testing
