#include "common/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

namespace clf {

namespace {

// Ids 0..n-1 in order, and every address (gRPC, metrics) once; the gRPC and
// metrics addresses go into *addrs.
Status CheckServers(const std::vector<ServerConfig>& servers, std::set<std::string>* addrs) {
  if (servers.empty()) return Invalid("cluster file names no [[server]]");
  if (servers.size() > 1024) return Invalid("at most 1024 servers");
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerConfig& s = servers[i];
    if (s.id != i) return Invalid("server ids must be 0..n-1 in order; found id " + std::to_string(s.id) + " at position " + std::to_string(i));
    if (s.address.empty() || s.address.find(':') == std::string::npos) {
      return Invalid("server " + std::to_string(s.id) + ": address must be host:port");
    }
    if (!addrs->insert(s.address).second) return Invalid("duplicate server address " + s.address);
    if (s.data_dir.empty()) return Invalid("server " + std::to_string(s.id) + ": data_dir is empty");
    if (!s.metrics_address.empty() && !addrs->insert(s.metrics_address).second) {
      return Invalid("server " + std::to_string(s.id) + ": metrics_address " + s.metrics_address +
                     " is used twice");
    }
  }
  return Status::Ok();
}

// Certificates set in pairs, and only with a [tls] table; without TLS, the
// peer secret apart from the clients'.
Status CheckTls(const ClusterConfig& c) {
  const TlsConfig& tls = c.tls;
  if (tls.enabled()) {
    if (tls.client_cert.empty() != tls.client_key.empty()) {
      return Invalid("[tls]: set both client_cert and client_key, or neither");
    }
    if (tls.dir.empty() && tls.client_cert.empty()) {
      return Invalid("[tls]: without dir, client_cert and client_key must be set");
    }
    for (const ServerConfig& s : c.servers) {
      if (s.tls_cert.empty() != s.tls_key.empty()) {
        return Invalid("server " + std::to_string(s.id) +
                       ": set both tls_cert and tls_key, or neither");
      }
      if (tls.dir.empty() && s.tls_cert.empty()) {
        return Invalid("server " + std::to_string(s.id) +
                       ": [tls] has no dir, so tls_cert and tls_key must be set");
      }
    }
    return Status::Ok();
  }
  if (!tls.client_cert.empty() || !tls.client_key.empty()) {
    return Invalid("[tls]: client_cert/client_key need dir or ca");
  }
  for (const ServerConfig& s : c.servers) {
    if (!s.tls_cert.empty() || !s.tls_key.empty()) {
      return Invalid("server " + std::to_string(s.id) +
                     ": tls_cert/tls_key need a [tls] table with dir or ca");
    }
  }
  if (!c.peer_secret_file.empty() && c.peer_secret_file == c.secret_file) {
    return Invalid("peer_secret_file must differ from secret_file (clients must not hold it)");
  }
  return Status::Ok();
}

// Each server's data channel (and RDMA) address used once, and by nothing in `addrs`.
Status CheckDataAddresses(const ClusterConfig& c, const std::set<std::string>& addrs) {
  if (c.transport == TransportKind::kGrpc) return Status::Ok();
  std::set<std::string> data_addrs;
  for (const ServerConfig& s : c.servers) {
    Result<std::string> d = DataAddressOf(s);
    if (!d.ok()) return d.status();
    if (addrs.count(*d) != 0 || !data_addrs.insert(*d).second) {
      return Invalid("server " + std::to_string(s.id) + ": data address " + *d +
                     " is used twice (set data_address)");
    }
  }
  if (c.transport != TransportKind::kRdma) return Status::Ok();
  for (const ServerConfig& s : c.servers) {
    Result<std::string> r = RdmaAddressOf(s);
    if (!r.ok()) return r.status();
    if (addrs.count(*r) != 0 || !data_addrs.insert(*r).second) {
      return Invalid("server " + std::to_string(s.id) + ": RDMA address " + *r +
                     " is used twice (set rdma_address)");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ClusterConfig::Validate() const {
  std::set<std::string> addrs;
  CLF_RETURN_IF_ERROR(CheckServers(servers, &addrs));
  Layout l = default_layout;
  if (l.stripe_count == 0) l.stripe_count = size();
  CLF_RETURN_IF_ERROR(ValidateLayout(l, size()).WithContext("default layout"));
  if (l.replicas > 1 && metadata_mode == MetadataMode::kClient) {
    return Invalid("replicas > 1 needs metadata_mode onehop or collective (in client mode "
                   "clients create and remove one object per server)");
  }
  if (l.replicas > 1 && transport == TransportKind::kGrpc) {
    return Invalid("replicas > 1 needs the data channel (transport auto, tcp or rdma): the "
                   "servers forward writes to the other copies over it");
  }
  CLF_RETURN_IF_ERROR(CheckTls(*this));
  if (metadata_mode == MetadataMode::kClient && peer_secret_file.empty()) {
    // The metadata servers sign the clients' object capabilities with it (also with [tls]).
    return Invalid(
        "metadata_mode = \"client\" needs peer_secret_file: the servers sign the clients' "
        "object capabilities with it");
  }
  if (rpc_timeout_ms < 100) return Invalid("rpc_timeout_ms must be at least 100");
  if (dir_lease_ms != 0 && dir_lease_ms < 1000) {
    return Invalid("dir_lease_ms must be 0 (off) or at least 1000");
  }
  CLF_RETURN_IF_ERROR(CheckTransport(transport));
  CLF_RETURN_IF_ERROR(CheckRdmaProvider(rdma_provider));
  if (transport == TransportKind::kRdma && tls.enabled()) {
    return Status(Code::kNotSupported,
                  "transport = \"rdma\" authenticates with the cluster secret and has no TLS; "
                  "with [tls] use tcp or auto");
  }
  return CheckDataAddresses(*this, addrs);
}

std::string_view TransportName(TransportKind t) {
  switch (t) {
    case TransportKind::kAuto: return "auto";
    case TransportKind::kTcp: return "tcp";
    case TransportKind::kRdma: return "rdma";
    case TransportKind::kGrpc: return "grpc";
  }
  return "?";
}

Result<TransportKind> ParseTransport(std::string_view name) {
  for (TransportKind t : {TransportKind::kAuto, TransportKind::kTcp, TransportKind::kRdma,
                          TransportKind::kGrpc}) {
    if (name == TransportName(t)) return t;
  }
  return Invalid("transport must be \"auto\", \"tcp\", \"rdma\" or \"grpc\", got \"" +
                 std::string(name) + "\"");
}

Status CheckTransport(TransportKind t) {
  (void)t;  // every transport is built in (RDMA through libfabric)
  return Status::Ok();
}

Status CheckRdmaProvider(std::string_view p) {
  if (p == "auto" || p == "tcp" || p == "verbs") return Status::Ok();
  return Invalid("rdma_provider must be \"auto\", \"tcp\" or \"verbs\", got \"" + std::string(p) +
                 "\"");
}

Result<std::string> RdmaAddressOf(const ServerConfig& s) {
  if (!s.rdma_address.empty()) return s.rdma_address;
  CLF_ASSIGN_OR_RETURN(std::string data, DataAddressOf(s));
  const size_t colon = data.rfind(':');
  const unsigned long port = std::strtoul(data.c_str() + colon + 1, nullptr, 10);
  if (port == 0 || port + 1 > 65535) {
    return Invalid("server " + std::to_string(s.id) + ": cannot derive an RDMA port from " + data +
                   " (set rdma_address)");
  }
  return data.substr(0, colon + 1) + std::to_string(port + 1);
}

Result<std::string> DataAddressOf(const ServerConfig& s) {
  if (!s.data_address.empty()) {
    size_t colon = s.data_address.rfind(':');
    if (colon == std::string::npos || colon + 1 == s.data_address.size()) {
      return Invalid("server " + std::to_string(s.id) + ": data_address must be host:port");
    }
    return s.data_address;
  }
  size_t colon = s.address.rfind(':');
  if (colon == std::string::npos) return Invalid("server address must be host:port");
  const std::string port_text = s.address.substr(colon + 1);
  char* end = nullptr;
  unsigned long port = std::strtoul(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port == 0 || port + kDataPortOffset > 65535) {
    return Invalid("server " + std::to_string(s.id) + ": cannot derive a data port from " +
                   s.address + " (set data_address)");
  }
  return s.address.substr(0, colon + 1) + std::to_string(port + kDataPortOffset);
}

namespace {
std::string InDir(const std::string& dir, const std::string& explicit_path,
                  const std::string& name) {
  if (!explicit_path.empty() || dir.empty()) return explicit_path;
  return (std::filesystem::path(dir) / name).string();
}
}  // namespace

std::string TlsConfig::CaPath() const { return InDir(dir, ca, "ca.crt"); }
std::string TlsConfig::ClientCertPath() const { return InDir(dir, client_cert, "client.crt"); }
std::string TlsConfig::ClientKeyPath() const { return InDir(dir, client_key, "client.key"); }

std::string ClusterConfig::ServerCertPath(ServerId k) const {
  if (k >= servers.size()) return "";
  return InDir(tls.dir, servers[k].tls_cert, "server-" + std::to_string(k) + ".crt");
}

std::string ClusterConfig::ServerKeyPath(ServerId k) const {
  if (k >= servers.size()) return "";
  return InDir(tls.dir, servers[k].tls_key, "server-" + std::to_string(k) + ".key");
}

static std::string Resolve(const std::string& base, const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  return (std::filesystem::path(base) / p).lexically_normal().string();
}

namespace {

// "line N: " for a node toml++ parsed from text (no prefix for a node without a source).
std::string At(const toml::node& n) {
  const toml::source_position& p = n.source().begin;
  return p ? "line " + std::to_string(p.line) + ": " : std::string();
}

// Reads `key` of `t` into *out when present; a value of the wrong type or out of
// [lo, hi] is an error naming its line. Absent keys leave *out unchanged.
Status GetString(const toml::table& t, std::string_view key, std::string* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  const std::optional<std::string> v = n->value<std::string>();
  if (!v || !n->is_string()) return Invalid(At(*n) + std::string(key) + " must be a string");
  *out = *v;
  return Status::Ok();
}

Status GetBool(const toml::table& t, std::string_view key, bool* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  if (!n->is_boolean()) return Invalid(At(*n) + std::string(key) + " must be true or false");
  *out = n->as_boolean()->get();
  return Status::Ok();
}

template <typename T>
Status GetInt(const toml::table& t, std::string_view key, int64_t lo, int64_t hi, T* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  if (!n->is_integer()) return Invalid(At(*n) + std::string(key) + " must be an integer");
  const int64_t v = n->as_integer()->get();
  if (v < lo || v > hi) {
    return Invalid(At(*n) + std::string(key) + " = " + std::to_string(v) + " is outside [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

bool IsHostPort(const std::string& a) {
  const size_t colon = a.rfind(':');
  return colon != std::string::npos && colon > 0 && colon + 1 < a.size();
}

}  // namespace

namespace {

// [cluster]: its name, the secrets, and the keys it may hold (a misspelt key
// would otherwise be ignored without a word).
Status ParseClusterNames(const toml::table& cl, const std::string& base_dir, ClusterConfig* c) {
  CLF_RETURN_IF_ERROR(GetString(cl, "name", &c->name));
  CLF_RETURN_IF_ERROR(GetString(cl, "secret_file", &c->secret_file));
  c->secret_file = Resolve(base_dir, c->secret_file);
  CLF_RETURN_IF_ERROR(GetString(cl, "peer_secret_file", &c->peer_secret_file));
  c->peer_secret_file = Resolve(base_dir, c->peer_secret_file);
  for (const char* old : {"tls_cert", "tls_key", "tls_ca"}) {
    if (const toml::node* n = cl.get(old)) {
      return Invalid(At(*n) + "[cluster] " + old +
                     " is not read: TLS is configured in a [tls] table (dir, ca, client_cert, "
                     "client_key) and per [[server]] (tls_cert, tls_key)");
    }
  }
  static constexpr std::string_view kClusterKeys[] = {
      "dir_lease_ms", "direct_write_kib", "early_writeback_kib", "lock_grace_ms", "metadata_mode",
      "name", "peer_secret_file", "purge_idle_ms", "purge_max_defer_ms", "rdma_provider",
      "read_ahead_kib", "read_sched", "replicas", "root_squash", "rpc_timeout_ms", "sched", "sched_block",
      "sched_max_bypass", "sched_server_slots", "sched_window", "secret_file", "stripe_count",
      "stripe_size", "sync_metadata", "transport"};
  for (const auto& [key, value] : cl) {
    if (std::find(std::begin(kClusterKeys), std::end(kClusterKeys), key.str()) == std::end(kClusterKeys)) {
      return Invalid(At(value) + "[cluster]: unknown key " + std::string(key.str()));
    }
  }
  return Status::Ok();
}

// [cluster]: the default layout, the metadata mode, durability, timeouts
// and purge settings.
Status ParseClusterSettings(const toml::table& cl, ClusterConfig* c) {
  c->default_layout.stripe_size = kDefaultStripeSize;
  c->default_layout.stripe_count = 0;
  c->default_layout.replicas = 1;
  CLF_RETURN_IF_ERROR(GetInt(cl, "stripe_size", 0, UINT32_MAX, &c->default_layout.stripe_size));
  CLF_RETURN_IF_ERROR(GetInt(cl, "stripe_count", 0, UINT32_MAX, &c->default_layout.stripe_count));
  CLF_RETURN_IF_ERROR(GetInt(cl, "replicas", 0, UINT32_MAX, &c->default_layout.replicas));
  std::string mode = MetadataModeName(MetadataMode::kOneHop);
  CLF_RETURN_IF_ERROR(GetString(cl, "metadata_mode", &mode));
  if (mode == MetadataModeName(MetadataMode::kOneHop)) {
    c->metadata_mode = MetadataMode::kOneHop;
  } else if (mode == MetadataModeName(MetadataMode::kCollective)) {
    c->metadata_mode = MetadataMode::kCollective;
  } else if (mode == MetadataModeName(MetadataMode::kClient)) {
    c->metadata_mode = MetadataMode::kClient;
  } else {
    return Invalid(At(*cl.get("metadata_mode")) +
                   "metadata_mode must be \"onehop\", \"collective\" or \"client\", got \"" + mode + "\"");
  }
  CLF_RETURN_IF_ERROR(GetBool(cl, "sync_metadata", &c->sync_metadata));
  CLF_RETURN_IF_ERROR(GetBool(cl, "root_squash", &c->root_squash));
  CLF_RETURN_IF_ERROR(GetInt(cl, "rpc_timeout_ms", 0, UINT32_MAX, &c->rpc_timeout_ms));
  CLF_RETURN_IF_ERROR(GetInt(cl, "dir_lease_ms", 0, 600000, &c->dir_lease_ms));
  CLF_RETURN_IF_ERROR(GetInt(cl, "lock_grace_ms", 0, 3600000, &c->lock_grace_ms));
  CLF_RETURN_IF_ERROR(GetInt(cl, "purge_idle_ms", 0, 60000, &c->purge_idle_ms));
  CLF_RETURN_IF_ERROR(GetInt(cl, "purge_max_defer_ms", 0, 3600000, &c->purge_max_defer_ms));
  CLF_RETURN_IF_ERROR(GetInt(cl, "early_writeback_kib", 0, 1u << 20, &c->early_writeback_kib));
  CLF_RETURN_IF_ERROR(GetInt(cl, "read_ahead_kib", 0, 1u << 20, &c->read_ahead_kib));
  CLF_RETURN_IF_ERROR(GetInt(cl, "direct_write_kib", 0, 1u << 16, &c->direct_write_kib));
  return Status::Ok();
}

// [cluster]'s data path: the transport and the scheduling of paper 000
// (sched, sched_block, sched_window) and paper 001 (read_sched), and the
// servers' read queues.
Status ParseDataPathKeys(const toml::table& cl, ClusterConfig* c) {
  std::string transport = "auto";
  CLF_RETURN_IF_ERROR(GetString(cl, "transport", &transport));
  CLF_ASSIGN_OR_RETURN(c->transport, ParseTransport(transport));
  CLF_RETURN_IF_ERROR(GetString(cl, "rdma_provider", &c->rdma_provider));
  if (Status p = CheckRdmaProvider(c->rdma_provider); !p.ok()) {
    return Invalid(At(*cl.get("rdma_provider")) + p.message());
  }
  std::string policy(OrderPolicyName(c->sched.policy));
  CLF_RETURN_IF_ERROR(GetString(cl, "sched", &policy));
  Result<OrderPolicy> p = ParseOrderPolicy(policy);
  if (!p.ok()) return Invalid(At(*cl.get("sched")) + p.status().message());
  c->sched.policy = *p;
  if (const toml::node* b = cl.get("sched_block")) {  // bytes, or a size string ("1M")
    Result<uint64_t> bytes = Invalid("must be a size such as 1M or 65536");
    if (b->is_integer() && b->as_integer()->get() >= 0) {
      bytes = static_cast<uint64_t>(b->as_integer()->get());
    } else if (b->is_string()) {
      bytes = ParseByteSize(b->as_string()->get());
    }
    if (bytes.ok() && *bytes != 0) {
      if (Status v = ValidateSchedBlock(*bytes); !v.ok()) bytes = v;
    }
    if (!bytes.ok()) return Invalid(At(*b) + "sched_block: " + bytes.status().message());
    c->sched.block = *bytes;
  }
  CLF_RETURN_IF_ERROR(GetInt(cl, "sched_window", 0, kMaxSchedWindow, &c->sched.window));
  std::string read(ReadSchedName(c->sched.read));
  CLF_RETURN_IF_ERROR(GetString(cl, "read_sched", &read));
  Result<ReadSched> rs = ParseReadSched(read);
  if (!rs.ok()) return Invalid(At(*cl.get("read_sched")) + rs.status().message());
  c->sched.read = *rs;
  CLF_RETURN_IF_ERROR(GetInt(cl, "sched_server_slots", 0, 4096, &c->sched_server_slots));
  CLF_RETURN_IF_ERROR(GetInt(cl, "sched_max_bypass", 0, 1 << 20, &c->sched_max_bypass));
  return Status::Ok();
}

// [tls] (optional): the CA and client certificate paths, relative ones below base_dir.
Status ParseTlsTable(const toml::node& tn, const std::string& base_dir, ClusterConfig* c) {
  const toml::table* t = tn.as_table();
  if (t == nullptr) return Invalid(At(tn) + "tls must be a table");
  for (const auto& [key, value] : *t) {
    static const std::set<std::string_view> kKnown = {"dir", "ca", "client_cert", "client_key",
                                                      "encrypt_data"};
    if (kKnown.count(key.str()) == 0) {
      return Invalid(At(value) + "[tls]: unknown key " + std::string(key.str()) +
                     " (known: dir, ca, client_cert, client_key, encrypt_data)");
    }
  }
  CLF_RETURN_IF_ERROR(GetString(*t, "dir", &c->tls.dir));
  CLF_RETURN_IF_ERROR(GetString(*t, "ca", &c->tls.ca));
  CLF_RETURN_IF_ERROR(GetString(*t, "client_cert", &c->tls.client_cert));
  CLF_RETURN_IF_ERROR(GetString(*t, "client_key", &c->tls.client_key));
  CLF_RETURN_IF_ERROR(GetBool(*t, "encrypt_data", &c->tls.encrypt_data));
  if (!c->tls.enabled()) return Invalid(At(tn) + "[tls] needs dir (or ca and the certificate paths)");
  for (std::string* p : {&c->tls.dir, &c->tls.ca, &c->tls.client_cert, &c->tls.client_key}) {
    *p = Resolve(base_dir, *p);
  }
  return Status::Ok();
}

// An optional host:port `key` of server `id`'s table.
Status GetAddress(const toml::table& st, std::string_view key, uint32_t id, std::string* out) {
  CLF_RETURN_IF_ERROR(GetString(st, key, out));
  if (out->empty() || IsHostPort(*out)) return Status::Ok();
  return Invalid(At(*st.get(key)) + "server " + std::to_string(id) + ": " + std::string(key) +
                 " must be host:port");
}

// One [[server]] table.
Result<ServerConfig> ParseServer(const toml::node& n, const std::string& base_dir) {
  const toml::table* st = n.as_table();
  if (!st) return Invalid(At(n) + "[[server]] entries must be tables");
  ServerConfig s;
  if (st->get("id") == nullptr) return Invalid(At(n) + "[[server]] has no id");
  CLF_RETURN_IF_ERROR(GetInt(*st, "id", 0, kMaxServers - 1, &s.id));
  CLF_RETURN_IF_ERROR(GetString(*st, "address", &s.address));
  if (!IsHostPort(s.address)) {
    return Invalid(At(n) + "server " + std::to_string(s.id) + ": address must be host:port");
  }
  CLF_RETURN_IF_ERROR(GetAddress(*st, "rdma_address", s.id, &s.rdma_address));
  CLF_RETURN_IF_ERROR(GetAddress(*st, "metrics_address", s.id, &s.metrics_address));
  CLF_RETURN_IF_ERROR(GetAddress(*st, "data_address", s.id, &s.data_address));
  CLF_RETURN_IF_ERROR(GetString(*st, "data_dir", &s.data_dir));
  s.data_dir = Resolve(base_dir, s.data_dir);
  CLF_RETURN_IF_ERROR(GetString(*st, "tls_cert", &s.tls_cert));
  CLF_RETURN_IF_ERROR(GetString(*st, "tls_key", &s.tls_key));
  s.tls_cert = Resolve(base_dir, s.tls_cert);
  s.tls_key = Resolve(base_dir, s.tls_key);
  return s;
}

}  // namespace

Result<ClusterConfig> ParseClusterConfig(const std::string& text, const std::string& base_dir) {
  toml::table tbl;
  try {
    tbl = toml::parse(text);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "cluster file: line " << e.source().begin.line << ": " << e.description();
    return Invalid(os.str());
  }
  ClusterConfig c;
  static const toml::table kEmpty;
  const toml::node* cl_node = tbl.get("cluster");
  if (cl_node != nullptr && !cl_node->is_table()) return Invalid(At(*cl_node) + "cluster must be a table");
  const toml::table& cl = cl_node != nullptr ? *cl_node->as_table() : kEmpty;
  CLF_RETURN_IF_ERROR(ParseClusterNames(cl, base_dir, &c));
  if (const toml::node* tn = tbl.get("tls")) CLF_RETURN_IF_ERROR(ParseTlsTable(*tn, base_dir, &c));
  CLF_RETURN_IF_ERROR(ParseClusterSettings(cl, &c));
  CLF_RETURN_IF_ERROR(ParseDataPathKeys(cl, &c));
  if (const toml::node* sv = tbl.get("server")) {
    const toml::array* arr = sv->as_array();
    if (arr == nullptr) return Invalid(At(*sv) + "server must be written as [[server]] tables");
    for (const toml::node& n : *arr) {
      CLF_ASSIGN_OR_RETURN(ServerConfig s, ParseServer(n, base_dir));
      c.servers.push_back(std::move(s));
    }
  }
  std::sort(c.servers.begin(), c.servers.end(),
            [](const ServerConfig& a, const ServerConfig& b) { return a.id < b.id; });
  CLF_RETURN_IF_ERROR(c.Validate());
  if (c.default_layout.stripe_count == 0) c.default_layout.stripe_count = c.size();
  return c;
}

Result<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return FromErrno(errno, "open cluster file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string base = std::filesystem::absolute(path).parent_path().string();
  Result<ClusterConfig> c = ParseClusterConfig(ss.str(), base);
  if (!c.ok()) return c.status().WithContext(path);
  return c;
}

std::string RenderClusterConfig(const ClusterConfig& c) {
  // Built as a toml::table and printed by toml++, so every string (a data dir
  // holding '"', '\\' or a newline) is quoted and escaped by the library.
  toml::table cluster{
      {"name", c.name},
      {"secret_file", c.secret_file},
      {"stripe_size", int64_t{c.default_layout.stripe_size}},
      {"stripe_count", int64_t{c.default_layout.stripe_count}},
      {"replicas", int64_t{c.default_layout.replicas}},
      {"metadata_mode", MetadataModeName(c.metadata_mode)},
      {"sync_metadata", c.sync_metadata},
      {"root_squash", c.root_squash},
      {"rpc_timeout_ms", int64_t{c.rpc_timeout_ms}},
      {"dir_lease_ms", int64_t{c.dir_lease_ms}},
      {"transport", std::string(TransportName(c.transport))},
      {"sched", std::string(OrderPolicyName(c.sched.policy))},
      {"sched_block", int64_t(c.sched.block)},
      {"sched_window", int64_t{c.sched.window}},
      {"read_sched", std::string(ReadSchedName(c.sched.read))},
      {"sched_server_slots", int64_t{c.sched_server_slots}},
      {"sched_max_bypass", int64_t{c.sched_max_bypass}},
      {"rdma_provider", c.rdma_provider},
  };
  if (!c.peer_secret_file.empty()) cluster.insert("peer_secret_file", c.peer_secret_file);
  if (c.lock_grace_ms != 0) cluster.insert("lock_grace_ms", int64_t{c.lock_grace_ms});
  const ClusterConfig defaults;
  if (c.purge_idle_ms != defaults.purge_idle_ms) {
    cluster.insert("purge_idle_ms", int64_t{c.purge_idle_ms});
  }
  if (c.purge_max_defer_ms != defaults.purge_max_defer_ms) {
    cluster.insert("purge_max_defer_ms", int64_t{c.purge_max_defer_ms});
  }
  if (c.early_writeback_kib != defaults.early_writeback_kib) {
    cluster.insert("early_writeback_kib", int64_t{c.early_writeback_kib});
  }
  if (c.direct_write_kib != defaults.direct_write_kib) {
    cluster.insert("direct_write_kib", int64_t{c.direct_write_kib});
  }
  if (c.read_ahead_kib != defaults.read_ahead_kib) {
    cluster.insert("read_ahead_kib", int64_t{c.read_ahead_kib});
  }
  toml::array servers;
  for (const ServerConfig& s : c.servers) {
    toml::table st{{"id", int64_t{s.id}}, {"address", s.address}, {"data_dir", s.data_dir}};
    if (!s.rdma_address.empty()) st.insert("rdma_address", s.rdma_address);
    if (!s.metrics_address.empty()) st.insert("metrics_address", s.metrics_address);
    if (!s.data_address.empty()) st.insert("data_address", s.data_address);
    if (!s.tls_cert.empty()) st.insert("tls_cert", s.tls_cert);
    if (!s.tls_key.empty()) st.insert("tls_key", s.tls_key);
    servers.push_back(std::move(st));
  }
  toml::table root{{"cluster", std::move(cluster)}, {"server", std::move(servers)}};
  if (c.tls.enabled()) {
    toml::table tls;
    if (!c.tls.dir.empty()) tls.insert("dir", c.tls.dir);
    if (!c.tls.ca.empty()) tls.insert("ca", c.tls.ca);
    if (!c.tls.client_cert.empty()) tls.insert("client_cert", c.tls.client_cert);
    if (!c.tls.client_key.empty()) tls.insert("client_key", c.tls.client_key);
    tls.insert("encrypt_data", c.tls.encrypt_data);
    root.insert("tls", std::move(tls));
  }
  std::ostringstream os;
  os << "# Clusterfile cluster description (stripe_count 0 = all servers)\n"
     << toml::toml_formatter(root) << "\n";
  return os.str();
}

Result<std::string> ReadSecret(const std::string& path) {
  if (path.empty()) return Invalid("cluster file has no secret_file");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return FromErrno(errno, "secret file " + path);
  if ((st.st_mode & 077) != 0) {
    return Permission("secret file " + path + " must not be readable by group or others (chmod 600)");
  }
  std::ifstream in(path);
  if (!in) return FromErrno(errno, "open secret file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() < 16) return Invalid("secret file " + path + " holds fewer than 16 characters");
  return s;
}

const char* MetadataModeName(MetadataMode m) {
  switch (m) {
    case MetadataMode::kOneHop: return "onehop";
    case MetadataMode::kCollective: return "collective";
    case MetadataMode::kClient: return "client";
  }
  return "?";
}

Status ValidateName(std::string_view name) {
  if (name.empty()) return Invalid("empty name");
  if (name.size() > kMaxNameBytes) {
    return Status(Code::kNameTooLong, "name is " + std::to_string(name.size()) + " bytes; at most 255");
  }
  if (name.find('/') != std::string_view::npos) return Invalid("name contains '/'");
  if (name.find('\0') != std::string_view::npos) return Invalid("name contains NUL");
  if (name == "." || name == "..") return Invalid("name is '.' or '..'");
  return Status::Ok();
}

}  // namespace clf
