// clf up and down: a local cluster on loopback (its servers and one mount)
// started and stopped from one state folder.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "tools/certs.h"
#include "tools/commands.h"
#include "tools/process_util.h"
#include "tools/size_arg.h"

namespace clf::tools {
namespace {

namespace fs = std::filesystem;

// `clf up`'s readiness probe, kept until exit (see WaitForServers).
client::Client* kept_probe = nullptr;

constexpr int kStartTimeoutMs = 60000;
constexpr int kStopGraceMs = 10000;

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

struct UpArgs {
  int servers = 0;
  std::string dir, mount, stripe_size = "1M";
  int base_port = 0;
  bool tls = false;
  std::string metadata_mode;  // empty: the default (onehop)
  std::vector<std::string> set;  // "KEY=VALUE" [cluster] keys for a new cluster file
};

// A --set VALUE as TOML: numbers, true/false, quoted strings and arrays as
// written; any other word is a string (--set read_sched=primary).
std::string TomlValue(const std::string& v) {
  const bool number = v.find_first_not_of("0123456789.-+_eE") == std::string::npos &&
                      v.find_first_of("0123456789") != std::string::npos;
  if (number || v == "true" || v == "false" || v.front() == '"' || v.front() == '\'' ||
      v.front() == '[') {
    return v;
  }
  std::string q = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\') q += '\\';
    q += ch;
  }
  return q + "\"";
}

// The rendered cluster file with each "KEY=VALUE" of `set` added to its
// [cluster] table (VALUE in TOML syntax, or a bare word as a string),
// checked by parsing it back.
Result<std::string> WithClusterKeys(const ClusterConfig& cfg, const std::vector<std::string>& set,
                                    const std::string& base_dir) {
  std::string text = RenderClusterConfig(cfg);
  if (set.empty()) return text;
  const size_t table = text.find("[cluster]\n");
  if (table == std::string::npos) return Status(Code::kInternal, "no [cluster] table in the rendered file");
  std::string lines;
  for (const std::string& kv : set) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) {
      return Invalid("--set " + kv + ": expected KEY=VALUE");
    }
    const std::string key = kv.substr(0, eq);
    if (key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      return Invalid("--set " + kv + ": not a cluster key");
    }
    // A key the rendered file already has would be a duplicate: drop its line.
    const std::string prefix = "\n" + key + " = ";
    if (size_t at = text.find(prefix); at != std::string::npos) {
      text.erase(at + 1, text.find('\n', at + 1) - at);
    }
    lines += key + " = " + TomlValue(kv.substr(eq + 1)) + "\n";
  }
  text.insert(text.find("[cluster]\n") + std::string("[cluster]\n").size(), lines);
  Result<ClusterConfig> back = ParseClusterConfig(text, base_dir);
  if (!back.ok()) return back.status().WithContext("--set");
  return text;
}

std::string SrvDir(const std::string& dir, int k) { return dir + "/srv" + std::to_string(k); }

// Servers of DIR whose pid file names a live clfd.
std::vector<std::pair<int, pid_t>> RunningServers(const std::string& dir) {
  std::vector<std::pair<int, pid_t>> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("srv", 0) != 0) continue;
    int k = std::atoi(name.c_str() + 3);
    pid_t pid = ReadPidFile(e.path().string() + "/clfd.pid");
    if (pid > 0 && ProcessAlive(pid) && ProcessName(pid) == "clfd") out.emplace_back(k, pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> RecordedMounts(const std::string& dir) {
  std::vector<std::string> out;
  std::ifstream in(dir + "/mounts");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
  }
  return out;
}

void StopServers(const std::string& dir, bool verbose) {
  for (auto [k, pid] : RunningServers(dir)) {
    bool killed = StopProcess(pid, kStopGraceMs);
    if (verbose && killed) std::cout << "stopped clfd " << k << " (pid " << pid << ")\n";
  }
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind("srv", 0) == 0) {
      fs::remove(e.path() / "clfd.pid", ec);
    }
  }
}

// The programs `up` starts, found next to clf, in ../server and ../fuse, or in PATH.
struct Programs {
  std::string clfd, clfmount;
};

