// clf bench sched: paper 000 §7.1 on real processes. N clients and N clfd,
// each in its own network namespace, joined by veth pairs to a bridge in a
// namespace of its own; every veth end is shaped by tc TBF to a fixed rate
// (both directions of each node's "NIC"). Each client process (a worker mode
// of this binary, `clf bench sched-worker`, using libclf) writes, then reads,
// its own region of one shared file striped over all servers in 64 KiB units,
// with one order policy and schedule block size b. Aggregate throughput per
// (policy, b) goes to DIR/sched.csv and DIR/sched.png, next to `clf sim
// paper000`'s prediction for the same setting.
//
// Everything the bench creates (namespaces, veths, the bridge, processes, the
// temporary folder) is removed on exit, also after an error or SIGINT/SIGTERM.
// Namespace names start with "clfsb<pid>-"; `--cleanup` removes those left by
// a bench that was killed with SIGKILL.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "common/sched_settings.h"
#include "tools/bench/bench_files.h"
#include "tools/bench/netns_cluster.h"
#include "tools/bench/netns_testbed.h"
#include "tools/commands.h"
#include "tools/process_util.h"
#include "tools/sim/experiments.h"
#include "tools/sim/plots.h"

namespace clf::tools {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }





// The byte a client writes at file offset x (checked when reading back).
char PatternByte(uint64_t x) {
  uint64_t z = (x >> 3) * 0x9e3779b97f4a7c15ULL;
  return static_cast<char>((z >> 56) ^ (x & 7));
}

// ------------------------------------------------------------------ worker

struct WorkerArgs {
  std::string cluster, dir = "/sched", file, sync_dir, policy = "hash";
  uint32_t rank = 0, window = 1, servers = 8;
  uint64_t offset = 0, bytes = 0, block = 0, stripe = 64 << 10;
  bool setup = false;
};

Status WorkerSetup(client::Client& c, const WorkerArgs& a) {
  // The servers may still be starting: retry for a while.
  Result<client::Attr> dir = Unavailable("not tried");
  for (int i = 0; i < 600 && !g_stop.load(); ++i) {
    client::CreateArgs ca;
    ca.type = client::FileType::kDirectory;
    ca.mode = 0755;
    ca.exclusive = false;
    dir = c.CreateSync(c.root(), a.dir.substr(1), ca);
    if (dir.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!dir.ok()) return dir.status().WithContext("create " + a.dir);
  client::SetAttrArgs sa;
  sa.valid = client::kSetLayout;
  sa.layout = Layout{static_cast<uint32_t>(a.stripe), a.servers, 0, 1};
  return c.SetAttrSync(dir->handle, sa).status().WithContext("set the layout of " + a.dir);
}

Status WorkerRun(const WorkerArgs& a) {
  client::ClientOptions o;
  o.rpc_timeout_ms = 300000;  // a first-IOS read at small b queues long at the servers
  o.sched = a.policy;
  o.sched_block = a.block;
  o.sched_window = a.window;
  o.sched_rank = a.rank;
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, client::Client::Open(a.cluster, o));
  if (a.setup) return WorkerSetup(*c, a);
  CLF_ASSIGN_OR_RETURN(client::Attr dir, c->ResolvePath(a.dir));
  client::CreateArgs ca;
  ca.exclusive = false;
  CLF_ASSIGN_OR_RETURN(client::Attr f, c->CreateSync(dir.handle, a.file, ca));
  std::string data(a.bytes, '\0');
  for (uint64_t i = 0; i < a.bytes; ++i) data[i] = PatternByte(a.offset + i);
  // Connect to every server before the clock starts (a small read each).
  for (uint32_t k = 0; k < a.servers; ++k) {
    CLF_RETURN_IF_ERROR(c->ReadSync(f.handle, f.layout, a.offset + k * a.stripe, 4096).status());
  }
  const std::string me = std::to_string(a.rank);
  CLF_RETURN_IF_ERROR(TouchFile(a.sync_dir + "/ready." + me));
  CLF_RETURN_IF_ERROR(WaitForFile(a.sync_dir + "/go-write", 600000, g_stop));
  const int64_t w0 = MonoNs();
  std::promise<Result<uint64_t>> wp;
  c->Write(f.handle, f.layout, a.offset, std::move(data),
           [&wp](Result<uint64_t> r) { wp.set_value(std::move(r)); });
  Result<uint64_t> wrote = wp.get_future().get();
  const int64_t w1 = MonoNs();
  CLF_RETURN_IF_ERROR(wrote.status().WithContext("write"));
  CLF_RETURN_IF_ERROR(
      TouchFile(a.sync_dir + "/wdone." + me, std::to_string(w0) + " " + std::to_string(w1)));
  CLF_RETURN_IF_ERROR(WaitForFile(a.sync_dir + "/go-read", 600000, g_stop));
  const int64_t r0 = MonoNs();
  Result<std::string> got = c->ReadSync(f.handle, f.layout, a.offset, a.bytes);
  const int64_t r1 = MonoNs();
  CLF_RETURN_IF_ERROR(got.status().WithContext("read"));
  uint64_t bad = 0;
  for (uint64_t i = 0; i < a.bytes; ++i) bad += (*got)[i] != PatternByte(a.offset + i);
  client::ReportWriteArgs rw;
  rw.wrote = true;
  rw.size = a.offset + a.bytes;
  c->ReportWriteSync(f.handle, rw).status().IgnoreError();
  return TouchFile(a.sync_dir + "/rdone." + me,
               std::to_string(r0) + " " + std::to_string(r1) + " " + std::to_string(bad));
}

