// clf cluster commands: status, df, layout, setlayout (up, down: up_down_cmds.cc; fsck:
// fsck_cmd.cc).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "clf/client.h"
#include "common/config.h"
#include "common/layout.h"
#include "tools/certs.h"
#include "tools/commands.h"
#include "tools/health.h"
#include "tools/process_util.h"
#include "tools/size_arg.h"

namespace clf::tools {
namespace {

namespace fs = std::filesystem;

// Prints `msg` and ends the subcommand with `code`.
void Fail(const std::string& msg, int code = 1) {
  std::cerr << "clf: " << msg << "\n";
  Exit(code);
}

std::string Uptime(int64_t s) {
  char buf[64];
  if (s >= 86400) {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  } else if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

Result<std::unique_ptr<client::Client>> OpenClient(const std::string& cluster_file) {
  if (cluster_file.empty()) return Invalid("no cluster file: pass --cluster FILE or set CLF_CLUSTER");
  return client::Client::Open(cluster_file);
}

// ---------------------------------------------------------------- status / df

nlohmann::ordered_json StatusJson(const std::string& cluster, const Health& h,
                                  const std::vector<client::ServerStatus>& st, size_t up) {
  nlohmann::ordered_json j;
  j["cluster"] = cluster;
  j["health"] = {{"status", HealthName(h.level)}, {"summary", h.Summary()}};
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const HealthCheck& c : h.checks) checks.push_back({{"code", c.code}, {"message", c.message}});
  j["health"]["checks"] = std::move(checks);
  nlohmann::ordered_json servers = nlohmann::ordered_json::array();
  for (const client::ServerStatus& s : st) {
    nlohmann::ordered_json o;
    o["id"] = s.id;
    o["address"] = s.address;
    o["up"] = s.up;
    if (s.up) {
      o["version"] = s.version;
      o["uptime_s"] = s.uptime_s;
      o["objects"] = s.objects;
      o["inodes"] = s.inodes;
      o["bytes_used"] = s.bytes_used;
      o["bytes_free"] = s.bytes_free;
      o["bytes_total"] = s.bytes_total;
      o["files_free"] = s.files_free;
      o["rocksdb_bytes"] = s.rocksdb_bytes;
      o["requests"] = s.requests;
      o["garbage"] = s.garbage;
      o["stale_copies"] = s.stale_copies;
      o["resync_bytes"] = s.resync_bytes;
      o["resynced_copies"] = s.resynced_copies;
      o["resync_running"] = s.resync_running;
      o["lock_sessions"] = s.lock_sessions;
      o["locks_granted"] = s.locks_granted;
      o["locks_waiting"] = s.locks_waiting;
      o["transport"] = s.transport;
      o["data_address"] = s.data_address;
      o["clock_skew_ms"] = s.clock_skew_ms;
    } else {
      o["error"] = s.error;
    }
    servers.push_back(std::move(o));
  }
  j["servers"] = std::move(servers);
  j["servers_up"] = up;
  j["servers_down"] = st.size() - up;
  return j;
}

// One round of `clf status`: the health line, then the per-server table.
// Returns the number of servers up.
size_t PrintStatus(client::Client& c, bool json) {
  std::vector<client::ServerStatus> st = c.ServerStatuses();
  size_t up = 0;
  for (const client::ServerStatus& s : st) up += s.up ? 1 : 0;
  const Health h = EvaluateHealth(st);
  if (json) {
    // Bytes that are not UTF-8 (a path in an error message) become U+FFFD, never a throw.
    std::cout << StatusJson(c.cluster().name, h, st, up)
                     .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
              << std::endl;
    return up;
  }
  std::printf("health: %s\n", h.Summary().c_str());
  std::printf("cluster %s: %zu of %zu servers up\n", c.cluster().name.c_str(), up, st.size());
  std::printf("%-4s %-22s %-5s %9s %10s %8s %11s %11s %10s %10s %8s %8s %6s %8s %-9s\n", "id",
              "address", "state", "uptime", "objects", "inodes", "used", "free", "rocksdb",
              "requests", "garbage", "sessions", "locks", "waiting", "transport");
  for (const client::ServerStatus& s : st) {
    if (s.up) {
      std::printf("%-4u %-22s %-5s %9s %10llu %8llu %11s %11s %10s %10llu %8llu %8llu %6llu %8llu %-9s\n", s.id,
                  s.address.c_str(), "up", Uptime(s.uptime_s).c_str(),
                  static_cast<unsigned long long>(s.objects),
                  static_cast<unsigned long long>(s.inodes), HumanBytes(s.bytes_used).c_str(),
                  HumanBytes(s.bytes_free).c_str(), HumanBytes(s.rocksdb_bytes).c_str(),
                  static_cast<unsigned long long>(s.requests),
                  static_cast<unsigned long long>(s.garbage),
                  static_cast<unsigned long long>(s.lock_sessions),
                  static_cast<unsigned long long>(s.locks_granted),
                  static_cast<unsigned long long>(s.locks_waiting), s.transport.c_str());
    } else {
      std::printf("%-4u %-22s %-5s  (%s)\n", s.id, s.address.c_str(), "DOWN", s.error.c_str());
    }
  }
  std::fflush(stdout);
  return up;
}

// --watch: one round every `watch_s` seconds until interrupted (a terminal is
// cleared between rounds; JSON prints one object per line).
Status DoStatus(const std::string& cluster_file, bool json, int watch_s) {
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, OpenClient(cluster_file));
  if (watch_s < 0) {
    if (PrintStatus(*c, json) == 0) Fail("every server is down", 2);
    return Status::Ok();
  }
  if (watch_s == 0) return Invalid("--watch takes a period of at least 1 second");
  const bool tty = !json && ::isatty(STDOUT_FILENO);
  for (;;) {
    if (tty) std::printf("\033[H\033[2J");
    if (!json) {
      const std::time_t now = std::time(nullptr);
      char when[64];
      std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
      std::printf("every %ds: clf status  %s\n", watch_s, when);
    }
    PrintStatus(*c, json);
    std::this_thread::sleep_for(std::chrono::seconds(watch_s));
  }
}

Status DoDf(const std::string& cluster_file) {
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, OpenClient(cluster_file));
  std::vector<client::ServerStatus> st = c->ServerStatuses();
  std::printf("%-10s %-22s %11s %11s %11s %5s %10s\n", "server", "address", "size", "used",
              "avail", "use%", "objects");
  uint64_t total = 0, used = 0, avail = 0, objects = 0;
  size_t down = 0;
  for (const client::ServerStatus& s : st) {
    std::string name = "clfd " + std::to_string(s.id);
    if (!s.up) {
      std::printf("%-10s %-22s %11s\n", name.c_str(), s.address.c_str(), "DOWN");
      ++down;
      continue;
    }
    total += s.bytes_total;
    used += s.bytes_used;
    avail += s.bytes_free;
    objects += s.objects;
    double pct = s.bytes_total ? 100.0 * static_cast<double>(s.bytes_total - s.bytes_free) /
                                     static_cast<double>(s.bytes_total)
                               : 0;
    std::printf("%-10s %-22s %11s %11s %11s %4.0f%% %10llu\n", name.c_str(), s.address.c_str(),
                HumanBytes(s.bytes_total).c_str(), HumanBytes(s.bytes_used).c_str(),
                HumanBytes(s.bytes_free).c_str(), pct, static_cast<unsigned long long>(s.objects));
  }
  double pct = total ? 100.0 * static_cast<double>(total - avail) / static_cast<double>(total) : 0;
  std::printf("%-10s %-22s %11s %11s %11s %4.0f%% %10llu\n", "total", "", HumanBytes(total).c_str(),
              HumanBytes(used).c_str(), HumanBytes(avail).c_str(), pct,
              static_cast<unsigned long long>(objects));
  Result<client::StatFs> sf = c->StatFsSync();
  if (sf.ok()) {
    std::printf("statfs: %s total, %s free, %llu files, %llu files free, %u servers up, %u down\n",
                HumanBytes(sf->bytes_total).c_str(), HumanBytes(sf->bytes_free).c_str(),
                static_cast<unsigned long long>(sf->files),
                static_cast<unsigned long long>(sf->files_free), sf->servers_up, sf->servers_down);
  } else {
    std::printf("statfs: %s\n", sf.status().ToString().c_str());
  }
  if (down == st.size()) Exit(2);
  return Status::Ok();
}