Result<Programs> FindPrograms() {
  Programs p{FindBinary("clfd", {"server"}), FindBinary("clfmount", {"fuse"})};
  if (p.clfd.empty()) return NotFound("clfd not found next to clf, in ../server or in PATH");
  if (p.clfmount.empty()) return NotFound("clfmount not found next to clf, in ../fuse or in PATH");
  return p;
}

// DIR's existing cluster file, if it describes what `up` was asked for (its
// data survives down/up).
Result<ClusterConfig> ReuseClusterFile(const UpArgs& a, const std::string& dir,
                                       const std::string& cluster_file) {
  Result<ClusterConfig> old = LoadClusterConfig(cluster_file);
  if (!old.ok()) return old.status().WithContext("existing cluster file");
  if (old->size() != static_cast<uint32_t>(a.servers)) {
    return Status(Code::kExists, cluster_file + " describes " + std::to_string(old->size()) +
                                     " servers, not " + std::to_string(a.servers) +
                                     "; use another --dir or remove " + dir);
  }
  if (!a.metadata_mode.empty() && MetadataModeName(old->metadata_mode) != a.metadata_mode) {
    return Status(Code::kExists, cluster_file + " has metadata_mode \"" +
                                     MetadataModeName(old->metadata_mode) + "\", not \"" +
                                     a.metadata_mode + "\"; use another --dir or remove " + dir);
  }
  if (!a.set.empty()) {
    return Status(Code::kExists, cluster_file + " exists: --set applies to a new cluster file; "
                                 "edit it, or use another --dir");
  }
  return old;
}

// Each server's gRPC, TCP data channel and Prometheus ports: consecutive from
// --base-port (gRPC, then data), or free ones, picked together so they differ.
struct Ports {
  std::vector<uint16_t> grpc, data, metrics;
};

Result<Ports> PickPorts(const UpArgs& a) {
  const size_t n = static_cast<size_t>(a.servers);
  CLF_ASSIGN_OR_RETURN(std::vector<uint16_t> free, PickFreePorts(a.base_port > 0 ? n : 2 * n));
  Ports p;
  p.metrics.assign(free.end() - static_cast<long>(n), free.end());
  p.grpc = free;
  if (a.base_port > 0) {
    for (size_t k = 0; k < n; ++k) {
      p.grpc[k] = static_cast<uint16_t>(a.base_port + static_cast<int>(k));
      p.data.push_back(static_cast<uint16_t>(a.base_port + a.servers + static_cast<int>(k)));
    }
    return p;
  }
  CLF_ASSIGN_OR_RETURN(std::vector<uint16_t> more, PickFreePorts(2 * n));
  for (uint16_t port : more) {
    if (p.data.size() == n) break;
    if (std::find(p.grpc.begin(), p.grpc.end(), port) == p.grpc.end()) p.data.push_back(port);
  }
  if (p.data.size() < n) return Unavailable("could not find free ports for the data channels");
  return p;
}

