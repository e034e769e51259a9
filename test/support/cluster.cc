#include "test/support/cluster.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/process_util.h"

namespace clf::testing {
namespace {

constexpr int kStartTimeoutMs = 60000;
constexpr int kStopGraceMs = 10000;

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string Tail(const std::string& path, size_t bytes) {
  Result<std::string> s = tools::ReadFileToString(path);
  if (!s.ok()) return "(no log: " + s.status().ToString() + ")";
  if (s->size() > bytes) return "..." + s->substr(s->size() - bytes);
  return *s;
}

}  // namespace

TestCluster::TestCluster(ClusterOptions opts) : opts_(std::move(opts)), tmp_("clf-test") {
  dir_ = tmp_.str();
  // mkdtemp makes 0700; other users (runuser -u nobody) must reach the mount.
  ::chmod(dir_.c_str(), 0755);
  cluster_file_ = dir_ + "/cluster.toml";
  mount_point_ = dir_ + "/mnt";
}

TestCluster::~TestCluster() {
  Unmount().IgnoreError();
  if (mount_pid_ > 0) tools::StopProcess(mount_pid_, kStopGraceMs);
  client_.reset();
  probe_.reset();
  for (Server& s : servers_) {
    if (s.pid > 0) tools::StopProcess(s.pid, kStopGraceMs);
    s.pid = 0;
  }
  // tmp_ removes the directory after this body.
}

tools::RunResult TestCluster::RunClf(std::vector<std::string> args, int timeout_ms) {
  args.insert(args.begin(), Binary("CLF", "clf"));
  Result<tools::RunResult> r = tools::Run(args, timeout_ms);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : tools::RunResult{};
}

std::string TestCluster::Binary(const char* env_var, const char* name) {
  const char* v = std::getenv(env_var);
  if (v != nullptr && *v != '\0') return v;
  std::string found = tools::FindBinary(name, {"server", "fuse", "tools"});
  return found.empty() ? std::string(name) : found;
}

int64_t TestCluster::PollUntil(const std::function<bool()>& cond, int timeout_ms) {
  const int64_t t0 = tools::NowMs();
  for (;;) {
    if (cond()) return tools::NowMs() - t0;
    if (tools::NowMs() - t0 > timeout_ms) return -1;
    SleepMs(10);
  }
}

std::string TestCluster::data_dir(int k) const { return dir_ + "/srv" + std::to_string(k); }
std::string TestCluster::store_dir(int k) const {
  if (opts_.store_root.empty() || (opts_.store_root_only >= 0 && k != opts_.store_root_only)) {
    return data_dir(k);
  }
  return opts_.store_root + "/srv" + std::to_string(k);
}
std::string TestCluster::server_log(int k) const { return data_dir(k) + "/clfd.log"; }

bool TestCluster::server_running(int k) const {
  return tools::ProcessAlive(servers_[static_cast<size_t>(k)].pid);
}

std::string TestCluster::LogTail(int k, size_t bytes) const {
  if (k < 0) return Tail(dir_ + "/clfmount.log", bytes);
  return Tail(server_log(k), bytes);
}

Status TestCluster::Start() {
  if (opts_.servers < 1) return Invalid("TestCluster needs at least one server");
  const bool rdma = opts_.transport == "rdma";
  CLF_ASSIGN_OR_RETURN(
      std::vector<uint16_t> ports,
      tools::PickFreePorts(opts_.servers * (2 + (opts_.metrics ? 1 : 0) + (rdma ? 1 : 0))));
  CLF_ASSIGN_OR_RETURN(std::string secret, tools::RandomHex(24));
  const std::string secret_file = dir_ + "/secret";
  CLF_RETURN_IF_ERROR(tools::WriteFileWithMode(secret_file, secret + "\n", 0600));
  CLF_ASSIGN_OR_RETURN(std::string peer_secret, tools::RandomHex(24));
  const std::string peer_secret_file = dir_ + "/peer_secret";
  CLF_RETURN_IF_ERROR(tools::WriteFileWithMode(peer_secret_file, peer_secret + "\n", 0600));
  config_ = ClusterConfig();
  config_.name = "clf-test";
  config_.secret_file = secret_file;
  config_.peer_secret_file = peer_secret_file;
  config_.default_layout.stripe_size = opts_.stripe_size;
  config_.default_layout.stripe_count = opts_.stripe_count;
  config_.default_layout.replicas = opts_.replicas;
  config_.rpc_timeout_ms = opts_.rpc_timeout_ms;
  config_.root_squash = opts_.root_squash;
  config_.lock_grace_ms = opts_.lock_grace_ms;
  if (opts_.dir_lease_ms != 0) config_.dir_lease_ms = opts_.dir_lease_ms;
  config_.sync_metadata = opts_.sync_metadata;
  config_.direct_write_kib = opts_.direct_write_kib;
  config_.purge_idle_ms = opts_.purge_idle_ms;
  if (opts_.sched_server_slots != 0) config_.sched_server_slots = opts_.sched_server_slots;
  config_.purge_max_defer_ms = opts_.purge_max_defer_ms;
  config_.metadata_mode = opts_.metadata_mode;
  CLF_ASSIGN_OR_RETURN(config_.transport, ParseTransport(opts_.transport));
  config_.rdma_provider = opts_.rdma_provider;
  servers_.assign(static_cast<size_t>(opts_.servers), Server{});
  for (int k = 0; k < opts_.servers; ++k) {
    ServerConfig s;
    s.id = static_cast<ServerId>(k);
    s.address = "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(k)]);
    s.data_address = "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(opts_.servers + k)]);
    s.data_dir = store_dir(k);
    if (rdma) {
      s.rdma_address =
          "127.0.0.1:" + std::to_string(ports[ports.size() - 1 - static_cast<size_t>(k)]);
    }
    if (opts_.metrics) {
      s.metrics_address =
          "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(2 * opts_.servers + k)]);
    }
    config_.servers.push_back(s);
    std::error_code ec;
    for (const std::string& d : {data_dir(k), s.data_dir}) {
      std::filesystem::create_directories(d, ec);
      if (ec) return FromErrno(ec.value(), "mkdir " + d);
    }
    servers_[static_cast<size_t>(k)].pid_file = s.data_dir + "/clfd.pid";
  }
  CLF_RETURN_IF_ERROR(tools::WriteFileWithMode(cluster_file_, RenderClusterConfig(config_), 0644));
  if (opts_.tls) {
    // The certificates name the servers' addresses, so they follow the file.
    CLF_ASSIGN_OR_RETURN(tools::RunResult r, tools::Run({Binary("CLF", "clf"), "certs", "--cluster",
                                                         cluster_file_, "--dir", tls_dir()},
                                                        60000));
    if (r.exit_code != 0) return IoError("clf certs failed:\n" + r.output);
    config_.tls.dir = tls_dir();
    config_.tls.encrypt_data = opts_.encrypt_data;
    CLF_RETURN_IF_ERROR(
        tools::WriteFileWithMode(cluster_file_, RenderClusterConfig(config_), 0644));
  }
  CLF_ASSIGN_OR_RETURN(config_, LoadClusterConfig(cluster_file_));

  for (int k = 0; k < opts_.servers; ++k) CLF_RETURN_IF_ERROR(SpawnServer(k));
  client::ClientOptions probe_opts;
  probe_opts.rpc_timeout_ms = 1000;
  CLF_ASSIGN_OR_RETURN(probe_, client::Client::Open(cluster_file_, probe_opts));
  for (int k = 0; k < opts_.servers; ++k) CLF_RETURN_IF_ERROR(WaitServerUp(k, kStartTimeoutMs));
  CLF_ASSIGN_OR_RETURN(client_, client::Client::Open(cluster_file_));
  if (opts_.mount) CLF_RETURN_IF_ERROR(Mount());
  return Status::Ok();
}

Status TestCluster::SpawnServer(int k) {
  Server& s = servers_[static_cast<size_t>(k)];
  ::unlink(s.pid_file.c_str());
  tools::SpawnOptions so;
  so.stdout_path = server_log(k);
  if (auto e = opts_.server_env.find(k); e != opts_.server_env.end()) so.env = e->second;
  CLF_ASSIGN_OR_RETURN(s.pid, tools::Spawn({Binary("CLFD", "clfd"), "--cluster", cluster_file_,
                                            "--id", std::to_string(k), "--pid-file", s.pid_file,
                                            "--log-level", opts_.log_level},
                                           so));
  return Status::Ok();
}

Status TestCluster::WaitServerUp(int k, int timeout_ms) {
  Server& s = servers_[static_cast<size_t>(k)];
  const int64_t deadline = tools::NowMs() + timeout_ms;
  // The pid file appears once the server listens; then Admin status must answer.
  for (;;) {
    int status = 0;
    if (s.pid > 0 && ::waitpid(s.pid, &status, WNOHANG) == s.pid) {
      s.pid = 0;
      return Unavailable("clfd " + std::to_string(k) + " exited during start-up (status " +
                         std::to_string(status) + "); log:\n" + LogTail(k));
    }
    if (tools::ReadPidFile(s.pid_file) > 0) {
      std::vector<client::ServerStatus> st = probe_->ServerStatuses();
      if (static_cast<size_t>(k) < st.size() && st[static_cast<size_t>(k)].up) return Status::Ok();
    }
    if (tools::NowMs() > deadline) {
      return Status(Code::kTimedOut, "clfd " + std::to_string(k) + " did not answer within " +
                                         std::to_string(timeout_ms) + " ms; log:\n" + LogTail(k));
    }
    SleepMs(20);
  }
}

namespace {

// Every thread of `pid` stopped ('T'); false if none could be read.
bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  bool any = false;
  for (const auto& e : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream in(e.path() / "stat");
    std::string st((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = st.rfind(')');
    if (paren == std::string::npos || paren + 2 >= st.size()) continue;  // the thread ended
    if (st[paren + 2] != 'T' && st[paren + 2] != 't') return false;
    any = true;
  }
  return any && !ec;
}

}  // namespace

Status TestCluster::FreezeServer(int k) {
  const pid_t pid = servers_[static_cast<size_t>(k)].pid;
  if (pid <= 0) return Invalid("server " + std::to_string(k) + " is not running");
  if (::kill(pid, SIGSTOP) != 0) return FromErrno(errno, "kill");
  if (PollUntil([pid] { return AllThreadsStopped(pid); }, 5000) < 0) {
    return Status(Code::kTimedOut, "server " + std::to_string(k) + " did not stop");
  }
  return Status::Ok();
}

void TestCluster::ResumeServer(int k) {
  const pid_t pid = servers_[static_cast<size_t>(k)].pid;
  if (pid > 0) ::kill(pid, SIGCONT);
}

Status TestCluster::KillServer(int k, int sig) {
  Server& s = servers_[static_cast<size_t>(k)];
  if (s.pid <= 0) return Invalid("server " + std::to_string(k) + " is not running");
  if (::kill(s.pid, sig) != 0) return FromErrno(errno, "kill");
  if (!tools::WaitChild(s.pid, kStopGraceMs)) {
    ::kill(s.pid, SIGKILL);
    tools::WaitChild(s.pid, kStopGraceMs);
  }
  s.pid = 0;
  return Status::Ok();
}

Status TestCluster::StopServer(int k) { return KillServer(k, SIGTERM); }

Status TestCluster::RestartServer(int k) {
  Server& s = servers_[static_cast<size_t>(k)];
  if (s.pid > 0) return Invalid("server " + std::to_string(k) + " is still running");
  CLF_RETURN_IF_ERROR(SpawnServer(k));
  return WaitServerUp(k, kStartTimeoutMs);
}

Status TestCluster::Mount() {
  if (mount_pid_ > 0) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(mount_point_, ec);
  ::chmod(mount_point_.c_str(), 0755);
  std::vector<std::string> argv = {Binary("CLFMOUNT", "clfmount"), cluster_file_, mount_point_,
                                   "-f"};
  if (!opts_.mount_options.empty()) {
    argv.push_back("-o");
    argv.push_back(opts_.mount_options);
  }
  tools::SpawnOptions so;
  so.stdout_path = dir_ + "/clfmount.log";
  CLF_ASSIGN_OR_RETURN(mount_pid_, tools::Spawn(argv, so));
  const int64_t deadline = tools::NowMs() + kStartTimeoutMs;
  for (;;) {
    int status = 0;
    if (::waitpid(mount_pid_, &status, WNOHANG) == mount_pid_) {
      mount_pid_ = 0;
      return Unavailable("clfmount exited before the mount was live (status " +
                         std::to_string(status) + "); log:\n" + LogTail(-1));
    }
    struct stat st;
    if (tools::IsMountRoot(mount_point_) && ::stat(mount_point_.c_str(), &st) == 0) {
      return Status::Ok();
    }
    if (tools::NowMs() > deadline) {
      return Status(Code::kTimedOut, "mount did not appear; log:\n" + LogTail(-1));
    }
    SleepMs(20);
  }
}

Status TestCluster::Unmount() {
  Status st = tools::UnmountFuse(mount_point_);
  if (mount_pid_ > 0) {
    // clfmount exits once unmounted; stop it by PID if it does not.
    if (!tools::WaitChild(mount_pid_, kStopGraceMs)) tools::StopProcess(mount_pid_, kStopGraceMs);
    mount_pid_ = 0;
  }
  return st;
}

std::vector<std::string> NamespacesWithPrefix(const std::string& prefix) {
  Result<tools::RunResult> r = tools::Run({"ip", "netns", "list"}, 10000);
  std::vector<std::string> out;
  if (!r.ok()) return out;
  std::istringstream in(r->output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(0, line.find(' ')));
  }
  return out;
}

bool WaitForNamespace(const std::string& name, int timeout_ms) {
  return TestCluster::PollUntil(
             [&] {
               const std::vector<std::string> all = NamespacesWithPrefix(name);
               return std::find(all.begin(), all.end(), name) != all.end();
             },
             timeout_ms) >= 0;
}

bool CanUseNetns() {
  if (geteuid() != 0) return false;
  Result<tools::RunResult> r = tools::Run({"ip", "netns", "list"}, 10000);
  return r.ok() && r->exit_code == 0;
}

}  // namespace clf::testing