// ---------------------------------------------------------------- layout

// Maps a real path under a clf mount to the path inside the file system; other
// paths are taken as file-system paths as given.
std::string FsPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return path;
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(path, ec);
  if (ec) return path;
  std::string best;
  for (const MountEntry& e : ListMounts()) {
    if (e.fstype.rfind("fuse", 0) != 0) continue;
    if (e.source.find("clf") == std::string::npos && e.fstype.find("clf") == std::string::npos) {
      continue;
    }
    const std::string& mp = e.mount_point;
    std::string c = canon.string();
    if ((c == mp || c.rfind(mp + "/", 0) == 0) && mp.size() > best.size()) best = mp;
  }
  if (best.empty()) return path;
  std::string rest = canon.string().substr(best.size());
  return rest.empty() ? "/" : rest;
}

const char* TypeName(client::FileType t) {
  switch (t) {
    case client::FileType::kRegular: return "file";
    case client::FileType::kDirectory: return "directory";
    case client::FileType::kSymlink: return "symlink";
    case client::FileType::kFifo: return "fifo";
    case client::FileType::kSocket: return "socket";
    case client::FileType::kChar: return "char device";
    case client::FileType::kBlock: return "block device";
    default: return "unknown";
  }
}

// "sched hash-ios, block 1.0 MiB" / "sched: mount or cluster default".
std::string SchedText(const Layout& l) {
  std::string s = l.sched_policy == kSchedUnset
                      ? std::string("sched: mount or cluster default")
                      : "sched " + std::string(OrderPolicyName(SchedFromCode(l.sched_policy)));
  s += l.sched_block == 0 ? ", block: mount or cluster default (stripe size)"
                          : ", block " + HumanBytes(l.sched_block);
  if (l.replicas > 1) {
    s += l.read_sched == 0 || l.read_sched > kMaxReadSchedCode
             ? ", read_sched: mount or cluster default"
             : ", read_sched " + std::string(ReadSchedName(ReadSchedFromCode(l.read_sched)));
  }
  return s;
}