// A new cluster file in DIR: secrets, the servers on loopback, TLS
// certificates with --tls, the --set keys; written, and read back.
Result<ClusterConfig> WriteNewClusterFile(const UpArgs& a, uint64_t stripe, const std::string& dir,
                                          const std::string& cluster_file) {
  CLF_ASSIGN_OR_RETURN(Ports ports, PickPorts(a));
  const std::string secret_file = dir + "/secret";
  const std::string peer_secret_file = dir + "/peer_secret";
  for (const std::string& f : {secret_file, peer_secret_file}) {
    if (!fs::exists(f)) {
      CLF_ASSIGN_OR_RETURN(std::string secret, RandomHex(32));
      CLF_RETURN_IF_ERROR(WriteFileWithMode(f, secret + "\n", 0600));
    }
  }
  ClusterConfig cfg;
  cfg.name = "clf-local";
  cfg.secret_file = secret_file;
  cfg.peer_secret_file = peer_secret_file;
  if (a.tls) cfg.tls.dir = dir + "/tls";
  cfg.default_layout.stripe_size = static_cast<uint32_t>(stripe);
  cfg.default_layout.stripe_count = 0;
  if (a.metadata_mode == MetadataModeName(MetadataMode::kCollective)) {
    cfg.metadata_mode = MetadataMode::kCollective;
  } else if (a.metadata_mode == MetadataModeName(MetadataMode::kClient)) {
    cfg.metadata_mode = MetadataMode::kClient;
  } else if (!a.metadata_mode.empty() && a.metadata_mode != MetadataModeName(MetadataMode::kOneHop)) {
    return Invalid("--metadata-mode must be onehop, collective or client");
  }
  for (size_t k = 0; k < static_cast<size_t>(a.servers); ++k) {
    ServerConfig s;
    s.id = static_cast<ServerId>(k);
    s.address = "127.0.0.1:" + std::to_string(ports.grpc[k]);
    s.data_address = "127.0.0.1:" + std::to_string(ports.data[k]);
    s.data_dir = SrvDir(dir, static_cast<int>(k));
    s.metrics_address = "127.0.0.1:" + std::to_string(ports.metrics[k]);
    cfg.servers.push_back(s);
  }
  CLF_RETURN_IF_ERROR(cfg.Validate());
  if (a.tls) {
    CertOptions co;
    co.dir = cfg.tls.dir;
    CLF_RETURN_IF_ERROR(MakeClusterCertificates(cfg, co).status().WithContext("clf up --tls"));
  }
  CLF_ASSIGN_OR_RETURN(std::string text, WithClusterKeys(cfg, a.set, dir));
  CLF_RETURN_IF_ERROR(WriteFileWithMode(cluster_file, text, 0644));
  return ParseClusterConfig(text, dir);
}

// Starts one clfd per server (each in its own session, logging to its data
// folder); *pids gets every one started, also when a later one fails.
Status StartServers(const ClusterConfig& cfg, const std::string& clfd,
                    const std::string& cluster_file, std::vector<pid_t>* pids) {
  for (size_t k = 0; k < cfg.servers.size(); ++k) {
    const std::string sd = cfg.servers[k].data_dir;
    std::error_code ec;
    fs::create_directories(sd, ec);
    if (ec) return FromErrno(ec.value(), "mkdir " + sd);
    fs::remove(sd + "/clfd.pid", ec);
    SpawnOptions so;
    so.stdout_path = sd + "/clfd.log";
    so.new_session = true;
    CLF_ASSIGN_OR_RETURN(pid_t pid, Spawn({clfd, "--cluster", cluster_file, "--id", std::to_string(k),
                                           "--pid-file", sd + "/clfd.pid", "--log-level", "info"},
                                          so));
    pids->push_back(pid);
  }
  return Status::Ok();
}

// Waits until every server wrote its pid file and answers Admin status (a
// server that exits meanwhile fails it with the end of its log).
Status WaitForServers(const ClusterConfig& cfg, const std::string& cluster_file,
                      const std::vector<pid_t>& pids) {
  client::ClientOptions copts;
  copts.rpc_timeout_ms = 1000;
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> probe,
                       client::Client::Open(cluster_file, copts));
  // The probe client is kept until the process exits, not destroyed here:
  // with gRPC 1.51 (Debian 12), destroying the last channel that used the
  // callback API shuts its completion queue down while the queue's thread
  // may still be finishing the last event, which aborts the process
  // ("ref_counted.h: prior > 0" in grpc_cq_internal_unref); `clf up --tls`
  // hit it in CI. `clf` exits right after `up`.
  kept_probe = probe.release();
  const int64_t deadline = NowMs() + kStartTimeoutMs;
  for (;;) {
    for (size_t k = 0; k < pids.size(); ++k) {
      if (!ProcessAlive(pids[k])) {
        const std::string log_file = cfg.servers[k].data_dir + "/clfd.log";
        Result<std::string> lr = ReadFileToString(log_file);
        std::string log = lr.ok() ? *lr : std::string();
        return Unavailable("clfd " + std::to_string(k) + " exited during start-up; log " +
                           log_file + ":\n" + log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
      }
    }
    bool all_pid = true;
    for (const ServerConfig& s : cfg.servers) {
      if (ReadPidFile(s.data_dir + "/clfd.pid") <= 0) all_pid = false;
    }
    if (all_pid) {
      std::vector<client::ServerStatus> st = kept_probe->ServerStatuses();
      bool all_up = st.size() == cfg.servers.size();
      for (const client::ServerStatus& s : st) all_up = all_up && s.up;
      if (all_up) return Status::Ok();
    }
    if (NowMs() > deadline) return Status(Code::kTimedOut, "servers did not answer within 60 s");
    SleepMs(50);
  }
}

