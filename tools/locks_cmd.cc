// clf locks: holders and waiters of a file's locks (or of every file of the
// cluster), from the lock service of the file's metadata server.
//
//   clf locks --cluster FILE PATH [--json]   PATH inside the file system (/a/b) or under a mount
//   clf locks --cluster FILE [--json]        every lock on every server
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "clf/client.h"
#include "clf/lock_client.h"
#include "common/config.h"
#include "tools/commands.h"
#include "tools/process_util.h"

namespace clf::tools {
namespace {

namespace fs = std::filesystem;

std::string Json(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string End(uint64_t offset, uint64_t length) {
  if (length == 0 || length > ~uint64_t{0} - offset) return "EOF";
  return std::to_string(offset + length);
}

std::string Age(uint64_t ms) {
  char b[32];
  if (ms < 10000) {
    std::snprintf(b, sizeof b, "%.1fs", ms / 1000.0);
  } else if (ms < 3600000) {
    std::snprintf(b, sizeof b, "%llum%02llus", static_cast<unsigned long long>(ms / 60000),
                  static_cast<unsigned long long>(ms / 1000 % 60));
  } else {
    std::snprintf(b, sizeof b, "%lluh", static_cast<unsigned long long>(ms / 3600000));
  }
  return b;
}

// The handle of PATH: under a clf mount the inode number is the handle; else a
// path inside the file system, resolved through the servers.
Result<Handle> HandleOf(client::Client& c, const std::string& path) {
  if (!path.empty() && path[0] == '/') {
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(path, ec);
    for (const MountEntry& e : ListMounts()) {
      if (ec || e.fstype.find("clf") == std::string::npos) continue;
      std::string s = canon.string();
      if (s != e.mount_point && s.rfind(e.mount_point + "/", 0) != 0) continue;
      struct stat st;
      if (::stat(s.c_str(), &st) != 0) return FromErrno(errno, "stat " + s);
      return static_cast<Handle>(st.st_ino);
    }
  }
  CLF_ASSIGN_OR_RETURN(client::Attr a, c.ResolvePath(path));
  return a.handle;
}

using Listings = std::vector<std::pair<ServerId, client::LockListing>>;

void PrintLocksJson(const std::string& path, Handle h, const Listings& all) {
  std::cout << "{\"path\":" << Json(path) << ",\"handle\":" << h << ",\"servers\":[";
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [s, l] = all[i];
    std::cout << (i ? "," : "") << "{\"server\":" << s << ",\"sessions\":" << l.sessions
              << ",\"locks\":[";
    for (size_t j = 0; j < l.locks.size(); ++j) {
      const client::LockHolderInfo& x = l.locks[j];
      std::cout << (j ? "," : "") << "{\"handle\":" << x.handle
                << ",\"state\":" << (x.waiting ? "\"waiting\"" : "\"held\"")
                << ",\"kind\":" << Json(x.kind)
                << ",\"mode\":" << (x.mode == client::LockMode::kExclusive ? "\"exclusive\"" : "\"shared\"")
                << ",\"session\":" << x.session << ",\"client\":" << Json(x.client_name)
                << ",\"address\":" << Json(x.client_address) << ",\"owner\":" << x.owner
                << ",\"pid\":" << x.pid << ",\"lock_id\":" << x.lock_id
                << ",\"age_ms\":" << x.age_ms << ",\"extent_count\":" << x.extent_count
                << ",\"ranges\":[";
      for (size_t k = 0; k < x.ranges.size(); ++k) {
        std::cout << (k ? "," : "") << "{\"offset\":" << x.ranges[k].offset
                  << ",\"length\":" << x.ranges[k].length << "}";
      }
      std::cout << "]}";
    }
    std::cout << "]}";
  }
  std::cout << "]}\n";
}

void PrintLocksTable(const std::string& path, Handle h, const Listings& all) {
  for (const auto& [s, l] : all) {
    size_t held = 0;
    for (const client::LockHolderInfo& x : l.locks) held += x.waiting ? 0 : 1;
    if (h != 0) {
      std::printf("%s (handle %016llx): locks on server %u, %zu held, %zu waiting\n", path.c_str(),
                  static_cast<unsigned long long>(h), s, held, l.locks.size() - held);
    } else {
      std::printf("server %u: %llu sessions, %zu held, %zu waiting\n", s,
                  static_cast<unsigned long long>(l.sessions), held, l.locks.size() - held);
    }
    if (l.locks.empty()) continue;
    std::printf("  %-16s %-7s %-7s %-4s %-7s %-30s %-22s %-18s %-7s %-7s %s\n", "handle", "state",
                "kind", "mode", "session", "client", "address", "owner", "pid", "age", "ranges");
    for (const client::LockHolderInfo& x : l.locks) {
      std::string ranges;
      for (size_t k = 0; k < x.ranges.size() && k < 4; ++k) {
        ranges += (k ? " " : "") + std::string("[") + std::to_string(x.ranges[k].offset) + ", " +
                  End(x.ranges[k].offset, x.ranges[k].length) + ")";
      }
      if (x.kind == "flock") ranges = "whole file";
      if (x.extent_count > 4 && x.kind != "flock") {
        ranges += " ... (" + std::to_string(x.extent_count) + " extents)";
      }
      char owner[24];
      std::snprintf(owner, sizeof owner, "%llx", static_cast<unsigned long long>(x.owner));
      std::printf("  %016llx %-7s %-7s %-4s %-7llu %-30s %-22s %-18s %-7s %-7s %s\n",
                  static_cast<unsigned long long>(x.handle), x.waiting ? "waiting" : "held",
                  x.kind.c_str(), x.mode == client::LockMode::kExclusive ? "ex" : "sh",
                  static_cast<unsigned long long>(x.session), x.client_name.c_str(),
                  x.client_address.c_str(), owner, x.pid ? std::to_string(x.pid).c_str() : "-",
                  Age(x.age_ms).c_str(), ranges.c_str());
    }
  }
}

Status DoLocks(const std::string& cluster_file, const std::string& path, bool json) {
  if (cluster_file.empty()) return Invalid("no cluster file: pass --cluster FILE or set CLF_CLUSTER");
  CLF_ASSIGN_OR_RETURN(ClusterConfig cluster, LoadClusterConfig(cluster_file));
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, client::Client::Open(cluster));
  client::LockClientOptions lo;
  lo.client_name = "clf locks";
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::LockClient> lc, client::LockClient::Open(cluster, lo));
  Handle h = 0;
  if (!path.empty()) {
    CLF_ASSIGN_OR_RETURN(h, HandleOf(*c, path));
  }
  Listings all;
  if (h != 0) {
    CLF_ASSIGN_OR_RETURN(client::LockListing l, lc->ListLocks(h, 0));
    all.emplace_back(ServerOf(h), std::move(l));
  } else {
    for (ServerId s = 0; s < cluster.size(); ++s) {
      CLF_ASSIGN_OR_RETURN(client::LockListing l, lc->ListLocks(0, s));
      all.emplace_back(s, std::move(l));
    }
  }
  if (json) {
    PrintLocksJson(path, h, all);
  } else {
    PrintLocksTable(path, h, all);
  }
  return Status::Ok();
}

}  // namespace

void AddLocksCommand(CLI::App& app) {
  struct Args {
    std::string cluster, path;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "locks", "holders and waiters of a file's locks (PATH: /in/fs or under a mount; none: all)");
  cmd->add_option("--cluster", a->cluster, "cluster file (default: $CLF_CLUSTER)")
      ->envname("CLF_CLUSTER");
  cmd->add_option("path", a->path, "file");
  cmd->add_flag("--json", a->json, "JSON output");
  cmd->callback([a] {
    Status st = DoLocks(a->cluster, a->path, a->json);
    if (!st.ok()) {
      std::cerr << "clf: " << st.ToString() << "\n";
      Exit(1);
    }
  });
}

}  // namespace clf::tools