Status DoLayout(const std::string& cluster_file, const std::string& path_arg, int max_units) {
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, OpenClient(cluster_file));
  const std::string path = FsPath(path_arg);
  CLF_ASSIGN_OR_RETURN(client::Attr a, c->ResolvePath(path));
  const uint32_t n = c->cluster().size();
  const Layout& l = a.layout;
  std::printf("%s (%s, handle %016llx on server %u)\n", path.c_str(), TypeName(a.type),
              static_cast<unsigned long long>(a.handle), ServerOf(a.handle));
  if (l.stripe_count > 0) {
    std::printf("  stripe_size %s (%u bytes), stripe_count %u, first_server %u, replicas %u\n",
                HumanBytes(l.stripe_size).c_str(), l.stripe_size, l.stripe_count, l.first_server,
                l.replicas);
    std::printf("  %s\n", SchedText(l).c_str());
  }
  if (a.type == client::FileType::kDirectory) {
    if (l.stripe_count == 0) {
      std::printf("  (no layout of its own: new files below get the cluster default, "
                  "stripe_size %s, stripe_count %u)\n",
                  HumanBytes(c->cluster().default_layout.stripe_size).c_str(),
                  c->cluster().default_layout.stripe_count);
    } else {
      std::printf("  (the default layout for new files below this directory; each file's "
                  "first server is chosen by hash)\n");
    }
    return Status::Ok();
  }
  if (a.type != client::FileType::kRegular) return Status::Ok();
  std::printf("  size %llu (%s), %llu stripe unit(s)\n", static_cast<unsigned long long>(a.size),
              HumanBytes(a.size).c_str(),
              static_cast<unsigned long long>(l.stripe_size ? (a.size + l.stripe_size - 1) / l.stripe_size : 0));
  std::vector<ServerId> ds = DataServers(l, n);
  uint64_t units = l.stripe_size ? (a.size + l.stripe_size - 1) / l.stripe_size : 0;
  for (ServerId s : ds) {
    int idx = StripeIndex(l, n, s);
    uint64_t local = LocalSizeFor(l, n, s, a.size);
    std::string list;
    int shown = 0;
    uint64_t count = 0;
    if (idx >= 0 && l.stripe_count > 0) {
      for (uint64_t u = static_cast<uint64_t>(idx); u < units; u += l.stripe_count) {
        ++count;
        if (shown < max_units) {
          list += (shown ? "," : "") + std::to_string(u);
          ++shown;
        }
      }
    }
    if (count > static_cast<uint64_t>(shown)) list += ",... (" + std::to_string(count) + " units)";
    std::string addr = s < n ? c->cluster().servers[s].address : "?";
    std::printf("  server %-3u %-22s %11s  units %s\n", s, addr.c_str(), HumanBytes(local).c_str(),
                list.empty() ? "-" : list.c_str());
    // Replicated: where each copy of these units lives and whether it is current.
    for (uint32_t slot = 0; l.replicas > 1 && slot < l.replicas; ++slot) {
      const bool stale = std::find(a.stale_replicas.begin(), a.stale_replicas.end(),
                                   std::make_pair(s, slot)) != a.stale_replicas.end();
      const ServerId holder = ReplicaServer(s, slot, n);
      std::printf("    copy %u on server %-3u %s\n", slot, holder,
                  stale ? "STALE (missed writes; a resync brings it current)" : "current");
    }
  }
  return Status::Ok();
}

