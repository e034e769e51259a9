// A cluster's certificate authority and certificates (OpenSSL's library, no
// openssl CLI): what `clf certs` and `clf up --tls` write.
//
// Files in `dir` (keys 0600, certificates 0644):
//   ca.crt, ca.key                 the cluster CA (EC P-256, 10 years)
//   server-<K>.crt, server-<K>.key server K: CN server-<K>, OU server, SANs =
//                                  the hosts of its address, data_address and
//                                  rdma_address (IP or DNS), usable for TLS
//                                  server and client auth (servers call peers)
//   client.crt, client.key         the default client: CN client, OU client
//   client-<NAME>.crt / .key       more clients (--client NAME)
// The OU is the role servers enforce (common/credentials.h). An existing CA is
// reused (so more clients can be issued later); existing certificates are kept
// unless `force`.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace clf::tools {

struct CertOptions {
  std::string dir;
  std::vector<std::string> clients;  // extra client names (client-<NAME>.*)
  bool default_client = true;        // client.crt / client.key
  bool force = false;                // reissue server and client certificates that exist
  int days = 825;                    // validity of server and client certificates
};

// Writes what is missing; returns the files written, one per line, for the user.
Result<std::string> MakeClusterCertificates(const ClusterConfig& cluster, const CertOptions& opts);

// A client (or server, with role "server") certificate signed by the CA in
// `ca_dir`, written to cert_path / key_path. For tests and `clf certs`.
Status IssueCertificate(const std::string& ca_dir, const std::string& common_name,
                        const std::string& role, const std::vector<std::string>& hosts, int days,
                        const std::string& cert_path, const std::string& key_path);

}  // namespace clf::tools