// ------------------------------------------------------------------ coordinator

struct Options {
  std::string out;
  int clients = 8;
  int servers = 8;
  int mib = 8;                   // per client
  std::string rate = "100mbit";  // tc TBF rate of every veth end
  std::vector<std::string> policies = {"first-ios", "random-ios", "hash-ios"};
  std::vector<std::string> blocks = {"4K",   "8K",   "16K", "32K", "64K", "128K",
                                     "256K", "512K", "1M",  "2M",  "4M"};
  std::string stripe = "64K";  // paper 000: file block size 64 KB
  uint32_t window = 1;
  uint32_t server_slots = 1;
  int reps = 1;
  bool no_plots = false;
  bool cleanup = false;
};

struct Point {
  std::string policy;
  uint64_t block = 0;
  double write_mb_s = 0, read_mb_s = 0;
  double write_s = 0, read_s = 0;
  uint64_t bad_bytes = 0;
};

// One run of a (policy, block) point: its rendezvous folder, its file, and
// the bytes each client writes and reads.
struct PointRun {
  std::string sync_dir, file;
  uint64_t bytes = 0;
};

// One worker per client, each in its client's namespace, tracked by `tb` and
// appended to *workers as it starts.
Status SpawnWorkers(Testbed& tb, const Options& o, const std::string& self,
                    const std::string& cluster, const std::string& tmp, const std::string& policy,
                    uint64_t block, uint64_t stripe, const PointRun& run,
                    std::vector<pid_t>* workers) {
  for (int i = 0; i < o.clients; ++i) {
    SpawnOptions so;
    so.stdout_path = tmp + "/worker-" + std::to_string(i) + ".log";
    CLF_ASSIGN_OR_RETURN(pid_t pid, Spawn({"ip",
                                           "netns",
                                           "exec",
                                           tb.prefix() + "-c" + std::to_string(i),
                                           self,
                                           "bench",
                                           "sched-worker",
                                           "--cluster",
                                           cluster,
                                           "--rank",
                                           std::to_string(i),
                                           "--file",
                                           run.file,
                                           "--offset",
                                           std::to_string(uint64_t(i) * run.bytes),
                                           "--bytes",
                                           std::to_string(run.bytes),
                                           "--policy",
                                           policy,
                                           "--block",
                                           std::to_string(block),
                                           "--window",
                                           std::to_string(o.window),
                                           "--servers",
                                           std::to_string(o.servers),
                                           "--stripe",
                                           std::to_string(stripe),
                                           "--sync-dir",
                                           run.sync_dir},
                                          so));
    workers->push_back(pid);
    tb.Track(pid);
  }
  return Status::Ok();
}

