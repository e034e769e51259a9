// clf init: writes a cluster file and a fresh secret for servers on other hosts.
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/config.h"
#include "tools/commands.h"
#include "tools/process_util.h"

namespace clf::tools {
namespace {

namespace fs = std::filesystem;

struct InitArgs {
  std::string servers, out = "/etc/clf", data_root = "/var/lib/clf", name = "clf";
  std::string stripe_size = "1M";
  int metrics_port = 9570;  // 0: no metrics endpoint
  bool force = false;
};

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

Status DoInit(const InitArgs& a) {
  const std::vector<std::string> addrs = SplitComma(a.servers);
  if (addrs.empty()) return Invalid("--servers needs HOST:PORT[,HOST:PORT...]");
  if (a.metrics_port < 0 || a.metrics_port > 65535) return Invalid("--metrics-port must be 0..65535");
  const std::string out = fs::absolute(a.out).lexically_normal().string();
  const std::string cluster_file = out + "/cluster.toml";
  const std::string secret_file = out + "/secret";
  const std::string peer_secret_file = out + "/peer_secret";
  if (fs::exists(cluster_file) && !a.force) {
    return Status(Code::kExists, cluster_file + " exists; pass --force to replace it");
  }
  ClusterConfig cfg;
  cfg.name = a.name;
  cfg.secret_file = secret_file;
  cfg.peer_secret_file = peer_secret_file;
  cfg.default_layout.stripe_size = kDefaultStripeSize;
  if (a.stripe_size != "1M") {
    // Plain byte counts or K/M suffixes; ValidateLayout below checks the range.
    char* end = nullptr;
    unsigned long long v = std::strtoull(a.stripe_size.c_str(), &end, 10);
    std::string suf = end ? end : "";
    if (suf == "K" || suf == "k") v <<= 10;
    else if (suf == "M" || suf == "m") v <<= 20;
    else if (!suf.empty()) return Invalid("--stripe-size: use bytes, K or M: " + a.stripe_size);
    if (v == 0 || v > UINT32_MAX) return Invalid("--stripe-size out of range: " + a.stripe_size);
    cfg.default_layout.stripe_size = static_cast<uint32_t>(v);
  }
  cfg.default_layout.stripe_count = 0;
  // Servers sharing a host get consecutive metrics ports.
  std::map<std::string, int> per_host;
  for (size_t k = 0; k < addrs.size(); ++k) {
    ServerConfig s;
    s.id = static_cast<ServerId>(k);
    s.address = addrs[k];
    s.data_dir = a.data_root + "/srv" + std::to_string(k);
    const size_t colon = s.address.rfind(':');
    if (colon == std::string::npos) return Invalid("not HOST:PORT: " + s.address);
    const std::string host = s.address.substr(0, colon);
    if (a.metrics_port > 0) {
      s.metrics_address = host + ":" + std::to_string(a.metrics_port + per_host[host]++);
    }
    cfg.servers.push_back(s);
  }
  CLF_RETURN_IF_ERROR(cfg.Validate());
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return FromErrno(ec.value(), "mkdir " + out);
  bool new_secret = false;
  if (!fs::exists(secret_file)) {
    CLF_ASSIGN_OR_RETURN(std::string secret, RandomHex(32));
    CLF_RETURN_IF_ERROR(WriteFileWithMode(secret_file, secret + "\n", 0600));
    new_secret = true;
  }
  CLF_RETURN_IF_ERROR(ReadSecret(secret_file).status());
  bool new_peer_secret = false;
  if (!fs::exists(peer_secret_file)) {
    CLF_ASSIGN_OR_RETURN(std::string secret, RandomHex(32));
    CLF_RETURN_IF_ERROR(WriteFileWithMode(peer_secret_file, secret + "\n", 0600));
    new_peer_secret = true;
  }
  CLF_RETURN_IF_ERROR(ReadSecret(peer_secret_file).status());
  CLF_RETURN_IF_ERROR(WriteFileWithMode(cluster_file, RenderClusterConfig(cfg), 0644));
  std::cout << "wrote " << cluster_file << " (" << cfg.size() << " servers)\n"
            << (new_secret ? "wrote " : "kept existing ") << secret_file << " (mode 0600)\n"
            << (new_peer_secret ? "wrote " : "kept existing ") << peer_secret_file
            << " (mode 0600; servers only)\n"
            << "copy the cluster file and the secret to every server and client host, the peer\n"
            << "secret to server hosts only (secrets over a secure channel); or use mutual TLS:\n"
            << "clf certs --cluster " << cluster_file << " --dir " << out << "/tls\n"
            << "then on each server host: systemctl enable --now clfd@ID\n";
  return Status::Ok();
}

}  // namespace

void AddInitCommand(CLI::App& app) {
  auto a = std::make_shared<InitArgs>();
  CLI::App* cmd = app.add_subcommand("init", "write a cluster file and a new secret (0600)");
  cmd->add_option("--servers", a->servers, "HOST:PORT of each server, comma separated, id order")
      ->required();
  cmd->add_option("--out", a->out, "folder for cluster.toml and secret (default /etc/clf)");
  cmd->add_option("--data-root", a->data_root,
                  "each server keeps its data in DATA_ROOT/srvID (default /var/lib/clf)");
  cmd->add_option("--name", a->name, "cluster name");
  cmd->add_option("--stripe-size", a->stripe_size, "default stripe size (bytes, K or M; 1M)");
  cmd->add_option("--metrics-port", a->metrics_port,
                  "Prometheus port on each host (consecutive for servers sharing a host; 0 = none)");
  cmd->add_flag("--force", a->force, "replace an existing cluster.toml (an existing secret is kept)");
  cmd->callback([a] {
    Status st = DoInit(*a);
    if (!st.ok()) {
      std::cerr << "clf: " << st.ToString() << "\n";
      Exit(1);
    }
  });
}

}  // namespace clf::tools