// Mounts the cluster at `mnt` (clfmount daemonizes once the mount is live;
// its log goes to `mount_log`), waits until the mount point answers, and
// records it in DIR/mounts for `clf down`.
Status MountAndRecord(const std::string& clfmount, const std::string& cluster_file,
                      const std::string& mnt, const std::string& mount_log,
                      const std::string& dir) {
  std::error_code ec;
  fs::create_directories(mnt, ec);
  CLF_ASSIGN_OR_RETURN(RunResult m,
                       Run({clfmount, cluster_file, mnt, "-o", "log=" + mount_log}, kStartTimeoutMs));
  {
    std::ofstream ml(mount_log, std::ios::app);
    ml << m.output;
  }
  if (m.exit_code != 0) {
    return IoError("clfmount exited with " + std::to_string(m.exit_code) + ":\n" + m.output);
  }
  const int64_t deadline = NowMs() + kStartTimeoutMs;
  for (;;) {
    struct stat st;
    if (IsMountRoot(mnt) && ::stat(mnt.c_str(), &st) == 0) break;
    if (NowMs() > deadline) {
      UnmountFuse(mnt).IgnoreError();
      return Status(Code::kTimedOut, "the mount at " + mnt + " did not answer");
    }
    SleepMs(20);
  }
  std::vector<std::string> mounts = RecordedMounts(dir);
  if (std::find(mounts.begin(), mounts.end(), mnt) == mounts.end()) {
    std::ofstream mf(dir + "/mounts", std::ios::app);
    mf << mnt << "\n";
  }
  return Status::Ok();
}

void PrintUp(const ClusterConfig& cfg, bool reuse, const std::string& cluster_file,
             const std::vector<pid_t>& pids, const std::string& mnt, const std::string& mount_log,
             const std::string& dir) {
  std::cout << "Clusterfile is up" << (reuse ? " (existing cluster file reused)" : "") << ":\n"
            << "  cluster file  " << cluster_file << "\n"
            << (cfg.tls.enabled() ? "  tls           mutual TLS, certificates in " + cfg.tls.dir
                                  : "  secret        " + cfg.secret_file)
            << "\n";
  for (size_t k = 0; k < cfg.servers.size(); ++k) {
    const ServerConfig& s = cfg.servers[k];
    std::cout << "  clfd " << k << "        " << s.address << "  pid " << pids[k]
              << "  data " << s.data_dir << "  log " << s.data_dir << "/clfd.log";
    if (!s.metrics_address.empty()) std::cout << "  metrics http://" << s.metrics_address << "/metrics";
    std::cout << "\n";
  }
  std::cout << "  mount         " << mnt << "  (clfmount log " << mount_log << ")\n"
            << "  status        clf status --cluster " << cluster_file << "\n"
            << "  stop          clf down --dir " << dir << "\n";
}

