#include "tools/bench/locks/cluster_bench.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "clf/client.h"
#include "clf/lock_client.h"
#include "common/config.h"
#include "common/log.h"
#include "locking/clock.h"
#include "locking/lock_manager.h"
#include "tools/bench/bench_files.h"
#include "tools/bench/netns_cluster.h"
#include "tools/bench/locks/lock_sim.h"
#include "tools/bench/netns_testbed.h"
#include "tools/bench/locks/workloads.h"
#include "tools/process_util.h"

extern "C" char** environ;

namespace clf::tools::bench {
namespace {

namespace fs = std::filesystem;
using client::HeldLock;
using client::LockExtent;
using client::LockMode;


Workload MakeWorkload(const std::string& name, int clients, int frames) {
  if (name == "3d-block") return ThreeDBlockDims(clients);
  if (name == "flash") return Flash(clients);
  return TileReader(frames);
}

// Set by SIGINT / SIGTERM (installed without SA_RESTART: a blocked read
// returns EINTR and the run gives up, so every destructor cleans up).
std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop.store(true); }

// ---------------------------------------------------------------- cluster

class BenchCluster {
 public:
  virtual ~BenchCluster() = default;
  virtual const std::string& cluster_file() const = 0;
  // What runs worker i (prepended to its command line).
  virtual std::vector<std::string> WorkerPrefix(int i) const = 0;
};

// Waits until every server answers a status call.
Status WaitServersUp(const std::string& cluster_file, const std::vector<pid_t>& pids,
                     const std::string& logs) {
  client::ClientOptions probe_opts;
  probe_opts.rpc_timeout_ms = 1000;
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> probe,
                       client::Client::Open(cluster_file, probe_opts));
  const int64_t deadline = NowMs() + 60000;
  for (size_t k = 0; k < pids.size(); ++k) {
    for (;;) {
      if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
      if (!ProcessAlive(pids[k])) {
        return Unavailable("clfd " + std::to_string(k) + " exited during start-up; see " + logs);
      }
      std::vector<client::ServerStatus> st = probe->ServerStatuses();
      if (k < st.size() && st[k].up) break;
      if (NowMs() > deadline) return Status(Code::kTimedOut, "clfd did not start");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return Status::Ok();
}

// Servers, clients and the driver each in a network namespace (10.78.0.0/24):
// servers s<k> at .10+k, clients c<i> at .100+i, the driver d at .2. The
// destructor stops the clfd by PID, deletes the namespaces and the folder.
class NetnsCluster final : public BenchCluster {
 public:
  NetnsCluster() : tb_("clflk" + std::to_string(::getpid())) {}
  ~NetnsCluster() override {
    for (pid_t p : pids_) StopProcess(p, 10000);
    for (pid_t p : pids_) tb_.Forget(p);
    tb_.Teardown();
    if (self_ns_ >= 0) {  // back home (nothing of ours runs in the deleted namespaces)
      ::setns(self_ns_, CLONE_NEWNET);
      ::close(self_ns_);
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  Status Start(int servers, int clients, const std::string& rate, const std::string& server_rate,
               const std::string& burst) {
    if (::geteuid() != 0) return Status(Code::kPermission, "--netns needs root (ip netns, tc)");
    char tmpl[] = "/tmp/clf-bench-locks-netns-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return FromErrno(errno, "mkdtemp");
    dir_ = tmpl;
    std::printf("work folder %s\n", dir_.c_str());
    std::fflush(stdout);
    const std::string clfd = FindBinary("clfd", {"server"});
    if (clfd.empty()) return NotFound("clfd not found next to clf, in ../server or in PATH");
    CLF_RETURN_IF_ERROR(tb_.Start());
    for (int k = 0; k < servers; ++k) {
      CLF_RETURN_IF_ERROR(tb_.AddNode("s" + std::to_string(k), Ip(10 + k), server_rate));
      if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
    }
    for (int i = 0; i < clients; ++i) {
      CLF_RETURN_IF_ERROR(tb_.AddNode("c" + std::to_string(i), Ip(100 + i), rate, burst));
      if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
    }
    CLF_RETURN_IF_ERROR(tb_.AddNode("d", Ip(2), rate, burst));
    ClusterConfig cfg;
    cfg.name = "clf-bench-locks-netns";
    CLF_RETURN_IF_ERROR(WriteBenchSecrets(dir_, &cfg));
    cfg.default_layout.stripe_size = 1u << 20;
    cfg.default_layout.stripe_count = 0;
    auto data_dir = [&](int k) { return dir_ + "/srv" + std::to_string(k); };
    AddBenchServers(&cfg, kSubnet, servers, data_dir);
    for (const ServerConfig& sc : cfg.servers) fs::create_directories(sc.data_dir);
    cluster_file_ = dir_ + "/cluster.toml";
    CLF_RETURN_IF_ERROR(WriteFileWithMode(cluster_file_, RenderClusterConfig(cfg), 0644));
    CLF_ASSIGN_OR_RETURN(pids_, StartBenchServers(tb_, clfd, cluster_file_, servers, [&](int k) {
                           return data_dir(k) + "/clfd.log";
                         }));
    // The driver joins its own node: only this (main) thread runs yet, and
    // every thread it starts later (gRPC's) inherits the namespace.
    self_ns_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self_ns_ < 0) return FromErrno(errno, "open /proc/self/ns/net");
    const std::string path = "/run/netns/" + tb_.Namespace("d");
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return FromErrno(errno, "open " + path);
    const int rc = ::setns(fd, CLONE_NEWNET);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return FromErrno(err, "setns " + path);
    return WaitServersUp(cluster_file_, pids_, dir_ + "/srv*/clfd.log");
  }

  const std::string& cluster_file() const override { return cluster_file_; }
  std::vector<std::string> WorkerPrefix(int i) const override {
    return {"ip", "netns", "exec", tb_.Namespace("c" + std::to_string(i))};
  }

 private:
  static constexpr const char* kSubnet = "10.78.0";
  static std::string Ip(int host) { return BenchIp(kSubnet, host); }
  Testbed tb_;
  std::string dir_, cluster_file_;
  std::vector<pid_t> pids_;
  int self_ns_ = -1;
};

// clfd processes in a temporary directory; the destructor stops them by PID
// and removes the directory.
class LocalCluster final : public BenchCluster {
 public:
  std::vector<std::string> WorkerPrefix(int) const override { return {}; }
  ~LocalCluster() override {
    for (pid_t p : pids_) {
      if (p > 0) StopProcess(p, 10000);
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  Status Start(int servers) {
    char tmpl[] = "/tmp/clf-bench-locks-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return FromErrno(errno, "mkdtemp");
    dir_ = tmpl;
    const std::string clfd = FindBinary("clfd", {"server"});
    if (clfd.empty()) return NotFound("clfd not found next to clf, in ../server or in PATH");
    CLF_ASSIGN_OR_RETURN(std::vector<uint16_t> ports, PickFreePorts(2 * servers));
    CLF_ASSIGN_OR_RETURN(std::string secret, RandomHex(24));
    ClusterConfig cfg;
    cfg.name = "clf-bench-locks";
    cfg.secret_file = dir_ + "/secret";
    CLF_RETURN_IF_ERROR(WriteFileWithMode(cfg.secret_file, secret + "\n", 0600));
    // Servers authenticate each other with a secret clients do not hold.
    CLF_ASSIGN_OR_RETURN(std::string peer_secret, RandomHex(24));
    cfg.peer_secret_file = dir_ + "/peer_secret";
    CLF_RETURN_IF_ERROR(WriteFileWithMode(cfg.peer_secret_file, peer_secret + "\n", 0600));
    cfg.default_layout.stripe_size = 1u << 20;
    cfg.default_layout.stripe_count = 0;
    for (int k = 0; k < servers; ++k) {
      ServerConfig s;
      s.id = static_cast<ServerId>(k);
      s.address = "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(k)]);
      s.data_address = "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(servers + k)]);
      s.data_dir = dir_ + "/srv" + std::to_string(k);
      fs::create_directories(s.data_dir);
      cfg.servers.push_back(s);
    }
    cluster_file_ = dir_ + "/cluster.toml";
    CLF_RETURN_IF_ERROR(WriteFileWithMode(cluster_file_, RenderClusterConfig(cfg), 0644));
    for (int k = 0; k < servers; ++k) {
      SpawnOptions so;
      so.stdout_path = dir_ + "/srv" + std::to_string(k) + "/clfd.log";
      const std::string pid_file = dir_ + "/srv" + std::to_string(k) + "/clfd.pid";
      CLF_ASSIGN_OR_RETURN(pid_t pid,
                           Spawn({clfd, "--cluster", cluster_file_, "--id", std::to_string(k),
                                  "--pid-file", pid_file, "--log-level", "warn"},
                                 so));
      pids_.push_back(pid);
    }
    client::ClientOptions probe_opts;
    probe_opts.rpc_timeout_ms = 1000;
    CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> probe,
                         client::Client::Open(cluster_file_, probe_opts));
    const int64_t deadline = NowMs() + 60000;
    for (int k = 0; k < servers; ++k) {
      const std::string pid_file = dir_ + "/srv" + std::to_string(k) + "/clfd.pid";
      for (;;) {
        if (!ProcessAlive(pids_[static_cast<size_t>(k)])) {
          return Unavailable("clfd " + std::to_string(k) + " exited during start-up; see " + dir_ +
                             "/srv" + std::to_string(k) + "/clfd.log");
        }
        if (ReadPidFile(pid_file) > 0) {
          std::vector<client::ServerStatus> st = probe->ServerStatuses();
          if (static_cast<size_t>(k) < st.size() && st[static_cast<size_t>(k)].up) break;
        }
        if (NowMs() > deadline) return Status(Code::kTimedOut, "clfd did not start");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    return Status::Ok();
  }

  const std::string& cluster_file() const override { return cluster_file_; }

 private:
  std::string dir_, cluster_file_;
  std::vector<pid_t> pids_;
};

// ---------------------------------------------------------------- workers

// A worker process with a pipe to its stdin and one from its stdout.
struct Worker {
  pid_t pid = 0;
  int to = -1, from = -1;
  std::string buf;

  ~Worker() {
    if (to >= 0) ::close(to);
    if (from >= 0) ::close(from);
    if (pid > 0) StopProcess(pid, 5000);
  }

  // The next line of output ("" at end of file).
  std::string ReadLine() {
    for (;;) {
      size_t nl = buf.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        return line;
      }
      char tmp[512];
      ssize_t n = ::read(from, tmp, sizeof tmp);
      if (n < 0 && errno == EINTR && !g_stop.load()) continue;
      if (n <= 0) return "";
      buf.append(tmp, static_cast<size_t>(n));
    }
  }
};

Result<std::unique_ptr<Worker>> StartWorker(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return FromErrno(errno, "pipe");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return FromErrno(errno, "pipe");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (std::string& s : args) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  auto w = std::make_unique<Worker>();
  int rc = posix_spawnp(&w->pid, cargs[0], &fa, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  w->to = in[1];
  w->from = out[0];
  if (rc != 0) {
    w->pid = 0;
    return FromErrno(rc, "spawn worker");
  }
  return w;
}

std::string SelfExe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("clf") : p.string();
}

struct RunResult {
  double seconds = 0;       // go to the last worker's end
  double lock_seconds = 0;  // summed over workers: time inside lock and unlock calls
  uint64_t bytes = 0;
  uint64_t locks_per_client = 0;
};

// Every byte of every file as the workers wrote it (untimed, after the run):
// client i's extents hold 'a' + i % 26, every other byte up to the last
// written one is 0. The write workloads' clients write disjoint extents.
Status VerifyWritten(client::Client& c, const Workload& w, const std::vector<uint64_t>& handles) {
  std::string want;
  for (size_t i = 0; i < w.access.size(); ++i) {
    for (const Extent& e : w.access[i].extents.extents()) {
      if (want.size() < e.offset + e.length) want.resize(e.offset + e.length, '\0');
      std::fill_n(want.begin() + static_cast<std::ptrdiff_t>(e.offset), e.length,
                  static_cast<char>('a' + i % 26));
    }
  }
  constexpr uint64_t kChunk = 8u << 20;
  for (uint64_t h : handles) {
    CLF_ASSIGN_OR_RETURN(client::Attr a, c.GetAttrSync(h));
    for (uint64_t off = 0; off < want.size(); off += kChunk) {
      const uint64_t n = std::min<uint64_t>(kChunk, want.size() - off);
      CLF_ASSIGN_OR_RETURN(std::string got, c.ReadSync(h, a.layout, off, n));
      got.resize(n, '\0');  // a hole at the end reads short
      if (got.compare(0, n, want, off, n) != 0) {
        uint64_t k = 0;
        while (got[k] == want[off + k]) ++k;
        return Internal(w.name + ": byte " + std::to_string(off + k) + " of file " +
                        std::to_string(h) + " reads " + std::to_string(int(got[k])) +
                        ", written " + std::to_string(int(want[off + k])));
      }
    }
  }
  return Status::Ok();
}

// The run's files, created empty (exclusive, fresh names); the tile reader's
// frames written whole first (untimed), so it reads frames that exist.
Result<std::vector<uint64_t>> CreateRunFiles(client::Client& c, const Workload& w,
                                             const std::string& tag) {
  static int serial = 0;
  std::vector<uint64_t> handles;
  for (int f = 0; f < w.files; ++f) {
    client::CreateArgs ca;
    ca.exclusive = true;
    CLF_ASSIGN_OR_RETURN(
        client::Attr a,
        c.CreateSync(kRootHandle, tag + "-" + std::to_string(++serial) + "-" + std::to_string(f),
                     ca));
    handles.push_back(a.handle);
    if (w.name == "tile") {
      std::string frame(w.file_bytes, 'f');
      for (uint64_t off = 0; off < frame.size(); off += 8u << 20) {
        CLF_ASSIGN_OR_RETURN(uint64_t n,
                             c.WriteSync(a.handle, a.layout, off, frame.substr(off, 8u << 20)));
        (void)n;
      }
    }
  }
  return handles;
}

// One worker process per client, each run through the cluster's WorkerPrefix.
Result<std::vector<std::unique_ptr<Worker>>> StartWorkers(const BenchCluster& cluster,
                                                          const Workload& w, LockMethod method,
                                                          const std::vector<uint64_t>& handles,
                                                          bool sync) {
  std::vector<std::string> argv;
  std::string hs;
  for (uint64_t h : handles) hs += (hs.empty() ? "" : ",") + std::to_string(h);
  std::vector<std::unique_ptr<Worker>> workers;
  const std::string self = SelfExe();
  for (int i = 0; i < w.clients; ++i) {
    argv = cluster.WorkerPrefix(i);
    argv.insert(argv.end(), {self,
            "bench",
            "locks",
            "--worker",
            "--cluster-file",
            cluster.cluster_file(),
            "--workload",
            w.name,
            "--worker-clients",
            std::to_string(w.clients),
            "--index",
            std::to_string(i),
            "--method",
            MethodName(method),
            "--handles",
            hs});
    if (sync) argv.push_back("--sync");
    CLF_ASSIGN_OR_RETURN(std::unique_ptr<Worker> wk, StartWorker(argv));
    workers.push_back(std::move(wk));
  }
  return workers;
}

// Waits for every worker's "ready", then says "go" to all: the run's start.
Result<int64_t> StartTogether(std::vector<std::unique_ptr<Worker>>& workers) {
  for (auto& wk : workers) {
    std::string line = wk->ReadLine();
    if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
    if (line != "ready") return Internal("worker did not start: '" + line + "'");
  }
  const int64_t go = MonoNs();
  for (auto& wk : workers) {
    if (::write(wk->to, "go\n", 3) != 3) return FromErrno(errno, "write to worker");
  }
  return go;
}

// Every worker's "done" line read and the worker reaped: the run's time
// (from `go` to the last end) and the workers' summed time in lock calls.
Result<RunResult> CollectDone(std::vector<std::unique_ptr<Worker>>& workers, int64_t go) {
  RunResult r;
  int64_t last = go;
  for (auto& wk : workers) {
    std::string line = wk->ReadLine();
    long long end = 0;
    double lock_s = 0;
    if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
    if (std::sscanf(line.c_str(), "done %lld %lf", &end, &lock_s) != 2) {
      return Internal("worker failed: '" + line + "'");
    }
    last = std::max<int64_t>(last, end);
    r.lock_seconds += lock_s;
    int status = 0;
    WaitChild(wk->pid, 10000, &status);
    wk->pid = 0;
  }
  r.seconds = static_cast<double>(last - go) / 1e9;
  return r;
}

// One run: fresh files, one worker per client, all started together.
Result<RunResult> RunOnce(client::Client& c, const BenchCluster& cluster, const Workload& w,
                          LockMethod method, const std::string& tag, bool sync) {
  CLF_ASSIGN_OR_RETURN(std::vector<uint64_t> handles, CreateRunFiles(c, w, tag));
  CLF_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Worker>> workers,
                       StartWorkers(cluster, w, method, handles, sync));
  CLF_ASSIGN_OR_RETURN(const int64_t go, StartTogether(workers));
  CLF_ASSIGN_OR_RETURN(RunResult r, CollectDone(workers, go));
  if (w.name != "tile") CLF_RETURN_IF_ERROR(VerifyWritten(c, w, handles));
  for (const ClientAccess& a : w.access) {
    r.bytes += a.bytes * static_cast<uint64_t>(w.files);
    uint64_t n = method == LockMethod::kNone   ? 0
                 : method == LockMethod::kList ? a.extents.size()
                                               : 1;
    r.locks_per_client = std::max(r.locks_per_client, n);
  }
  return r;
}

// ---------------------------------------------------------------- raw lock service

struct RawRow {
  std::string path;  // grpc | in-process
  int threads = 0;
  double us_per_pair = 0;  // mean acquire + release latency per thread
  double pairs_per_s = 0;  // all threads together
};

// `threads` threads, each acquiring and releasing its own 8-byte range of one
// file for `seconds` (try mode: nothing ever waits).
template <typename Pair>
RawRow MeasurePairs(const std::string& path, int threads, double seconds, Pair pair) {
  std::atomic<bool> stop{false};
  std::vector<uint64_t> counts(static_cast<size_t>(threads), 0);
  std::vector<std::thread> ts;
  const int64_t t0 = MonoNs();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        pair(t, n);
        ++n;
      }
      counts[static_cast<size_t>(t)] = n;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  stop = true;
  for (std::thread& t : ts) t.join();
  const double elapsed = static_cast<double>(MonoNs() - t0) / 1e9;
  uint64_t total = 0;
  for (uint64_t n : counts) total += n;
  RawRow r;
  r.path = path;
  r.threads = threads;
  r.pairs_per_s = static_cast<double>(total) / elapsed;
  r.us_per_pair = total == 0 ? 0 : elapsed * 1e6 * threads / static_cast<double>(total);
  return r;
}

Result<std::vector<RawRow>> MeasureRaw(client::Client& c, const std::string& cluster_file,
                                       double seconds) {
  std::vector<RawRow> rows;
  client::CreateArgs ca;
  CLF_ASSIGN_OR_RETURN(client::Attr a, c.CreateSync(kRootHandle, "raw-locks", ca));
  CLF_ASSIGN_OR_RETURN(ClusterConfig cfg, LoadClusterConfig(cluster_file));
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::LockClient> lc, client::LockClient::Open(cfg));
  // Open the session (untimed).
  CLF_ASSIGN_OR_RETURN(HeldLock warm,
                       lc->LockRange(a.handle, 0, 1, LockMode::kExclusive, 1, {false, 0}));
  CLF_RETURN_IF_ERROR(lc->Unlock(warm));
  std::atomic<int> errors{0};
  for (int threads : {1, 4, 8}) {
    rows.push_back(MeasurePairs("grpc", threads, seconds, [&](int t, uint64_t) {
      Result<HeldLock> l =
          lc->LockRange(a.handle, static_cast<uint64_t>(t) * 16, 8, LockMode::kExclusive,
                        static_cast<uint64_t>(t) + 1, {false, 0});
      if (!l.ok() || !lc->Unlock(*l).ok()) errors.fetch_add(1);
    }));
  }
  if (errors.load() != 0) return Internal(std::to_string(errors.load()) + " raw lock calls failed");
  // The floor: two metadata round trips (GetAttr) on the same server, per "pair".
  rows.push_back(MeasurePairs("grpc-getattr", 1, seconds, [&](int, uint64_t) {
    if (!c.GetAttrSync(a.handle).ok() || !c.GetAttrSync(a.handle).ok()) errors.fetch_add(1);
  }));
  locking::LockManager mgr(locking::SteadyClock::Default());
  CLF_ASSIGN_OR_RETURN(locking::SessionId sid, mgr.OpenSession(std::chrono::hours(1)));
  for (int threads : {1, 4, 8}) {
    rows.push_back(MeasurePairs("in-process", threads, seconds, [&](int t, uint64_t) {
      Result<uint64_t> id = mgr.TryLock(
          1, locking::Owner{sid, static_cast<uint64_t>(t) + 1}, locking::LockMode::kExclusive,
          locking::LockRequest::Range(static_cast<uint64_t>(t) * 16, 8));
      if (!id.ok() || !mgr.Unlock(*id).ok()) errors.fetch_add(1);
    }));
  }
  if (errors.load() != 0) return Internal("in-process lock calls failed");
  return rows;
}

// ---------------------------------------------------------------- output

struct Point {
  std::string workload;
  int clients = 0;
  LockMethod method = LockMethod::kNone;
  RunResult r;              // the median run
  std::vector<double> all;  // seconds of every run
};

double MBps(const Point& p) { return p.r.seconds > 0 ? p.r.bytes / 1e6 / p.r.seconds : 0; }

constexpr LockMethod kMethods[] = {LockMethod::kNone, LockMethod::kFile, LockMethod::kRange,
                                   LockMethod::kList};

void PrintTable(const std::vector<Point>& pts, const std::string& workload) {
  std::map<int, std::map<LockMethod, const Point*>> by;
  for (const Point& p : pts) {
    if (p.workload == workload) by[p.clients][p.method] = &p;
  }
  if (by.empty()) return;
  std::printf("\n%s: MB/s (median of runs), list locks per client, ratios\n", workload.c_str());
  std::printf("  %7s %9s %9s %9s %9s | %8s | %11s %11s %11s\n", "clients", "none", "file", "range",
              "list", "locks", "list/none", "list/file", "list/range");
  for (auto& [clients, by_method] : by) {
    auto& m = by_method;  // clang 14 cannot capture a structured binding in a lambda
    auto bw = [&](LockMethod x) { return m.count(x) ? MBps(*m[x]) : 0.0; };
    double none = bw(LockMethod::kNone), file = bw(LockMethod::kFile);
    double range = bw(LockMethod::kRange), list = bw(LockMethod::kList);
    uint64_t locks = m.count(LockMethod::kList) ? m[LockMethod::kList]->r.locks_per_client : 0;
    std::printf("  %7d %9.1f %9.1f %9.1f %9.1f | %8llu | %10.0f%% %10.2fx %10.2fx\n", clients, none,
                file, range, list, static_cast<unsigned long long>(locks),
                none > 0 ? 100 * list / none : 0, file > 0 ? list / file : 0,
                range > 0 ? list / range : 0);
  }
}

Status WriteOutputs(const std::string& dir, const std::vector<Point>& pts,
                    const std::vector<RawRow>& raw, bool plots) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FromErrno(ec.value(), "mkdir " + dir);
  {
    std::ofstream csv(dir + "/locks_cluster.csv");
    csv << "workload,clients,method,locks_per_client,bytes,seconds,mb_per_s,lock_seconds_sum,"
           "runs_seconds\n";
    for (const Point& p : pts) {
      csv << p.workload << ',' << p.clients << ',' << MethodName(p.method) << ','
          << p.r.locks_per_client << ',' << p.r.bytes << ',' << p.r.seconds << ',' << MBps(p) << ','
          << p.r.lock_seconds << ',';
      for (size_t i = 0; i < p.all.size(); ++i) csv << (i ? ";" : "") << p.all[i];
      csv << '\n';
    }
    if (!csv) return IoError("cannot write " + dir + "/locks_cluster.csv");
  }
  if (!raw.empty()) {
    std::ofstream csv(dir + "/locks_cluster_raw.csv");
    csv << "path,threads,us_per_pair,pairs_per_s\n";
    for (const RawRow& r : raw) {
      csv << r.path << ',' << r.threads << ',' << r.us_per_pair << ',' << r.pairs_per_s << '\n';
    }
  }
  if (!plots || pts.empty()) return Status::Ok();
  std::ostringstream gp;
  std::vector<std::string> workloads;
  for (const Point& p : pts) {
    if (std::find(workloads.begin(), workloads.end(), p.workload) == workloads.end()) {
      workloads.push_back(p.workload);
    }
  }
  gp << "set terminal pngcairo size " << 450 * workloads.size() << ",420 font ',10'\n";
  gp << "set output '" << dir << "/locks_cluster.png'\n";
  gp << "set multiplot layout 1," << workloads.size()
     << " title 'paper 003 on a local clf cluster: aggregate bandwidth by locking method'\n";
  int block = 0;
  for (const std::string& wl : workloads) {
    int max_clients = 0;
    for (const Point& p : pts) {
      if (p.workload == wl) max_clients = std::max(max_clients, p.clients);
    }
    gp << "set title '" << wl << "'\nset xlabel 'clients'\nset ylabel 'MB/s'\n"
       << "set key top left\nset grid\nset yrange [0:*]\nset xrange [0:" << max_clients + 1
       << "]\n";
    std::vector<std::pair<std::string, std::string>> series;
    for (LockMethod m : kMethods) {
      const std::string name = "$b" + std::to_string(block++);
      gp << name << " << EOD\n";
      for (const Point& p : pts) {
        if (p.workload == wl && p.method == m) gp << p.clients << ' ' << MBps(p) << '\n';
      }
      gp << "EOD\n";
      series.emplace_back(name, MethodName(m));
    }
    gp << "plot ";
    for (size_t i = 0; i < series.size(); ++i) {
      gp << (i ? ", " : "") << series[i].first << " using 1:2 with linespoints title '"
         << series[i].second << "'";
    }
    gp << '\n';
  }
  gp << "unset multiplot\n";
  const std::string script = dir + "/locks_cluster.gp";
  {
    std::ofstream f(script);
    f << gp.str();
  }
  Result<tools::RunResult> r = Run({"gnuplot", script}, 60000);
  if (!r.ok()) return r.status().WithContext("gnuplot (apt-get install gnuplot-nox)");
  if (r->exit_code != 0) return IoError("gnuplot failed: " + r->output);
  return Status::Ok();
}

// ---------------------------------------------------------------- worker side

// Every method moves its bytes the same way: one list request per data
// server (Client::WriteList / ReadList), so the methods differ only in locking.
std::vector<client::FileExtent> FileExtentsOf(const std::vector<LockExtent>& ext) {
  std::vector<client::FileExtent> out;
  out.reserve(ext.size());
  for (const LockExtent& e : ext) out.push_back({e.offset, e.length});
  return out;
}

Status WriteExtents(client::Client& c, Handle h, const Layout& layout,
                    const std::vector<LockExtent>& ext, const std::string& data) {
  return c.WriteListSync(h, layout, FileExtentsOf(ext), data).status();
}

Status ReadExtents(client::Client& c, Handle h, const Layout& layout,
                   const std::vector<LockExtent>& ext) {
  return c.ReadListSync(h, layout, FileExtentsOf(ext)).status();
}

Status WorkerMain(const ClusterWorkerArgs& a) {
  CLF_ASSIGN_OR_RETURN(ClusterConfig cfg, LoadClusterConfig(a.cluster_file));
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, client::Client::Open(cfg));
  client::LockClientOptions lo;
  lo.client_name = "bench-worker-" + std::to_string(a.index);
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::LockClient> lc, client::LockClient::Open(cfg, lo));
  Workload w = MakeWorkload(a.workload, a.clients, static_cast<int>(a.handles.size()));
  if (a.index < 0 || static_cast<size_t>(a.index) >= w.access.size()) return Invalid("bad index");
  const ClientAccess& acc = w.access[static_cast<size_t>(a.index)];
  std::vector<LockExtent> ext;
  for (const Extent& e : acc.extents.extents()) ext.push_back({e.offset, e.length});
  const std::string data(acc.bytes, static_cast<char>('a' + a.index % 26));
  const bool read = a.workload == "tile";
  const Extent bounds = acc.extents.Bounds();
  std::vector<Layout> layouts;
  for (uint64_t h : a.handles) {
    CLF_ASSIGN_OR_RETURN(client::Attr at, c->GetAttrSync(h));
    layouts.push_back(at.layout);
    // Warm up the lock session and the data connections to every server (untimed).
    CLF_ASSIGN_OR_RETURN(client::LockConflict tc,
                         lc->TestList(h, {ext.front()}, LockMode::kExclusive, 1));
    (void)tc;
    for (uint32_t s = 0; s < cfg.size(); ++s) {
      (void)c->ReadSync(h, at.layout, uint64_t{s} * at.layout.stripe_size, 1);
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  char buf[8];
  if (std::fgets(buf, sizeof buf, stdin) == nullptr) return Status::Ok();  // driver gone
  const uint64_t owner = 1;
  double lock_s = 0;
  auto timed = [&lock_s](auto fn) {
    const int64_t t0 = MonoNs();
    auto r = fn();
    lock_s += static_cast<double>(MonoNs() - t0) / 1e9;
    return r;
  };
  for (size_t f = 0; f < a.handles.size(); ++f) {
    const Handle h = a.handles[f];
    const Layout& layout = layouts[f];
    auto io = [&] {
      if (read) return ReadExtents(*c, h, layout, ext);
      CLF_RETURN_IF_ERROR(WriteExtents(*c, h, layout, ext, data));
      // --sync: the data is on the servers' disks before the lock is released.
      return a.sync ? c->SyncSync(h, layout) : Status::Ok();
    };
    if (a.method == "none") {
      CLF_RETURN_IF_ERROR(io());
      continue;
    }
    if (a.method == "list" && !read && !a.sync) {
      // MPI-IO atomic mode through libclf: list lock + writes + release in one call.
      CLF_RETURN_IF_ERROR(lc->AtomicWriteList(*c, h, layout, ext, data, owner));
      continue;
    }
    Result<HeldLock> l = timed([&] {
      if (a.method == "file") return lc->LockWholeFile(h, LockMode::kExclusive, owner);
      if (a.method == "range") {
        return lc->LockRange(h, bounds.offset, bounds.length, LockMode::kExclusive, owner);
      }
      return lc->LockList(h, ext, LockMode::kExclusive, owner);
    });
    CLF_RETURN_IF_ERROR(l.status());
    Status st = io();
    Status u = timed([&] { return lc->Unlock(*l); });
    CLF_RETURN_IF_ERROR(st);
    CLF_RETURN_IF_ERROR(u);
  }
  std::printf("done %lld %.6f\n", static_cast<long long>(MonoNs()), lock_s);
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace

int RunClusterWorker(const ClusterWorkerArgs& a) {
  log::Init("clf-bench-worker", "warn");  // stderr: stdout is the driver's channel
  Status s = WorkerMain(a);
  if (!s.ok()) {
    std::printf("error %s\n", s.ToString().c_str());
    std::fflush(stdout);
    return 1;
  }
  return 0;
}

namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "clf bench locks --cluster: %s\n", s.ToString().c_str());
  return 1;
}