// clf setlayout's arguments: empty / -1 = keep the directory's setting.
struct SetLayoutArgs {
  std::string cluster, dir, stripe_size, sched, sched_block, read_sched;
  int stripe_count = -1;
  int replicas = -1;
};

Status DoSetLayout(const SetLayoutArgs& o) {
  const std::string& stripe_size = o.stripe_size;
  const std::string& sched = o.sched;
  const std::string& sched_block = o.sched_block;
  const int stripe_count = o.stripe_count;
  const int replicas = o.replicas;
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, OpenClient(o.cluster));
  const std::string path = FsPath(o.dir);
  CLF_ASSIGN_OR_RETURN(client::Attr a, c->ResolvePath(path));
  if (a.type != client::FileType::kDirectory) {
    return Status(Code::kNotDir, path + " is not a directory (a file's layout is fixed at create)");
  }
  client::SetAttrArgs args;
  args.valid = client::kSetLayout;
  // A directory without its own default layout reports an empty one: start from the cluster's.
  args.layout = a.layout.stripe_count > 0 && a.layout.stripe_size > 0 ? a.layout
                                                                      : c->cluster().default_layout;
  if (args.layout.replicas == 0) args.layout.replicas = 1;
  if (!stripe_size.empty()) {
    CLF_ASSIGN_OR_RETURN(uint64_t s, ParseSize(stripe_size));
    if (s > UINT32_MAX) return Invalid("stripe size too large");
    args.layout.stripe_size = static_cast<uint32_t>(s);
  }
  const uint32_t n = c->cluster().size();
  if (stripe_count >= 0) args.layout.stripe_count = stripe_count == 0 ? n : static_cast<uint32_t>(stripe_count);
  if (replicas == 0) return Invalid("--replicas must be at least 1");
  if (replicas > 0) args.layout.replicas = static_cast<uint32_t>(replicas);
  // Schedule settings (paper 000) travel with the layout; "default" clears them.
  if (sched == "default") {
    args.layout.sched_policy = kSchedUnset;
  } else if (!sched.empty()) {
    CLF_ASSIGN_OR_RETURN(OrderPolicy p, ParseOrderPolicy(sched));
    args.layout.sched_policy = SchedCode(p);
  }
  if (sched_block == "default") {
    args.layout.sched_block = 0;
  } else if (!sched_block.empty()) {
    CLF_ASSIGN_OR_RETURN(uint64_t b, ParseSize(sched_block));
    CLF_RETURN_IF_ERROR(ValidateSchedBlock(b));
    args.layout.sched_block = static_cast<uint32_t>(b);
  }
  if (o.read_sched == "default") {
    args.layout.read_sched = 0;
  } else if (!o.read_sched.empty()) {
    CLF_ASSIGN_OR_RETURN(ReadSched r, ParseReadSched(o.read_sched));
    args.layout.read_sched = ReadSchedCode(r);
  }
  CLF_RETURN_IF_ERROR(ValidateLayout(args.layout, n));
  CLF_ASSIGN_OR_RETURN(client::Attr after, c->SetAttrSync(a.handle, args));
  // Each new file's first server is chosen by hash, so files spread over the servers.
  std::printf("%s: new files get stripe_size %s, stripe_count %u, replicas %u, %s\n", path.c_str(),
              HumanBytes(after.layout.stripe_size).c_str(), after.layout.stripe_count,
              after.layout.replicas, SchedText(after.layout).c_str());
  return Status::Ok();
}

}  // namespace