Status DoUp(const UpArgs& a) {
  if (a.servers < 1 || a.servers > 64) return Invalid("--servers must be 1..64");
  CLF_ASSIGN_OR_RETURN(uint64_t stripe, ParseSize(a.stripe_size));
  const std::string dir = fs::absolute(a.dir).lexically_normal().string();
  const std::string mnt = fs::absolute(a.mount).lexically_normal().string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FromErrno(ec.value(), "mkdir " + dir);
  std::vector<std::pair<int, pid_t>> running = RunningServers(dir);
  if (!running.empty()) {
    return Status(Code::kExists, dir + " already has running servers (clfd " +
                                     std::to_string(running[0].first) + " is pid " +
                                     std::to_string(running[0].second) +
                                     "); run `clf down --dir " + dir + "` first");
  }
  if (IsMountRoot(mnt)) return Status(Code::kBusy, mnt + " is already a mount point");
  CLF_ASSIGN_OR_RETURN(Programs programs, FindPrograms());

  const std::string cluster_file = dir + "/cluster.toml";
  const bool reuse = fs::exists(cluster_file);
  CLF_ASSIGN_OR_RETURN(ClusterConfig cfg, reuse ? ReuseClusterFile(a, dir, cluster_file)
                                                : WriteNewClusterFile(a, stripe, dir, cluster_file));
  if (a.tls && !cfg.tls.enabled()) {
    return Invalid(cluster_file + " exists without [tls]: use another --dir for a TLS cluster");
  }

  std::vector<pid_t> pids;
  auto abort_up = [&](Status why) {
    for (pid_t p : pids) StopProcess(p, kStopGraceMs);
    StopServers(dir, false);
    return why;
  };
  if (Status s = StartServers(cfg, programs.clfd, cluster_file, &pids); !s.ok()) return abort_up(s);
  if (Status s = WaitForServers(cfg, cluster_file, pids); !s.ok()) return abort_up(s);
  const std::string mount_log = dir + "/clfmount.log";
  if (Status s = MountAndRecord(programs.clfmount, cluster_file, mnt, mount_log, dir); !s.ok()) {
    return abort_up(s);
  }
  PrintUp(cfg, reuse, cluster_file, pids, mnt, mount_log, dir);
  return Status::Ok();
}

Status DoDown(const std::string& dir_arg) {
  const std::string dir = fs::absolute(dir_arg).lexically_normal().string();
  if (!fs::is_directory(dir)) return NotFound(dir + " is not a directory");
  const std::string cluster_file = dir + "/cluster.toml";
  std::vector<std::string> mounts = RecordedMounts(dir);
  // Also any live mount whose source names this cluster file.
  for (const MountEntry& e : ListMounts()) {
    if (e.fstype.rfind("fuse", 0) == 0 && e.source.find(cluster_file) != std::string::npos &&
        std::find(mounts.begin(), mounts.end(), e.mount_point) == mounts.end()) {
      mounts.push_back(e.mount_point);
    }
  }
  Status first_error;
  for (const std::string& m : mounts) {
    Status st = UnmountFuse(m);
    if (st.ok()) {
      std::cout << "unmounted " << m << "\n";
    } else {
      std::cerr << "clf: " << st.ToString() << "\n";
      if (first_error.ok()) first_error = st;
    }
  }
  if (first_error.ok()) {
    std::error_code ec;
    fs::remove(dir + "/mounts", ec);
  }
  StopServers(dir, true);
  return first_error;
}

}  // namespace

void AddUpDownCommands(CLI::App& app) {
  auto up = std::make_shared<UpArgs>();
  CLI::App* up_cmd = app.add_subcommand("up", "start a local cluster on loopback and mount it");
  up_cmd->add_option("--servers", up->servers, "number of servers")->required();
  up_cmd->add_option("--dir", up->dir, "state folder: cluster.toml, secret, srv<K>/")->required();
  up_cmd->add_option("--mount", up->mount, "mount point")->required();
  up_cmd->add_option("--stripe-size", up->stripe_size, "default stripe size (e.g. 1M, 64K)");
  up_cmd->add_option("--base-port", up->base_port, "first port (default: free ports)");
  up_cmd->add_option("--metadata-mode", up->metadata_mode,
                     "onehop (default), collective (paper 004's per-file collectives) or client "
                     "(paper 004's client-driven baseline)")
      ->check(CLI::IsMember({"onehop", "collective", "client"}));
  up_cmd->add_option("--set", up->set,
                     "KEY=VALUE: a [cluster] key of the new cluster file (VALUE in TOML, a bare word is a string; repeatable), "
                     "e.g. --set direct_write_kib=1024 --set read_sched=primary");
  up_cmd->add_flag("--tls", up->tls,
                   "mutual TLS: make a CA and certificates in DIR/tls (clf certs) and use them");
  up_cmd->callback([up] { ReportStatus(DoUp(*up)); });

  auto down_dir = std::make_shared<std::string>();
  CLI::App* down_cmd = app.add_subcommand("down", "unmount and stop a cluster started by `clf up`");
  down_cmd->add_option("--dir", *down_dir, "the folder given to `clf up`")->required();
  down_cmd->callback([down_dir] { ReportStatus(DoDown(*down_dir)); });
}

}  // namespace clf::tools
