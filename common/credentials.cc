#include "common/credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "common/status_grpc.h"

namespace clf {

const char* RoleName(Role r) {
  switch (r) {
    case Role::kNone:
      return "none";
    case Role::kClient:
      return "client";
    case Role::kServer:
      return "server";
  }
  return "?";
}

std::string OpenSslErrors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail" : out;
}

Result<std::string> ReadPemFile(const std::string& path, bool is_key) {
  if (path.empty())
    return Invalid("no path for a TLS " + std::string(is_key ? "key" : "certificate"));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return FromErrno(errno, "TLS file " + path);
  if (is_key && (st.st_mode & 077) != 0) {
    return Permission("TLS key " + path + " must not be readable by group or others (chmod 600)");
  }
  std::ifstream in(path);
  if (!in) return FromErrno(errno, "open TLS file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.find("-----BEGIN") == std::string::npos)
    return Invalid("TLS file " + path + " holds no PEM block");
  return s;
}

Role RoleOfCertificate(x509_st* cert) {
  if (cert == nullptr) return Role::kNone;
  X509_NAME* subject = X509_get_subject_name(cert);
  Role role = Role::kNone;
  int i = -1;
  // Exactly one OU naming a role; a certificate with two role OUs has none.
  int found = 0;
  while ((i = X509_NAME_get_index_by_NID(subject, NID_organizationalUnitName, i)) >= 0) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    const std::string_view ou(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                              static_cast<size_t>(ASN1_STRING_length(data)));
    if (ou == kServerRoleOu) {
      role = Role::kServer;
      ++found;
    } else if (ou == kClientRoleOu) {
      role = Role::kClient;
      ++found;
    }
  }
  return found == 1 ? role : Role::kNone;
}

Role RoleOfPem(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return Role::kNone;
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  Role r = RoleOfCertificate(cert);
  X509_free(cert);
  return r;
}

namespace {

Result<Credentials> LoadTls(const ClusterConfig& c, const std::string& cert_path,
                            const std::string& key_path) {
  Credentials cred;
  cred.tls = true;
  cred.encrypt_data = c.tls.encrypt_data;
  CLF_ASSIGN_OR_RETURN(cred.ca_pem, ReadPemFile(c.tls.CaPath(), false));
  CLF_ASSIGN_OR_RETURN(cred.cert_pem, ReadPemFile(cert_path, false));
  CLF_ASSIGN_OR_RETURN(cred.key_pem, ReadPemFile(key_path, true));
  cred.role = RoleOfPem(cred.cert_pem);
  if (cred.role == Role::kNone) {
    return Invalid("certificate " + cert_path +
                   " names no role (subject OU \"server\" or \"client\")");
  }
  return cred;
}

}  // namespace

Result<Credentials> LoadClientCredentials(const ClusterConfig& c, const std::string& cert_path,
                                          const std::string& key_path,
                                          const std::string& secret_path) {
  if (c.tls.enabled()) {
    if (cert_path.empty() != key_path.empty()) {
      return Invalid("a client certificate override needs both the certificate and the key");
    }
    return LoadTls(c, cert_path.empty() ? c.tls.ClientCertPath() : cert_path,
                   key_path.empty() ? c.tls.ClientKeyPath() : key_path);
  }
  Credentials cred;
  const std::string& path = secret_path.empty() ? c.secret_file : secret_path;
  CLF_ASSIGN_OR_RETURN(cred.secret, ReadSecret(path));
  cred.role =
      !c.peer_secret_file.empty() && path == c.peer_secret_file ? Role::kServer : Role::kClient;
  return cred;
}

Result<Credentials> LoadServerCredentials(const ClusterConfig& c, ServerId k) {
  if (c.tls.enabled()) {
    CLF_ASSIGN_OR_RETURN(Credentials cred, LoadTls(c, c.ServerCertPath(k), c.ServerKeyPath(k)));
    if (cred.role != Role::kServer) {
      return Invalid("certificate " + c.ServerCertPath(k) + " is not a server certificate (OU " +
                     RoleName(cred.role) + ")");
    }
    return cred;
  }
  if (c.peer_secret_file.empty()) {
    return Invalid(
        "the cluster file has no peer_secret_file: servers authenticate each other with a secret "
        "clients do not hold (clf init and clf up write one), or configure [tls]");
  }
  Credentials cred;
  CLF_ASSIGN_OR_RETURN(cred.secret, ReadSecret(c.peer_secret_file));
  cred.role = Role::kServer;
  return cred;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const Credentials& cred) {
  if (!cred.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = cred.ca_pem;
  o.pem_private_key = cred.key_pem;
  o.pem_cert_chain = cred.cert_pem;
  return grpc::SslCredentials(o);
}

void AddCallCredentials(grpc::ClientContext* ctx, const Credentials& cred) {
  if (!cred.tls) ctx->AddMetadata(kSecretHeader, cred.secret);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const Credentials& cred) {
  if (!cred.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = cred.ca_pem;
  o.pem_key_cert_pairs.push_back({cred.key_pem, cred.cert_pem});
  return grpc::SslServerCredentials(o);
}

Result<SslCtxPtr> MakeDataTlsContext(const Credentials& cred, bool server) {
  if (!cred.tls) return Invalid("the data channel's TLS context needs TLS credentials");
  SslCtxPtr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()), SSL_CTX_free);
  if (!ctx) return Internal("SSL_CTX_new: " + OpenSslErrors());
  SSL_CTX* x = ctx.get();
  SSL_CTX_set_min_proto_version(x, TLS1_2_VERSION);
  SSL_CTX_set_verify(x, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // No resumption: every connection verifies the peer's certificate, and no
  // post-handshake ticket records sit between the handshake and our frames.
  SSL_CTX_set_options(x, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(x, 0);
  SSL_CTX_set_session_cache_mode(x, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(x, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

  auto with_bio = [&](const std::string& pem, auto fn) -> bool {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (bio == nullptr) return false;
    bool ok = fn(bio);
    BIO_free(bio);
    return ok;
  };
  X509_STORE* store = SSL_CTX_get_cert_store(x);
  int cas = 0;
  bool ok = with_bio(cred.ca_pem, [&](BIO* bio) {
    while (X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, ca);
      X509_free(ca);
      ++cas;
    }
    ERR_clear_error();  // the read that ended the loop
    return cas > 0;
  });
  if (!ok) return Invalid("the TLS CA file holds no certificate");
  ok = with_bio(cred.cert_pem, [&](BIO* bio) {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    bool r = cert != nullptr && SSL_CTX_use_certificate(x, cert) == 1;
    X509_free(cert);
    return r;
  });
  if (!ok) return Invalid("TLS certificate: " + OpenSslErrors());
  ok = with_bio(cred.key_pem, [&](BIO* bio) {
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    bool r = key != nullptr && SSL_CTX_use_PrivateKey(x, key) == 1;
    EVP_PKEY_free(key);
    return r;
  });
  if (!ok) return Invalid("TLS key: " + OpenSslErrors());
  if (SSL_CTX_check_private_key(x) != 1)
    return Invalid("the TLS key does not match the certificate");
  return ctx;
}

}  // namespace clf
