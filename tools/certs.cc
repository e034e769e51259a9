#include "tools/certs.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <memory>
#include <set>

#include "common/credentials.h"
#include "tools/process_util.h"

namespace clf::tools {
namespace {

namespace fs = std::filesystem;

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;

std::string SslError(const std::string& what) { return what + ": " + OpenSslErrors(); }

Result<KeyPtr> NewKey() {
  KeyPtr k(EVP_EC_gen("P-256"));
  if (!k) return Internal(SslError("generate an EC P-256 key"));
  return k;
}

Result<std::string> KeyPem(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  if (b == nullptr) return Internal("BIO_new");
  std::string out;
  if (PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr) == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(b, &data);
    out.assign(data, static_cast<size_t>(n));
  }
  BIO_free(b);
  if (out.empty()) return Internal(SslError("write a key"));
  return out;
}

Result<std::string> CertPem(X509* c) {
  BIO* b = BIO_new(BIO_s_mem());
  if (b == nullptr) return Internal("BIO_new");
  std::string out;
  if (PEM_write_bio_X509(b, c) == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(b, &data);
    out.assign(data, static_cast<size_t>(n));
  }
  BIO_free(b);
  if (out.empty()) return Internal(SslError("write a certificate"));
  return out;
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Internal(SslError("certificate extension " + value));
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return Internal(SslError("add extension " + value));
  return Status::Ok();
}

// A certificate for `key` named `subject` (CN, OU, O), signed by issuer_key
// (issuer null: self-signed).
Result<CertPtr> NewCert(EVP_PKEY* key, const std::string& cn, const std::string& ou,
                        const std::string& org, X509* issuer, EVP_PKEY* issuer_key, int days) {
  CertPtr c(X509_new());
  if (!c) return Internal("X509_new");
  X509_set_version(c.get(), 2);  // v3
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Internal("RAND_bytes");
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);  // an hour of clock skew
  X509_gmtime_adj(X509_getm_notAfter(c.get()), static_cast<long>(days) * 24 * 3600);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  auto add = [&](const char* field, const std::string& v) {
    if (!v.empty()) {
      X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(v.c_str()), -1, -1, 0);
    }
  };
  add("O", org);
  add("OU", ou);
  add("CN", cn);
  X509_set_issuer_name(c.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509* iss = issuer != nullptr ? issuer : c.get();
  if (issuer == nullptr) {
    CLF_RETURN_IF_ERROR(AddExt(c.get(), iss, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    CLF_RETURN_IF_ERROR(AddExt(c.get(), iss, NID_key_usage, "critical,keyCertSign,cRLSign"));
    CLF_RETURN_IF_ERROR(AddExt(c.get(), iss, NID_subject_key_identifier, "hash"));
  } else {
    CLF_RETURN_IF_ERROR(AddExt(c.get(), iss, NID_basic_constraints, "critical,CA:FALSE"));
    CLF_RETURN_IF_ERROR(
        AddExt(c.get(), iss, NID_key_usage, "critical,digitalSignature,keyEncipherment"));
    CLF_RETURN_IF_ERROR(AddExt(c.get(), iss, NID_subject_key_identifier, "hash"));
    CLF_RETURN_IF_ERROR(AddExt(c.get(), iss, NID_authority_key_identifier, "keyid"));
  }
  (void)issuer_key;
  return c;
}

Status Sign(X509* c, EVP_PKEY* key) {
  if (X509_sign(c, key, EVP_sha256()) <= 0) return Internal(SslError("sign a certificate"));
  return Status::Ok();
}

Status WritePair(X509* cert, EVP_PKEY* key, const std::string& cert_path,
                 const std::string& key_path) {
  CLF_ASSIGN_OR_RETURN(std::string kp, KeyPem(key));
  CLF_ASSIGN_OR_RETURN(std::string cp, CertPem(cert));
  CLF_RETURN_IF_ERROR(WriteFileWithMode(key_path, kp, 0600));
  return WriteFileWithMode(cert_path, cp, 0644);
}

struct Ca {
  CertPtr cert;
  KeyPtr key;
};

Result<Ca> LoadCa(const std::string& dir) {
  Ca ca;
  CLF_ASSIGN_OR_RETURN(std::string cp, ReadFileToString(dir + "/ca.crt"));
  CLF_ASSIGN_OR_RETURN(std::string kp, ReadFileToString(dir + "/ca.key"));
  BIO* b = BIO_new_mem_buf(cp.data(), static_cast<int>(cp.size()));
  ca.cert.reset(PEM_read_bio_X509(b, nullptr, nullptr, nullptr));
  BIO_free(b);
  b = BIO_new_mem_buf(kp.data(), static_cast<int>(kp.size()));
  ca.key.reset(PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr));
  BIO_free(b);
  if (!ca.cert || !ca.key) return Invalid(SslError("cannot read the CA in " + dir));
  if (X509_check_private_key(ca.cert.get(), ca.key.get()) != 1) {
    return Invalid(dir + "/ca.key does not match " + dir + "/ca.crt");
  }
  return ca;
}

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string h = colon == std::string::npos ? address : address.substr(0, colon);
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  return h;
}

// "IP:a,DNS:b" for the hosts (wildcard listen addresses skipped).
std::string SanList(const std::vector<std::string>& hosts) {
  std::set<std::string> seen;
  std::string out;
  for (const std::string& h : hosts) {
    if (h.empty() || h == "0.0.0.0" || h == "::" || h == "*" || !seen.insert(h).second) continue;
    in6_addr a;
    const bool ip =
        ::inet_pton(AF_INET, h.c_str(), &a) == 1 || ::inet_pton(AF_INET6, h.c_str(), &a) == 1;
    if (!out.empty()) out += ",";
    out += (ip ? "IP:" : "DNS:") + h;
  }
  return out;
}

