// clf certs' library: a CA, server certificates naming their hosts, client
// certificates, each with its role, verifiable against the CA.
#include "tools/certs.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <string>

#include "common/config.h"
#include "common/credentials.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::tools {
namespace {

using ::clf::testing::TempDir;

X509* ReadCert(const std::string& path) {
  Result<std::string> pem = ReadFileToString(path);
  if (!pem.ok()) return nullptr;
  BIO* b = BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size()));
  X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  return c;
}

// Verifies `leaf` against the CA in `ca` for TLS purpose `purpose`.
bool Verifies(const std::string& ca, const std::string& leaf, int purpose) {
  X509* ca_cert = ReadCert(ca);
  X509* cert = ReadCert(leaf);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca_cert);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert, nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(cert);
  X509_free(ca_cert);
  return ok;
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 0777;
}

ClusterConfig TwoServers() {
  ClusterConfig c;
  c.name = "t";
  for (ServerId k = 0; k < 2; ++k) {
    ServerConfig s;
    s.id = k;
    s.address = k == 0 ? "10.1.2.3:7000" : "node1.example:7000";
    s.data_address = k == 0 ? "10.9.9.9:8000" : "";
    s.data_dir = "/d";
    c.servers.push_back(s);
  }
  return c;
}

TEST(CertsTest, CaServersAndClientsWithRolesAndNames) {
  TempDir tmp;
  CertOptions o;
  o.dir = tmp.str() + "/tls";
  o.clients = {"alice"};
  Result<std::string> report = MakeClusterCertificates(TwoServers(), o);
  ASSERT_OK(report);
  const std::string d = o.dir;
  for (const char* key :
       {"ca.key", "server-0.key", "server-1.key", "client.key", "client-alice.key"}) {
    EXPECT_EQ(Mode(d + "/" + key), 0600u) << key;
  }
  EXPECT_EQ(Mode(d + "/ca.crt"), 0644u);
  for (const char* s : {"server-0.crt", "server-1.crt"}) {
    EXPECT_TRUE(Verifies(d + "/ca.crt", d + "/" + s, X509_PURPOSE_SSL_SERVER)) << s;
    EXPECT_TRUE(Verifies(d + "/ca.crt", d + "/" + s, X509_PURPOSE_SSL_CLIENT)) << s;
    EXPECT_EQ(RoleOfPem(*ReadFileToString(d + "/" + s)), Role::kServer) << s;
  }
  for (const char* c : {"client.crt", "client-alice.crt"}) {
    EXPECT_TRUE(Verifies(d + "/ca.crt", d + "/" + c, X509_PURPOSE_SSL_CLIENT)) << c;
    EXPECT_FALSE(Verifies(d + "/ca.crt", d + "/" + c, X509_PURPOSE_SSL_SERVER)) << c;
    EXPECT_EQ(RoleOfPem(*ReadFileToString(d + "/" + c)), Role::kClient) << c;
  }
  // SANs: server 0 by both of its IPs, server 1 by its DNS name.
  X509* s0 = ReadCert(d + "/server-0.crt");
  EXPECT_EQ(X509_check_ip_asc(s0, "10.1.2.3", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(s0, "10.9.9.9", 0), 1);
  EXPECT_NE(X509_check_ip_asc(s0, "10.1.2.4", 0), 1);
  X509_free(s0);
  X509* s1 = ReadCert(d + "/server-1.crt");
  EXPECT_EQ(X509_check_host(s1, "node1.example", 0, 0, nullptr), 1);
  X509_free(s1);
  // The files load as credentials and make data channel contexts.
  ClusterConfig c = TwoServers();
  c.tls.dir = d;
  Result<Credentials> server = LoadServerCredentials(c, 0);
  ASSERT_OK(server);
  EXPECT_EQ(server->role, Role::kServer);
  EXPECT_OK(MakeDataTlsContext(*server, true));
  Result<Credentials> client = LoadClientCredentials(c);
  ASSERT_OK(client);
  EXPECT_EQ(client->role, Role::kClient);
  EXPECT_OK(MakeDataTlsContext(*client, false));
  // A client certificate cannot serve as a server's.
  c.servers[1].tls_cert = d + "/client.crt";
  c.servers[1].tls_key = d + "/client.key";
  EXPECT_STATUS(Code::kInvalid, LoadServerCredentials(c, 1));

  // Again: the CA and the certificates are kept; a new client is issued by the same CA.
  const std::string ca_before = *ReadFileToString(d + "/ca.crt");
  const std::string s0_before = *ReadFileToString(d + "/server-0.crt");
  o.clients = {"bob"};
  ASSERT_OK(MakeClusterCertificates(TwoServers(), o));
  EXPECT_EQ(*ReadFileToString(d + "/ca.crt"), ca_before);
  EXPECT_EQ(*ReadFileToString(d + "/server-0.crt"), s0_before);
  EXPECT_TRUE(Verifies(d + "/ca.crt", d + "/client-bob.crt", X509_PURPOSE_SSL_CLIENT));
  // A key readable by others is refused.
  ::chmod((d + "/client.key").c_str(), 0644);
  EXPECT_STATUS(Code::kPermission, LoadClientCredentials(c));
}

}  // namespace
}  // namespace clf::tools
