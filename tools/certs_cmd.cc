// clf certs: a CA for the cluster and certificates for its servers and clients
// (tools/certs.h says which files and what they hold).
#include <filesystem>
#include <iostream>
#include <memory>

#include "common/config.h"
#include "tools/certs.h"
#include "tools/commands.h"

namespace clf::tools {
namespace {

struct CertsArgs {
  std::string cluster;
  CertOptions opts;
  bool no_default_client = false;
};

Status DoCerts(const CertsArgs& a) {
  if (a.cluster.empty()) return Invalid("--cluster (or $CLF_CLUSTER) is required");
  CLF_ASSIGN_OR_RETURN(ClusterConfig c, LoadClusterConfig(a.cluster));
  CertOptions o = a.opts;
  o.dir = std::filesystem::absolute(o.dir).lexically_normal().string();
  o.default_client = !a.no_default_client;
  CLF_ASSIGN_OR_RETURN(std::string report, MakeClusterCertificates(c, o));
  std::cout << report;
  if (!c.tls.enabled()) {
    std::cout << "TLS is not on in " << a.cluster << " yet; add\n\n[tls]\ndir = \"" << o.dir
              << "\"\n\nthen copy to each server host ca.crt and its server-<K>.crt/.key, and to\n"
                 "each client host ca.crt and a client certificate (client.crt/.key, or another\n"
                 "one named by client_cert/client_key or clfmount -o tls_cert=,tls_key=).\n";
  }
  return Status::Ok();
}

}  // namespace

void AddCertsCommand(CLI::App& app) {
  auto a = std::make_shared<CertsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "certs", "make the cluster CA and certificates for each server and for clients (mutual TLS)");
  cmd->add_option("--cluster", a->cluster, "cluster file (default: $CLF_CLUSTER)")
      ->envname("CLF_CLUSTER");
  cmd->add_option("--dir", a->opts.dir, "output folder (an existing ca.crt/ca.key there is reused)")
      ->required();
  cmd->add_option("--client", a->opts.clients, "also issue client-NAME.crt/.key (repeatable)");
  cmd->add_flag("--no-default-client", a->no_default_client, "do not issue client.crt/.key");
  cmd->add_flag("--force", a->opts.force, "reissue certificates that exist (the CA is kept)");
  cmd->add_option("--days", a->opts.days,
                  "validity of server and client certificates (default 825)");
  cmd->callback([a] {
    Status st = DoCerts(*a);
    if (!st.ok()) {
      std::cerr << "clf: " << st.ToString() << "\n";
      Exit(1);
    }
  });
}

}  // namespace clf::tools