void AddClusterCommands(CLI::App& app) {
  auto cluster_opt = [](CLI::App* sub, std::string* target) {
    sub->add_option("--cluster", *target, "cluster file (default: $CLF_CLUSTER)")
        ->envname("CLF_CLUSTER");
  };

  struct StatusArgs {
    std::string cluster;
    bool json = false;
    std::vector<int> watch;  // --watch [SECONDS]
  };
  auto sa = std::make_shared<StatusArgs>();
  CLI::App* status_cmd = app.add_subcommand(
      "status",
      "health summary and per-server state (exit 0 unless every server is down: then 2)");
  cluster_opt(status_cmd, &sa->cluster);
  status_cmd->add_flag("--json", sa->json, "JSON output");
  CLI::Option* watch_opt =
      status_cmd->add_option("--watch", sa->watch, "refresh every SECONDS (default 2) until ^C")
          ->expected(0, 1);
  status_cmd->callback([sa, watch_opt] {
    int watch_s = -1;
    if (watch_opt->count() > 0) watch_s = sa->watch.empty() ? 2 : sa->watch[0];
    ReportStatus(DoStatus(sa->cluster, sa->json, watch_s));
  });

  auto df_cluster = std::make_shared<std::string>();
  CLI::App* df_cmd = app.add_subcommand("df", "space per server and in total");
  cluster_opt(df_cmd, df_cluster.get());
  df_cmd->callback([df_cluster] { ReportStatus(DoDf(*df_cluster)); });

  struct LayoutArgs {
    std::string cluster, path;
    int max_units = 16;
  };
  auto la = std::make_shared<LayoutArgs>();
  CLI::App* layout_cmd = app.add_subcommand(
      "layout", "which servers hold which stripe units of a file (PATH: /in/fs or under a mount)");
  cluster_opt(layout_cmd, &la->cluster);
  layout_cmd->add_option("path", la->path, "file or directory")->required();
  layout_cmd->add_option("--max-units", la->max_units, "stripe units listed per server");
  layout_cmd->callback([la] { ReportStatus(DoLayout(la->cluster, la->path, la->max_units)); });

  auto sl = std::make_shared<SetLayoutArgs>();
  CLI::App* setlayout_cmd =
      app.add_subcommand("setlayout", "set the default layout for new files below a directory");
  cluster_opt(setlayout_cmd, &sl->cluster);
  setlayout_cmd->add_option("dir", sl->dir, "directory")->required();
  setlayout_cmd->add_option("--stripe-size", sl->stripe_size, "stripe size (e.g. 64K, 1M)");
  setlayout_cmd->add_option("--stripe-count", sl->stripe_count, "servers per file (0 = all)");
  setlayout_cmd->add_option("--replicas", sl->replicas,
                            "copies of each file's data (1 to 3, at most the servers); files "
                            "keep the count they were created with");
  setlayout_cmd->add_option("--sched", sl->sched,
                            "order of schedule blocks (paper 000): first, random, hash, or "
                            "default (the mount's / cluster file's)");
  setlayout_cmd->add_option("--sched-block", sl->sched_block,
                            "schedule block size b (e.g. 64K, 1M), or default (stripe size)");
  setlayout_cmd->add_option("--read-sched", sl->read_sched,
                            "replicated files: which copy serves each read block (paper 001): "
                            "eatf, sjf, lcdf, lddf, ldsdf, random, primary, or default");
  setlayout_cmd->callback([sl] { ReportStatus(DoSetLayout(*sl)); });
}

}  // namespace clf::tools
