// TestCluster: real clfd processes (and optionally a real clfmount) in a
// temporary directory, for the integration and mount suites.
//
// Start() writes a cluster file for N servers on free loopback ports, spawns N
// clfd with posix_spawn, waits for each one's pid file and for Admin status
// through libclf (no fixed sleeps), and, if asked, mounts clfmount in the
// foreground (-f) and waits until the mount point's st_dev changes. The
// destructor ALWAYS unmounts (fusermount3 -u, then umount -l), stops every
// process it started by PID (SIGTERM, then SIGKILL) and removes the directory.
//
// Binaries come from the environment (set by meson's test() env): CLFD,
// CLFMOUNT, CLF; otherwise from PATH.
//
// Thread safety: one test thread drives a TestCluster; client() is thread safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "common/status.h"
#include "test/support/pattern.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {

struct ClusterOptions {
  int servers = 3;
  uint32_t stripe_size = 1u << 20;
  uint32_t stripe_count = 0;  // 0: all servers
  uint32_t replicas = 1;      // the cluster file's replicas (copies of each file's data)
  uint32_t rpc_timeout_ms = 2000;
  bool mount = false;
  std::string mount_options;  // passed as -o (empty: none)
  std::string log_level = "info";
  bool metrics = false;      // give each server a metrics_address on a free loopback port
  bool root_squash = false;  // the cluster file's root_squash
  // The cluster file's transport ("auto", "tcp", "rdma", "grpc"); each
  // server's data channel gets its own free port, and with rdma its RDMA
  // listener another (rdma_address).
  std::string transport = "auto";
  std::string rdma_provider = "tcp";  // the cluster file's rdma_provider
  // Mutual TLS: `clf certs` makes a CA and certificates in dir()/tls and the
  // cluster file gets [tls] dir = that folder (encrypt_data as given).
  bool tls = false;
  bool encrypt_data = true;
  uint32_t lock_grace_ms = 0;  // the cluster file's lock_grace_ms (0: the default, 30 s)
  uint32_t dir_lease_ms = 0;   // the cluster file's dir_lease_ms (0: the default)
  // If set, server k keeps its store (RocksDB, objects, lock state) in
  // store_root/srv<k> instead of data_dir(k); its log and pid file stay in
  // data_dir(k). For stores on a test file system (test/support/powercut_fs).
  std::string store_root;
  int store_root_only = -1;  // if >= 0, only that server's store is under store_root
  bool sync_metadata = false;  // the cluster file's sync_metadata (sync the WAL per commit)
  MetadataMode metadata_mode = MetadataMode::kOneHop;  // the cluster file's metadata_mode
  // Extra "KEY=VALUE" environment entries for server k's clfd (e.g. the
  // skewed_clock shim: LD_PRELOAD and CLF_TEST_CLOCK_SKEW_MS).
  std::map<int, std::vector<std::string>> server_env;
  uint32_t direct_write_kib = 0;  // the cluster file's direct_write_kib (0: off)
  uint32_t purge_idle_ms = 200;  // the cluster file's purge throttle
  uint32_t purge_max_defer_ms = 30000;
  uint32_t sched_server_slots = 0;  // the cluster file's sched_server_slots (0: the default)
};

class TestCluster {
 public:
  explicit TestCluster(ClusterOptions opts = {});
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  // Writes the cluster file, starts every server, waits until all answer, opens
  // client() and mounts if options().mount.
  Status Start();

  const ClusterOptions& options() const { return opts_; }
  int size() const { return opts_.servers; }
  const std::string& dir() const { return dir_; }
  const std::string& cluster_file() const { return cluster_file_; }
  const std::string& mount_point() const { return mount_point_; }
  std::string tls_dir() const { return dir_ + "/tls"; }
  const ClusterConfig& config() const { return config_; }
  std::string data_dir(int k) const;
  // Where server k keeps its store: data_dir(k), or store_root/srv<k>.
  std::string store_dir(int k) const;
  std::string server_log(int k) const;
  pid_t server_pid(int k) const { return servers_[static_cast<size_t>(k)].pid; }
  bool server_running(int k) const;
  // SIGSTOP to server k, then waits until the kernel shows every one of its
  // threads stopped ('T' in /proc/PID/task/TID/stat): from then on nothing it
  // was sent is handled until ResumeServer.
  Status FreezeServer(int k);
  void ResumeServer(int k);

  // The test's libclf client (opened by Start()).
  client::Client& client() { return *client_; }

  // Sends `sig` to server k and waits until it is gone (reaped).
  Status KillServer(int k, int sig = 9);
  // SIGTERM (clean stop), SIGKILL after a grace period.
  Status StopServer(int k);
  // Starts server k again (same address and data) and waits until it answers.
  Status RestartServer(int k);

  // Mounts clfmount at mount_point() (if not mounted) / unmounts it.
  Status Mount();
  Status Unmount();
  bool mounted() const { return mount_pid_ > 0; }
  pid_t mount_pid() const { return mount_pid_; }  // clfmount's pid (0: none)

  // The last `bytes` of server k's log (or the mount's log for k = -1), for
  // failure messages.
  std::string LogTail(int k, size_t bytes = 4000) const;

  // Polls `cond` (every 10 ms) until it holds or timeout_ms passes. Returns the
  // milliseconds it took, or -1 on timeout. For conditions that are reached by
  // retrying (a client's channel reconnecting after a restart), not for readiness,
  // which Start()/RestartServer() already wait for.
  static int64_t PollUntil(const std::function<bool()>& cond, int timeout_ms);

  // Binary path from env var `env_var`, else `name` in PATH.
  static std::string Binary(const char* env_var, const char* name);
  // Runs the clf CLI (Binary("CLF", "clf")) with `args`, at most timeout_ms;
  // one that cannot be run is a test failure and an empty result.
  static tools::RunResult RunClf(std::vector<std::string> args, int timeout_ms);

 private:
  struct Server {
    pid_t pid = 0;
    std::string pid_file;
  };
  Status SpawnServer(int k);
  Status WaitServerUp(int k, int timeout_ms);

  ClusterOptions opts_;
  TempDir tmp_;
  std::string dir_, cluster_file_, mount_point_;
  ClusterConfig config_;
  std::vector<Server> servers_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Client> probe_;  // short deadlines, for readiness polls
  pid_t mount_pid_ = 0;
};

// Network namespaces whose names start with `prefix` (e.g. a bench's
// "clfsb<pid>-"), from `ip netns list`; empty if it cannot be listed.
std::vector<std::string> NamespacesWithPrefix(const std::string& prefix);
// Waits until the network namespace `name` exists (a bench's testbed made its
// last node); false after timeout_ms.
bool WaitForNamespace(const std::string& name, int timeout_ms);
// True when this process may create network namespaces (root, `ip netns` works).
bool CanUseNetns();

}  // namespace clf::testing