Status Issue(const Ca& ca, const std::string& org, const std::string& cn, const std::string& role,
             const std::vector<std::string>& hosts, int days, const std::string& cert_path,
             const std::string& key_path) {
  CLF_ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  CLF_ASSIGN_OR_RETURN(CertPtr cert,
                       NewCert(key.get(), cn, role, org, ca.cert.get(), ca.key.get(), days));
  if (role == "server") {
    const std::string san = SanList(hosts);
    if (san.empty()) return Invalid(cn + ": no host or IP address to name in the certificate");
    CLF_RETURN_IF_ERROR(AddExt(cert.get(), ca.cert.get(), NID_subject_alt_name, san));
    CLF_RETURN_IF_ERROR(
        AddExt(cert.get(), ca.cert.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  } else {
    CLF_RETURN_IF_ERROR(AddExt(cert.get(), ca.cert.get(), NID_ext_key_usage, "clientAuth"));
  }
  CLF_RETURN_IF_ERROR(Sign(cert.get(), ca.key.get()));
  return WritePair(cert.get(), key.get(), cert_path, key_path);
}

std::string OrgOf(const X509* ca_cert) {
  const X509_NAME* n = X509_get_subject_name(ca_cert);
  char buf[256] = {0};
  X509_NAME_get_text_by_NID(const_cast<X509_NAME*>(n), NID_organizationName, buf, sizeof buf);
  return buf;
}

}  // namespace

Status IssueCertificate(const std::string& ca_dir, const std::string& common_name,
                        const std::string& role, const std::vector<std::string>& hosts, int days,
                        const std::string& cert_path, const std::string& key_path) {
  if (role != "server" && role != "client") return Invalid("role must be server or client");
  CLF_ASSIGN_OR_RETURN(Ca ca, LoadCa(ca_dir));
  return Issue(ca, OrgOf(ca.cert.get()), common_name, role, hosts, days, cert_path, key_path);
}

Result<std::string> MakeClusterCertificates(const ClusterConfig& cluster, const CertOptions& o) {
  if (o.dir.empty()) return Invalid("--dir is required");
  if (o.days < 1 || o.days > 36500) return Invalid("--days must be in 1..36500");
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) return FromErrno(ec.value(), "mkdir " + o.dir);
  std::string report;
  const std::string org = "clusterfile " + cluster.name;
  Ca ca;
  const bool have_ca = fs::exists(o.dir + "/ca.crt") || fs::exists(o.dir + "/ca.key");
  if (have_ca) {
    CLF_ASSIGN_OR_RETURN(ca, LoadCa(o.dir));
    report += "kept the CA " + o.dir + "/ca.crt\n";
  } else {
    CLF_ASSIGN_OR_RETURN(ca.key, NewKey());
    CLF_ASSIGN_OR_RETURN(
        ca.cert, NewCert(ca.key.get(), cluster.name + " CA", "", org, nullptr, nullptr, 3650));
    CLF_RETURN_IF_ERROR(Sign(ca.cert.get(), ca.key.get()));
    CLF_RETURN_IF_ERROR(
        WritePair(ca.cert.get(), ca.key.get(), o.dir + "/ca.crt", o.dir + "/ca.key"));
    report +=
        "wrote the CA " + o.dir + "/ca.crt and its key ca.key (0600: keep it off the servers)\n";
  }
  const std::string ca_org = OrgOf(ca.cert.get());
  auto wanted = [&](const std::string& crt) { return o.force || !fs::exists(crt); };
  for (const ServerConfig& s : cluster.servers) {
    const std::string base = o.dir + "/server-" + std::to_string(s.id);
    if (!wanted(base + ".crt")) {
      report += "kept " + base + ".crt\n";
      continue;
    }
    std::vector<std::string> hosts = {HostOf(s.address)};
    Result<std::string> da = DataAddressOf(s);
    if (da.ok()) hosts.push_back(HostOf(*da));
    if (!s.rdma_address.empty()) hosts.push_back(HostOf(s.rdma_address));
    CLF_RETURN_IF_ERROR(Issue(ca, ca_org, "server-" + std::to_string(s.id), "server", hosts, o.days,
                              base + ".crt", base + ".key")
                            .WithContext("server " + std::to_string(s.id)));
    report += "wrote " + base + ".crt (SAN " + SanList(hosts) + ") and .key\n";
  }
  std::vector<std::pair<std::string, std::string>> clients;  // CN, file base
  if (o.default_client) clients.push_back({"client", o.dir + "/client"});
  for (const std::string& n : o.clients) {
    if (n.empty() || n.find_first_of("/\\ \t\n") != std::string::npos) {
      return Invalid("client name \"" + n + "\" must be non-empty without '/' or spaces");
    }
    clients.push_back({"client-" + n, o.dir + "/client-" + n});
  }
  for (const auto& [cn, base] : clients) {
    if (!wanted(base + ".crt")) {
      report += "kept " + base + ".crt\n";
      continue;
    }
    CLF_RETURN_IF_ERROR(Issue(ca, ca_org, cn, "client", {}, o.days, base + ".crt", base + ".key"));
    report += "wrote " + base + ".crt and .key (role client)\n";
  }
  return report;
}

}  // namespace clf::tools