// Waits until every worker has reported `what` (the file WHAT.<rank> in
// `sync_dir`), at most 600 s each; a worker that exits first is an error.
Status WaitAllReported(const std::vector<pid_t>& workers, const std::string& sync_dir,
                       const std::string& tmp, const std::string& what) {
  for (size_t i = 0; i < workers.size(); ++i) {
    const std::string p = sync_dir + "/" + what + "." + std::to_string(i);
    const int64_t end = MonoNs() + int64_t{600} * 1000000000;
    while (!FileExists(p)) {
      if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
      if (!ProcessAlive(workers[i]) || MonoNs() > end) {
        return IoError("worker " + std::to_string(i) + " did not report '" + what + "' (see " +
                       tmp + "/worker-" + std::to_string(i) + ".log)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return Status::Ok();
}

// The run's phases: all ready -> go-write -> all written -> go-read -> all
// read, then the workers reaped (after a failure they are left to the caller).
Status DriveRun(const std::vector<pid_t>& workers, const std::string& sync_dir,
                const std::string& tmp) {
  Status st = WaitAllReported(workers, sync_dir, tmp, "ready");
  if (st.ok()) st = TouchFile(sync_dir + "/go-write");
  if (st.ok()) st = WaitAllReported(workers, sync_dir, tmp, "wdone");
  if (st.ok()) st = TouchFile(sync_dir + "/go-read");
  if (st.ok()) st = WaitAllReported(workers, sync_dir, tmp, "rdone");
  for (pid_t p : workers) {
    if (st.ok()) WaitChild(p, 30000);
  }
  return st;
}

// The point from the workers' reports: each phase from its first client's
// start to its last client's end.
Result<Point> PointFromReports(const Options& o, const PointRun& run, const std::string& policy,
                               uint64_t block) {
  int64_t w0 = INT64_MAX, w1 = 0, r0 = INT64_MAX, r1 = 0;
  Point pt{policy, block};
  for (int i = 0; i < o.clients; ++i) {
    std::vector<int64_t> w = ReadNumbers(run.sync_dir + "/wdone." + std::to_string(i));
    std::vector<int64_t> r = ReadNumbers(run.sync_dir + "/rdone." + std::to_string(i));
    if (w.size() != 2 || r.size() != 3)
      return IoError("malformed report of worker " + std::to_string(i));
    w0 = std::min(w0, w[0]);
    w1 = std::max(w1, w[1]);
    r0 = std::min(r0, r[0]);
    r1 = std::max(r1, r[1]);
    pt.bad_bytes += static_cast<uint64_t>(r[2]);
  }
  const double total = double(run.bytes) * o.clients;
  pt.write_s = double(w1 - w0) / 1e9;
  pt.read_s = double(r1 - r0) / 1e9;
  pt.write_mb_s = total / 1e6 / pt.write_s;
  pt.read_mb_s = total / 1e6 / pt.read_s;
  return pt;
}

// One run of (policy, block): the workers write, then read, their regions
// of one file; the workers are stopped whatever happens.
Result<Point> RunPoint(Testbed& tb, const Options& o, const std::string& self,
                       const std::string& cluster, const std::string& tmp,
                       const std::string& policy, uint64_t block, int rep, uint64_t stripe) {
  PointRun run;
  run.sync_dir = tmp + "/run-" + policy + "-" + std::to_string(block) + "-" + std::to_string(rep);
  std::filesystem::create_directories(run.sync_dir);
  run.bytes = uint64_t(o.mib) << 20;
  run.file = "f-" + policy + "-" + std::to_string(block) + "-" + std::to_string(rep);
  std::vector<pid_t> workers;
  Status st = SpawnWorkers(tb, o, self, cluster, tmp, policy, block, stripe, run, &workers);
  if (st.ok()) st = DriveRun(workers, run.sync_dir, tmp);
  for (pid_t p : workers) {
    StopProcess(p, 2000);
    tb.Forget(p);
  }
  CLF_RETURN_IF_ERROR(st);
  return PointFromReports(o, run, policy, block);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "clf bench sched: %s\n", s.ToString().c_str());
  return 1;
}

// The options checked and parsed.
struct Parsed {
  double link_mb_s = 0;  // each link's rate
  std::vector<uint64_t> blocks;
  uint64_t stripe = 0;
  std::vector<std::string> policies;  // canonical names
};

Result<Parsed> ParseOptions(const Options& o) {
  if (o.clients < 1 || o.servers < 1 || o.clients > 100 || o.servers > 80) {
    return Invalid("1..100 clients and 1..80 servers");
  }
  Parsed p;
  CLF_ASSIGN_OR_RETURN(p.link_mb_s, RateMBs(o.rate));
  for (const std::string& b : o.blocks) {
    CLF_ASSIGN_OR_RETURN(uint64_t v, ParseByteSize(b));
    CLF_RETURN_IF_ERROR(ValidateSchedBlock(v));
    p.blocks.push_back(v);
  }
  CLF_ASSIGN_OR_RETURN(p.stripe, ParseByteSize(o.stripe));
  CLF_RETURN_IF_ERROR(ValidateLayout(Layout{static_cast<uint32_t>(p.stripe), 1, 0, 1}, 1));
  for (const std::string& name : o.policies) {
    CLF_ASSIGN_OR_RETURN(OrderPolicy pp, ParseOrderPolicy(name));
    p.policies.emplace_back(OrderPolicyName(pp));
  }
  return p;
}

constexpr const char* kSubnet = "10.77.0";  // servers .10.., clients .100..

// The testbed's nodes, then the cluster: one clfd per server namespace, and
// the bench directory (the stripe over every server) made from client 0's
// namespace. Its cluster file.
Result<std::string> StartCluster(const Options& o, const Parsed& p, Testbed& tb,
                                 const std::string& clfd, const std::string& self,
                                 const std::string& tmp) {
  CLF_RETURN_IF_ERROR(tb.Start());
  for (int k = 0; k < o.servers; ++k) {
    CLF_RETURN_IF_ERROR(tb.AddNode("s" + std::to_string(k), BenchIp(kSubnet, 10 + k), o.rate));
  }
  for (int i = 0; i < o.clients; ++i) {
    CLF_RETURN_IF_ERROR(tb.AddNode("c" + std::to_string(i), BenchIp(kSubnet, 100 + i), o.rate));
  }
  ClusterConfig cfg;
  cfg.name = "bench";
  CLF_RETURN_IF_ERROR(WriteBenchSecrets(tmp, &cfg));
  cfg.rpc_timeout_ms = 300000;
  cfg.sched_server_slots = o.server_slots;
  cfg.default_layout =
      Layout{static_cast<uint32_t>(p.stripe), static_cast<uint32_t>(o.servers), 0, 1};
  AddBenchServers(&cfg, kSubnet, o.servers, [&](int k) { return tmp + "/s" + std::to_string(k); });
  const std::string cluster = tmp + "/cluster.toml";
  CLF_RETURN_IF_ERROR(WriteFileWithMode(cluster, RenderClusterConfig(cfg), 0644));
  CLF_RETURN_IF_ERROR(StartBenchServers(tb, clfd, cluster, o.servers, [&](int k) {
                        return tmp + "/clfd-" + std::to_string(k) + ".log";
                      }).status());
  Result<RunResult> r = Run({"ip", "netns", "exec", tb.Namespace("c0"), self, "bench",
                             "sched-worker", "--setup", "--cluster", cluster, "--servers",
                             std::to_string(o.servers), "--stripe", std::to_string(p.stripe)},
                            120000);
  if (!r.ok() || r->exit_code != 0) {
    return IoError("setup failed: " + (r.ok() ? r->output : r.status().ToString()));
  }
  return cluster;
}

// Every (policy, block) point, the mean of `reps` runs, printed as it ends.
Result<std::vector<Point>> RunPoints(const Options& o, const Parsed& p, Testbed& tb,
                                     const std::string& self, const std::string& cluster,
                                     const std::string& tmp) {
  std::printf(
      "%d clients x %d MiB, %d servers, stripe %s, window %u, server read slots %u, "
      "%d rep(s)\n",
      o.clients, o.mib, o.servers, HumanBytes(p.stripe).c_str(), o.window, o.server_slots, o.reps);
  std::printf("%-11s %9s %12s %12s\n", "policy", "b (KiB)", "write MB/s", "read MB/s");
  std::vector<Point> points;
  for (const std::string& policy : p.policies) {
    for (uint64_t b : p.blocks) {
      Point sum{policy, b};
      for (int rep = 0; rep < o.reps; ++rep) {
        CLF_ASSIGN_OR_RETURN(Point pt, RunPoint(tb, o, self, cluster, tmp, policy, b, rep, p.stripe));
        sum.write_mb_s += pt.write_mb_s / o.reps;
        sum.read_mb_s += pt.read_mb_s / o.reps;
        sum.write_s += pt.write_s / o.reps;
        sum.read_s += pt.read_s / o.reps;
        sum.bad_bytes += pt.bad_bytes;
      }
      std::printf("%-11s %9llu %12.1f %12.1f%s\n", policy.c_str(),
                  static_cast<unsigned long long>(b >> 10), sum.write_mb_s, sum.read_mb_s,
                  sum.bad_bytes ? "  DATA MISMATCH" : "");
      std::fflush(stdout);
      points.push_back(sum);
      if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
    }
  }
  return points;
}

// Throughput by (policy, block); the simulator names reads "<policy>-read".
using SimRates = std::map<std::pair<std::string, int64_t>, double>;

// The simulator's prediction for the same setting (one transfer at a time per node).
Result<SimRates> Predict(const Options& o, const Parsed& p) {
  sim::Paper000Options so;
  so.clients = o.clients;
  so.servers = o.servers;
  so.bytes_per_client = int64_t(o.mib) << 20;
  so.link_mb_s = p.link_mb_s;
  so.stripe_unit = static_cast<int64_t>(p.stripe);
  so.block_bytes.assign(p.blocks.begin(), p.blocks.end());
  CLF_ASSIGN_OR_RETURN(std::vector<sim::Paper000Row> predicted, sim::RunPaper000(so));
  SimRates rates;
  for (const sim::Paper000Row& r : predicted) rates[{r.policy, r.block_bytes}] = r.throughput_mb_s;
  return rates;
}

// sched.csv, and sched.png unless --no-plots, in --out.
Status WriteOutputs(const Options& o, const Parsed& p, const std::vector<Point>& points,
                    SimRates& sim_mbs) {
  std::string csv =
      "policy,block_bytes,write_mb_s,read_mb_s,write_s,read_s,sim_write_mb_s,sim_read_mb_s,"
      "bad_bytes,clients,servers,mib_per_client,rate,link_mb_s,window,server_slots,reps,"
      "stripe_bytes\n";
  for (const Point& pt : points) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s,%llu,%.2f,%.2f,%.3f,%.3f,%.2f,%.2f,%llu,%d,%d,%d,%s,%.2f,%u,%u,%d,%llu\n",
                  pt.policy.c_str(), static_cast<unsigned long long>(pt.block), pt.write_mb_s,
                  pt.read_mb_s, pt.write_s, pt.read_s, sim_mbs[{pt.policy, int64_t(pt.block)}],
                  sim_mbs[{pt.policy + "-read", int64_t(pt.block)}],
                  static_cast<unsigned long long>(pt.bad_bytes), o.clients, o.servers, o.mib,
                  o.rate.c_str(), p.link_mb_s, o.window, o.server_slots, o.reps,
                  static_cast<unsigned long long>(p.stripe));
    csv += line;
  }
  {
    std::ofstream out(o.out + "/sched.csv");
    out << csv;
    if (!out) return IoError("cannot write " + o.out + "/sched.csv");
  }
  std::printf("wrote %s/sched.csv\n", o.out.c_str());
  if (o.no_plots) return Status::Ok();
  std::vector<sim::SchedBenchPoint> plot;
  for (const Point& pt : points) {
    plot.push_back({pt.policy, int64_t(pt.block), pt.write_mb_s, pt.read_mb_s,
                    sim_mbs[{pt.policy, int64_t(pt.block)}],
                    sim_mbs[{pt.policy + "-read", int64_t(pt.block)}]});
  }
  char title[256];
  std::snprintf(title, sizeof title,
                "%d clients x %d MiB, %d clfd, stripe %s, netns + tbf %s (%.1f MB/s) per link, "
                "window %u",
                o.clients, o.mib, o.servers, HumanBytes(p.stripe).c_str(), o.rate.c_str(),
                p.link_mb_s, o.window);
  CLF_RETURN_IF_ERROR(sim::PlotSchedBench(o.out, plot, title, p.link_mb_s * o.clients));
  std::printf("wrote %s/sched.png\n", o.out.c_str());
  return Status::Ok();
}

int RunBench(const Options& o) {
  if (o.cleanup) return CleanupStale("clfsb");
  Result<Parsed> p = ParseOptions(o);
  if (!p.ok()) return Fail(p.status());
  Result<std::unique_ptr<BenchWork>> work = BenchWork::Start("sched", o.out, OnSignal);
  if (!work.ok()) return Fail(work.status());
  const std::string& tmp = (*work)->dir();
  std::printf("work folder %s\n", tmp.c_str());
  std::printf(
      "testbed: %d clients + %d servers, each in a network namespace, veth to a bridge, "
      "tc tbf %s (%.1f MB/s) each way\n",
      o.clients, o.servers, o.rate.c_str(), p->link_mb_s);
  std::fflush(stdout);
  Testbed tb("clfsb" + std::to_string(getpid()));
  Result<std::string> cluster = StartCluster(o, *p, tb, (*work)->clfd(), (*work)->self(), tmp);
  if (!cluster.ok()) return Fail(cluster.status());
  Result<std::vector<Point>> points = RunPoints(o, *p, tb, (*work)->self(), *cluster, tmp);
  if (!points.ok()) return Fail(points.status());
  Result<SimRates> sim_mbs = Predict(o, *p);
  if (!sim_mbs.ok()) return Fail(sim_mbs.status());
  if (Status s = WriteOutputs(o, *p, *points, *sim_mbs); !s.ok()) return Fail(s);
  for (const Point& pt : *points) {
    if (pt.bad_bytes != 0) return Fail(Status(Code::kIo, "some reads returned wrong bytes"));
  }
  return 0;
}

}  // namespace

