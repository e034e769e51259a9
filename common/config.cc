#include "common/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

namespace clf {

Status ClusterConfig::Validate() const {
  if (servers.empty()) return Invalid("cluster file names no [[server]]");
  if (servers.size() > 1024) return Invalid("at most 1024 servers");
  std::set<std::string> addrs;
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerConfig& s = servers[i];
    if (s.id != i) return Invalid("server ids must be 0..n-1 in order; found id " + std::to_string(s.id) + " at position " + std::to_string(i));
    if (s.address.empty() || s.address.find(':') == std::string::npos) {
      return Invalid("server " + std::to_string(s.id) + ": address must be host:port");
    }
    if (!addrs.insert(s.address).second) return Invalid("duplicate server address " + s.address);
    if (s.data_dir.empty()) return Invalid("server " + std::to_string(s.id) + ": data_dir is empty");
  }
  Layout l = default_layout;
  if (l.stripe_count == 0) l.stripe_count = size();
  CLF_RETURN_IF_ERROR(ValidateLayout(l, size()).WithContext("default layout"));
  if (!tls_cert.empty() || !tls_key.empty() || !tls_ca.empty()) {
    return Status(Code::kNotSupported, "TLS is not implemented yet; remove tls_* from the cluster file");
  }
  if (metadata_mode == MetadataMode::kClient) {
    return Status(Code::kNotSupported,
                  "metadata_mode = \"client\" (the client-driven baseline) is not implemented yet");
  }
  if (rpc_timeout_ms < 100) return Invalid("rpc_timeout_ms must be at least 100");
  CLF_RETURN_IF_ERROR(CheckTransport(transport));
  if (transport != TransportKind::kGrpc) {
    std::set<std::string> data_addrs;
    for (const ServerConfig& s : servers) {
      Result<std::string> d = DataAddressOf(s);
      if (!d.ok()) return d.status();
      if (addrs.count(*d) != 0 || !data_addrs.insert(*d).second) {
        return Invalid("server " + std::to_string(s.id) + ": data address " + *d +
                       " is used twice (set data_address)");
      }
    }
  }
  return Status::Ok();
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
  if (t == TransportKind::kRdma) {
    return Status(Code::kNotSupported,
                  "transport = \"rdma\" is not implemented yet (use auto, tcp or grpc)");
  }
  return Status::Ok();
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

static std::string Resolve(const std::string& base, const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  return (std::filesystem::path(base) / p).lexically_normal().string();
}

Result<ClusterConfig> ParseClusterConfig(const std::string& text, const std::string& base_dir) {
  toml::table tbl;
  try {
    tbl = toml::parse(text);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "cluster file: " << e.description() << " at line " << e.source().begin.line;
    return Invalid(os.str());
  }
  ClusterConfig c;
  const toml::node_view<toml::node> cl = tbl["cluster"];
  c.name = cl["name"].value_or(c.name);
  c.secret_file = Resolve(base_dir, cl["secret_file"].value_or(std::string()));
  c.tls_cert = cl["tls_cert"].value_or(std::string());
  c.tls_key = cl["tls_key"].value_or(std::string());
  c.tls_ca = cl["tls_ca"].value_or(std::string());
  c.default_layout.stripe_size = cl["stripe_size"].value_or(int64_t{kDefaultStripeSize});
  c.default_layout.stripe_count = cl["stripe_count"].value_or(int64_t{0});
  c.default_layout.replicas = cl["replicas"].value_or(int64_t{1});
  std::string mode = cl["metadata_mode"].value_or(std::string("collective"));
  if (mode == "collective") {
    c.metadata_mode = MetadataMode::kCollective;
  } else if (mode == "client") {
    c.metadata_mode = MetadataMode::kClient;
  } else {
    return Invalid("metadata_mode must be \"collective\" or \"client\", got \"" + mode + "\"");
  }
  c.sync_metadata = cl["sync_metadata"].value_or(false);
  c.root_squash = cl["root_squash"].value_or(false);
  c.rpc_timeout_ms = cl["rpc_timeout_ms"].value_or(int64_t{5000});
  CLF_ASSIGN_OR_RETURN(c.transport, ParseTransport(cl["transport"].value_or(std::string("auto"))));
  if (const toml::array* arr = tbl["server"].as_array()) {
    for (const toml::node& n : *arr) {
      const toml::table* st = n.as_table();
      if (!st) return Invalid("[[server]] entries must be tables");
      ServerConfig s;
      int64_t id = (*st)["id"].value_or(int64_t{-1});
      if (id < 0) return Invalid("[[server]] needs id >= 0");
      s.id = static_cast<ServerId>(id);
      s.address = (*st)["address"].value_or(std::string());
      s.rdma_address = (*st)["rdma_address"].value_or(std::string());
      s.data_address = (*st)["data_address"].value_or(std::string());
      s.data_dir = Resolve(base_dir, (*st)["data_dir"].value_or(std::string()));
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
  std::ostringstream os;
  os << "# Clusterfile cluster description\n[cluster]\n";
  os << "name = \"" << c.name << "\"\n";
  os << "secret_file = \"" << c.secret_file << "\"\n";
  os << "stripe_size = " << c.default_layout.stripe_size << "\n";
  os << "stripe_count = " << c.default_layout.stripe_count << "   # 0 = all servers\n";
  os << "replicas = " << c.default_layout.replicas << "\n";
  os << "metadata_mode = \"" << (c.metadata_mode == MetadataMode::kClient ? "client" : "collective") << "\"\n";
  os << "sync_metadata = " << (c.sync_metadata ? "true" : "false") << "\n";
  os << "root_squash = " << (c.root_squash ? "true" : "false") << "\n";
  os << "rpc_timeout_ms = " << c.rpc_timeout_ms << "\n";
  os << "transport = \"" << TransportName(c.transport) << "\"   # auto | tcp | rdma | grpc\n";
  for (const ServerConfig& s : c.servers) {
    os << "\n[[server]]\nid = " << s.id << "\naddress = \"" << s.address << "\"\n";
    if (!s.rdma_address.empty()) os << "rdma_address = \"" << s.rdma_address << "\"\n";
    if (!s.data_address.empty()) os << "data_address = \"" << s.data_address << "\"\n";
    os << "data_dir = \"" << s.data_dir << "\"\n";
  }
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