// What the options ask for, --quick applied.
struct BenchPlan {
  std::vector<int> clients;  // 3-D block and FLASH client counts
  int repeat = 1;
  int frames = 1;
  int max_clients = 0;  // worker processes at most (the tile reader's 6 if it runs)
};

BenchPlan PlanOf(const ClusterBenchOptions& o) {
  BenchPlan p;
  p.clients = o.quick ? std::vector<int>{1, 2} : o.clients;
  p.repeat = o.quick ? 1 : std::max(1, o.repeat);
  p.frames = o.quick ? 1 : o.frames;
  for (int n : p.clients) p.max_clients = std::max(p.max_clients, n);
  if (o.workloads.empty() ||
      std::find(o.workloads.begin(), o.workloads.end(), "tile") != o.workloads.end()) {
    p.max_clients = std::max(p.max_clients, 6);  // the tile reader's
  }
  return p;
}

// While it lives, SIGINT and SIGTERM set g_stop (installed without
// SA_RESTART: blocked reads return EINTR); the previous handlers come back
// at its end.
class StopOnSignals {
 public:
  StopOnSignals() {
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// The clfd processes, on loopback or each in a network namespace. *cluster is
// set also when the start failed: its destructor removes what was made.
Status StartCluster(const ClusterBenchOptions& o, int max_clients,
                    std::unique_ptr<BenchCluster>* cluster) {
  if (o.netns) {
    auto nc = std::make_unique<NetnsCluster>();
    Status started = nc->Start(o.servers, max_clients, o.rate,
                               o.server_rate.empty() ? o.rate : o.server_rate, o.burst);
    *cluster = std::move(nc);
    return started;
  }
  auto lc = std::make_unique<LocalCluster>();
  Status started = lc->Start(o.servers);
  *cluster = std::move(lc);
  return started;
}

// The line saying what runs where. `link` and `server_link` are read with --netns only.
void PrintSetup(const ClusterBenchOptions& o, const BenchPlan& plan, const Result<double>& link,
                const Result<double>& server_link) {
  if (o.netns) {
    std::printf(
        "clf bench locks --cluster --netns: %d clfd and up to %d worker processes (libclf Client "
        "+ LockClient), each in its own network namespace; tc tbf per link: clients %s (%.1f MB/s), "
        "servers %s (%.1f MB/s); client burst %s; %u cores; exclusive locks; %d file(s) per client per "
        "run; median of %d run(s)%s\n",
        o.servers, plan.max_clients, o.rate.c_str(), *link,
        (o.server_rate.empty() ? o.rate : o.server_rate).c_str(), *server_link, o.burst.c_str(),
        std::thread::hardware_concurrency(), std::max(1, o.files), plan.repeat,
        o.sync ? ", writers sync before unlocking" : "");
  } else {
    std::printf(
        "clf bench locks --cluster: %d clfd on loopback, %u cores, one worker process per client "
        "(libclf Client + LockClient), exclusive locks, median of %d run(s)%s\n",
        o.servers, std::thread::hardware_concurrency(), plan.repeat,
        o.sync ? ", writers sync before unlocking" : "");
  }
  std::fflush(stdout);
}

// The first of --workloads that is not 3d-block, flash or tile ("": none).
std::string UnknownWorkload(const ClusterBenchOptions& o) {
  for (const std::string& name : o.workloads) {
    if (name != "3d-block" && name != "flash" && name != "tile") return name;
  }
  return "";
}

// The workloads to run, in order: 3-D block and FLASH per client count, then
// the tile reader; none with --skip-workloads.
std::vector<Workload> WorkloadsOf(const ClusterBenchOptions& o, const BenchPlan& plan) {
  std::vector<Workload> workloads;
  if (o.skip_workloads) return workloads;
  auto wanted = [&o](const char* name) {
    return o.workloads.empty() ||
           std::find(o.workloads.begin(), o.workloads.end(), name) != o.workloads.end();
  };
  if (wanted("3d-block")) {
    for (int n : plan.clients) workloads.push_back(ThreeDBlockDims(n));
  }
  if (wanted("flash")) {
    for (int n : plan.clients) workloads.push_back(Flash(n));
  }
  for (Workload& w : workloads) w.files = std::max(1, o.files);
  if (wanted("tile")) workloads.push_back(TileReader(plan.frames));
  return workloads;
}

// `repeat` runs of one workload with one method: the median run, printed to
// stderr as it ends.
Result<Point> MeasurePoint(client::Client& c, const BenchCluster& cluster, const Workload& w,
                           LockMethod m, int repeat, bool sync) {
  Point p;
  p.workload = w.name;
  p.clients = w.clients;
  p.method = m;
  std::vector<RunResult> runs;
  for (int r = 0; r < repeat; ++r) {
    CLF_ASSIGN_OR_RETURN(RunResult rr,
                         RunOnce(c, cluster, w, m, w.name + "-" + MethodName(m), sync));
    runs.push_back(rr);
    p.all.push_back(rr.seconds);
  }
  std::sort(runs.begin(), runs.end(),
            [](const RunResult& x, const RunResult& y) { return x.seconds < y.seconds; });
  p.r = runs[runs.size() / 2];
  std::fprintf(stderr, "  %-8s clients=%-2d %-5s %8.3f s  %8.1f MB/s  (lock calls %.3f s)\n",
               w.name.c_str(), w.clients, MethodName(m), p.r.seconds, MBps(p), p.r.lock_seconds);
  return p;
}

// The lock service alone (MeasureRaw), printed as a table.
Result<std::vector<RawRow>> MeasureAndPrintRaw(client::Client& c, const std::string& cluster_file,
                                               bool quick) {
  CLF_ASSIGN_OR_RETURN(std::vector<RawRow> raw, MeasureRaw(c, cluster_file, quick ? 0.3 : 2.0));
  std::printf(
      "\nLock service alone: 1-extent exclusive acquire + release (try mode), threads "
      "in one process; grpc-getattr = two GetAttr calls, the RPC floor\n");
  std::printf("  %-13s %7s %14s %14s\n", "path", "threads", "us per pair", "pairs/s");
  for (const RawRow& x : raw) {
    std::printf("  %-13s %7d %14.2f %14.0f\n", x.path.c_str(), x.threads, x.us_per_pair,
                x.pairs_per_s);
  }
  return raw;
}

}  // namespace

// Options checked -> cluster started -> every (workload, method) point ->
// tables -> the lock service alone -> CSV and plots.
int RunClusterBench(const ClusterBenchOptions& o) {
  log::Init("clf-bench", "warn");
  const BenchPlan plan = PlanOf(o);
  if (o.netns && (plan.max_clients > 64 || o.servers < 1 || o.servers > 32)) {
    std::fprintf(stderr, "clf bench locks --cluster --netns: at most 64 clients and 32 servers\n");
    return 1;
  }
  Result<double> link = RateMBs(o.rate);
  Result<double> server_link = RateMBs(o.server_rate.empty() ? o.rate : o.server_rate);
  if (o.netns && (!link.ok() || !server_link.ok())) {
    return Fail(!link.ok() ? link.status() : server_link.status());
  }
  // Before the cluster: a signal during its teardown only sets g_stop.
  StopOnSignals stop_on_signals;
  std::unique_ptr<BenchCluster> cluster;
  if (Status started = StartCluster(o, plan.max_clients, &cluster); !started.ok()) {
    return Fail(started);
  }
  Result<std::unique_ptr<client::Client>> c = client::Client::Open(cluster->cluster_file());
  if (!c.ok()) return Fail(c.status());
  PrintSetup(o, plan, link, server_link);
  if (std::string bad = UnknownWorkload(o); !bad.empty()) {
    std::fprintf(stderr, "clf bench locks --cluster: unknown workload %s\n", bad.c_str());
    return 1;
  }
  std::vector<Point> pts;
  for (const Workload& w : WorkloadsOf(o, plan)) {
    for (LockMethod m : kMethods) {
      Result<Point> p = MeasurePoint(**c, *cluster, w, m, plan.repeat, o.sync);
      if (!p.ok()) {
        std::fprintf(stderr, "clf bench locks --cluster: %s %d %s: %s\n", w.name.c_str(), w.clients,
                     MethodName(m), p.status().ToString().c_str());
        return 1;
      }
      pts.push_back(std::move(*p));
    }
  }
  for (const char* wl : {"3d-block", "flash", "tile"}) PrintTable(pts, wl);

  std::vector<RawRow> raw;
  if (!o.skip_raw) {
    Result<std::vector<RawRow>> r = MeasureAndPrintRaw(**c, cluster->cluster_file(), o.quick);
    if (!r.ok()) {
      std::fprintf(stderr, "clf bench locks --cluster: raw: %s\n", r.status().ToString().c_str());
      return 1;
    }
    raw = std::move(*r);
  }
  if (!o.out.empty()) {
    if (Status s = WriteOutputs(o.out, pts, raw, o.plots); !s.ok()) return Fail(s);
    std::printf("\nwrote %s/locks_cluster.csv%s\n", o.out.c_str(),
                o.plots && !pts.empty() ? " and locks_cluster.png" : "");
  }
  return 0;
}

}  // namespace clf::tools::bench