void AddBenchSchedCommand(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "sched",
      "paper 000 on real processes: clients and clfd in network namespaces, tc-shaped "
      "links, write+read throughput per order policy and schedule block size");
  cmd->add_option("--out", o->out, "directory for sched.csv and sched.png");
  cmd->add_option("--clients", o->clients, "client processes")->capture_default_str();
  cmd->add_option("--servers", o->servers, "clfd processes")->capture_default_str();
  cmd->add_option("--mib", o->mib, "MiB written and read by each client")->capture_default_str();
  cmd->add_option("--rate", o->rate, "tc tbf rate of each link end (kbit, mbit, gbit)")
      ->capture_default_str();
  cmd->add_option("--policies", o->policies, "order policies")->capture_default_str();
  cmd->add_option("--blocks", o->blocks, "schedule block sizes b")->capture_default_str();
  cmd->add_option("--stripe", o->stripe, "stripe size of the bench file")->capture_default_str();
  cmd->add_option("--window", o->window, "schedule blocks in flight per client (paper: 1)")
      ->capture_default_str();
  cmd->add_option("--server-slots", o->server_slots,
                  "reads a server serves at once (0: arrival order, no read queue)")
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "repetitions per point (mean reported)")
      ->capture_default_str();
  cmd->add_flag("--no-plots", o->no_plots, "skip the PNG");
  cmd->add_flag("--cleanup", o->cleanup, "only remove namespaces left by a killed bench");
  cmd->callback([o] { Exit(RunBench(*o)); });

  auto w = std::make_shared<WorkerArgs>();
  CLI::App* wcmd =
      bench.add_subcommand("sched-worker", "one client of `clf bench sched` (internal)");
  wcmd->group("");  // hidden from help
  wcmd->add_option("--cluster", w->cluster)->required();
  wcmd->add_flag("--setup", w->setup);
  wcmd->add_option("--rank", w->rank);
  wcmd->add_option("--file", w->file);
  wcmd->add_option("--offset", w->offset);
  wcmd->add_option("--bytes", w->bytes);
  wcmd->add_option("--policy", w->policy);
  wcmd->add_option("--block", w->block);
  wcmd->add_option("--window", w->window);
  wcmd->add_option("--servers", w->servers);
  wcmd->add_option("--stripe", w->stripe);
  wcmd->add_option("--sync-dir", w->sync_dir);
  wcmd->callback([w] {
    signal(SIGPIPE, SIG_IGN);
    Status s = WorkerRun(*w);
    if (!s.ok()) {
      std::fprintf(stderr, "sched-worker %u: %s\n", w->rank, s.ToString().c_str());
      Exit(1);
    }
  });
}

}  // namespace clf::tools
