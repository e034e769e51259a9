// clf bench replicas: paper 001 (Chen & Wu, parallel I/O scheduling with
// replicas) on real processes. For S servers: S clfd and S client processes
// (one compute node per I/O node, the paper's ratio 1:1), each in its own
// network namespace on a tc-shaped veth (tools/bench/netns_testbed.h); every
// file has two copies (the cluster's default layout: replicas = 2, one stripe
// unit per paper "MB" over all S servers).
//
// Each instance is a paper 001 batch (scheduler::MakePaper001Problem: random
// or all-to-all pattern, uniform or variable sizes; variable sizes scaled to
// 1..--max-mb so a default run fits in minutes). Compute node i is client
// i; its transfer (primary p, k MB) becomes the k units' worth of bytes of its
// own file that live on server p (p's stripe units are every S-th unit). A
// client first writes those bytes, then for each read heuristic opens a
// client with ClientOptions::read_sched = the heuristic and reads all its
// transfers with ONE ReadList (one request per primary, each request one
// transfer of the paper), checking every byte. The finish time of a heuristic
// is the last client's end minus the first client's start. The heuristics run
// in a rotated order per instance, so drift over time favours none.
//
// DIR/replicas.csv holds, per (servers, pattern, sizes, heuristic), the mean
// measured finish time, its ratio to EATF's, the ratio `clf sim` predicts for
// the same instances (one central plan, one transfer at a time per node) and
// the exact optimum's ratio where the instance is small enough; DIR/replicas.png
// draws measured against predicted ratios. See docs/scheduler.md.
//
// Everything the bench creates (namespaces, veths, the bridge, processes, the
// temporary folder) is removed on exit, also after an error or SIGINT/SIGTERM.
// Namespace names start with "clfrb<pid>-"; `--cleanup` removes those left by
// a bench that was killed with SIGKILL.
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
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/sched_settings.h"
#include "scheduler/exact_solver.h"
#include "scheduler/rng.h"
#include "scheduler/scheduler.h"
#include "scheduler/workload.h"
#include "tools/bench/bench_files.h"
#include "tools/bench/netns_cluster.h"
#include "tools/bench/netns_testbed.h"
#include "tools/commands.h"
#include "tools/process_util.h"

namespace clf::tools {
namespace {

constexpr const char* kSubnet = "10.77.0";  // servers .10.., clients .100..

using client::FileExtent;
using scheduler::Problem;
using scheduler::RequestPattern;
using scheduler::SizeClass;
using scheduler::Time;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }





// The byte stored at offset x of the file salted `salt` (one salt per client
// file, so bytes served from another client's file are caught too).
char PatternByte(uint64_t salt, uint64_t x) {
  uint64_t z = ((x >> 3) + salt * 0x100000001b3ULL) * 0x9e3779b97f4a7c15ULL;
  return static_cast<char>((z >> 56) ^ (x & 7));
}


// ------------------------------------------------------------------ transfers -> extents

// One transfer of a compute node: `bytes` of its file stored on primary server `primary`.
struct Want {
  uint32_t primary = 0;
  uint64_t bytes = 0;
};

// Worker argv form: "p:bytes".
std::string FormatWant(const Want& w) {
  return std::to_string(w.primary) + ":" + std::to_string(w.bytes);
}

Result<Want> ParseWant(const std::string& s) {
  Want w;
  unsigned long long bytes = 0;
  if (std::sscanf(s.c_str(), "%u:%llu", &w.primary, &bytes) != 2 || bytes == 0) {
    return Invalid("bad transfer '" + s + "' (want primary:bytes)");
  }
  w.bytes = bytes;
  return w;
}

// The extents holding `w.bytes` bytes on server w.primary, starting at that
// server's `first`-th stripe unit of the file. Stripe unit u lives on server
// (first_server + u mod count) mod n, so w.primary's units are every
// count-th unit from its stripe index on; each is checked against MapRange,
// the layout math the data path uses.
Result<std::vector<FileExtent>> ExtentsOnServer(const Layout& l, uint32_t n, const Want& w,
                                                uint64_t first) {
  const int idx = StripeIndex(l, n, w.primary);
  if (idx < 0) return Invalid("server " + std::to_string(w.primary) + " holds no stripe units");
  const uint64_t ss = l.stripe_size;
  std::vector<FileExtent> out;
  for (uint64_t done = 0, j = first; done < w.bytes; ++j) {
    const uint64_t len = std::min(ss, w.bytes - done);
    const uint64_t off = (j * l.stripe_count + static_cast<uint64_t>(idx)) * ss;
    const std::vector<Piece> pieces = MapRange(l, n, off, len);
    if (pieces.size() != 1 || pieces[0].server != w.primary) {
      return Internal("stripe math disagrees with MapRange at offset " + std::to_string(off));
    }
    out.push_back(FileExtent{off, len});
    done += len;
  }
  return out;
}

// Every transfer's extents in one list; a second transfer on the same primary
// (the generators make none) continues after the first one's units.
Result<std::vector<FileExtent>> ExtentsOf(const Layout& l, uint32_t n,
                                          const std::vector<Want>& wants) {
  std::vector<uint64_t> next_unit(n, 0);
  std::vector<FileExtent> all;
  for (const Want& w : wants) {
    if (w.primary >= n) return Invalid("primary out of range");
    CLF_ASSIGN_OR_RETURN(std::vector<FileExtent> e, ExtentsOnServer(l, n, w, next_unit[w.primary]));
    next_unit[w.primary] += e.size();
    all.insert(all.end(), e.begin(), e.end());
  }
  return all;
}

// ------------------------------------------------------------------ worker

struct WorkerArgs {
  std::string cluster, dir = "/rb", file, sync_dir;
  uint32_t rank = 0, servers = 4, stripe = 16 << 10;
  uint64_t salt = 0;
  std::vector<std::string> wants;       // "p:bytes", one per transfer
  std::vector<std::string> heuristics;  // read_sched per round, in run order
  bool setup = false;
};

Result<std::unique_ptr<client::Client>> OpenClient(const WorkerArgs& a,
                                                   const std::string& read_sched) {
  client::ClientOptions o;
  o.rpc_timeout_ms = 300000;
  o.read_sched = read_sched;
  o.sched_rank = a.rank;
  return client::Client::Open(a.cluster, o);
}

// Setup mode: waits until every server answers, then makes the bench
// directory with the replicated layout (explicitly, whatever the root has).
Status WorkerSetup(const WorkerArgs& a) {
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, OpenClient(a, ""));
  Result<client::StatFs> fs = Unavailable("not tried");
  for (int i = 0; i < 600 && !g_stop.load(); ++i) {
    fs = c->StatFsSync();
    if (fs.ok() && fs->servers_up == a.servers) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!fs.ok() || fs->servers_up != a.servers) return Unavailable("servers did not come up");
  client::CreateArgs ca;
  ca.type = client::FileType::kDirectory;
  ca.mode = 0755;
  ca.exclusive = false;
  CLF_ASSIGN_OR_RETURN(client::Attr dir, c->CreateSync(c->root(), a.dir.substr(1), ca));
  client::SetAttrArgs sa;
  sa.valid = client::kSetLayout;
  sa.layout = Layout{a.stripe, a.servers, 0, 2};
  return c->SetAttrSync(dir.handle, sa).status().WithContext("set the layout of " + a.dir);
}

// This client's file: its handle, the layout reads use, and the extents of its transfers.
struct BenchFile {
  Handle handle = 0;
  Layout layout;
  std::vector<FileExtent> extents;
};

std::string PatternOf(const std::vector<FileExtent>& extents, uint64_t salt) {
  uint64_t total = 0;
  for (const FileExtent& e : extents) total += e.length;
  std::string data;
  data.reserve(total);
  for (const FileExtent& e : extents) {
    for (uint64_t x = e.offset; x < e.offset + e.length; ++x) data.push_back(PatternByte(salt, x));
  }
  return data;
}

// Creates the file and writes exactly the bytes of its transfers (the rest are holes).
Result<BenchFile> CreateAndFill(client::Client& c, const WorkerArgs& a,
                                const std::vector<Want>& wants) {
  CLF_ASSIGN_OR_RETURN(client::Attr dir, c.ResolvePath(a.dir));
  CLF_ASSIGN_OR_RETURN(client::Attr f, c.CreateSync(dir.handle, a.file, client::CreateArgs{}));
  if (f.layout.replicas != 2 || f.layout.stripe_count != a.servers) {
    return Invalid("the bench file is not striped over every server with 2 copies");
  }
  BenchFile bf{f.handle, f.layout, {}};
  bf.layout.read_sched = 0;  // not set: the client's read_sched decides
  CLF_ASSIGN_OR_RETURN(bf.extents, ExtentsOf(bf.layout, a.servers, wants));
  CLF_RETURN_IF_ERROR(
      c.WriteListSync(bf.handle, bf.layout, bf.extents, PatternOf(bf.extents, a.salt)).status());
  client::ReportWriteArgs rw;
  rw.wrote = true;
  for (const FileExtent& e : bf.extents) rw.size = std::max(rw.size, e.offset + e.length);
  CLF_ASSIGN_OR_RETURN(client::Attr after, c.ReportWriteSync(bf.handle, rw));
  if (!after.stale_replicas.empty()) return IoError("a copy missed the setup write");
  return bf;
}

// Connects a fresh client to every server before the clock starts: a 4 KiB
// read of each server's first unit, from its primary copy.
Status Warm(client::Client& c, const BenchFile& f, uint32_t n) {
  Layout l = f.layout;
  l.read_sched = ReadSchedCode(ReadSched::kPrimary);
  for (ServerId s = 0; s < n; ++s) {
    const uint64_t off = uint64_t(StripeIndex(l, n, s)) * l.stripe_size;
    CLF_RETURN_IF_ERROR(c.ReadSync(f.handle, l, off, 4096).status());
  }
  return Status::Ok();
}

uint64_t CountBad(const std::string& got, const std::vector<FileExtent>& extents, uint64_t salt) {
  uint64_t bad = 0, pos = 0;
  for (const FileExtent& e : extents) {
    for (uint64_t x = e.offset; x < e.offset + e.length; ++x, ++pos) {
      bad += pos >= got.size() || got[pos] != PatternByte(salt, x);
    }
  }
  return bad + (got.size() > pos ? got.size() - pos : 0);
}

// Round r: a client with heuristic heuristics[r] reads every transfer in one
// ReadList between the go file and its report "start end bad_bytes".
Status WorkerRound(const WorkerArgs& a, const BenchFile& f, size_t r) {
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, OpenClient(a, a.heuristics[r]));
  CLF_RETURN_IF_ERROR(Warm(*c, f, a.servers));
  const std::string round = std::to_string(r);
  const std::string me = round + "." + std::to_string(a.rank);
  CLF_RETURN_IF_ERROR(TouchFile(a.sync_dir + "/ready-" + me));
  CLF_RETURN_IF_ERROR(WaitForFile(a.sync_dir + "/go-" + round, 600000, g_stop));
  const int64_t t0 = MonoNs();
  Result<std::string> got = c->ReadListSync(f.handle, f.layout, f.extents);
  const int64_t t1 = MonoNs();
  CLF_RETURN_IF_ERROR(got.status().WithContext("read with " + a.heuristics[r]));
  const uint64_t bad = CountBad(*got, f.extents, a.salt);
  return TouchFile(a.sync_dir + "/done-" + me,
               std::to_string(t0) + " " + std::to_string(t1) + " " + std::to_string(bad));
}

Status WorkerRun(const WorkerArgs& a) {
  if (a.setup) return WorkerSetup(a);
  std::vector<Want> wants;
  for (const std::string& s : a.wants) {
    CLF_ASSIGN_OR_RETURN(Want w, ParseWant(s));
    wants.push_back(w);
  }
  BenchFile f;
  {
    CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, OpenClient(a, ""));
    CLF_ASSIGN_OR_RETURN(f, CreateAndFill(*c, a, wants));
  }
  CLF_RETURN_IF_ERROR(TouchFile(a.sync_dir + "/ready." + std::to_string(a.rank)));
  for (size_t r = 0; r < a.heuristics.size(); ++r) CLF_RETURN_IF_ERROR(WorkerRound(a, f, r));
  return Status::Ok();
}

// ------------------------------------------------------------------ instances and predictions

struct Options {
  std::string out;
  std::vector<int> servers = {4, 8};
  std::vector<std::string> patterns = {"random", "all-to-all"};
  std::vector<std::string> sizes = {"uniform", "variable"};
  std::vector<std::string> heuristics = {"eatf",  "sjf",    "lcdf",   "lddf",
                                         "ldsdf", "random", "primary"};
  std::string unit = "16K";      // bytes per paper "MB"
  int max_mb = 512;              // variable sizes 1..1024 MB scaled to 1..max_mb
  std::string rate = "200mbit";  // tc TBF rate of every veth end
  int instances = 3;
  uint32_t server_slots = 1;  // reads a clfd serves at once: the paper's one transfer
  uint64_t seed = 1;
  bool no_plots = false;
  bool cleanup = false;
};

// One paper 001 batch, with what the model predicts for it.
struct Instance {
  Problem problem;
  std::vector<Time> predicted;  // per heuristic (Options order): the planned length
  Time optimum = -1;            // proven optimal length; -1: too large or out of budget
};

// The length of heuristic `h`'s central plan of `p` (MakeScheduler, as `clf
// sim` runs it). "primary": every transfer restricted to its primary copy,
// planned by EATF (with one copy each, a greedy earliest-start list schedule).
Result<Time> PredictLength(const Problem& p, const std::string& h, uint64_t seed) {
  Problem q = p;
  std::string name = h;
  if (h == "primary") {
    for (scheduler::Transfer& t : q.transfers) t.io_nodes.resize(1);
    name = "eatf";
  }
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::Scheduler> s,
                       scheduler::MakeScheduler(name, seed));
  CLF_ASSIGN_OR_RETURN(scheduler::Schedule plan, s->Plan(q));
  return plan.length;
}

// The exact optimum's length, or -1 when SolveExact cannot prove one within
// its bounds (more than kMaxExactTransfers transfers, or 2 million nodes).
Time OptimumLength(const Problem& p) {
  if (p.transfers.size() > static_cast<size_t>(scheduler::kMaxExactTransfers)) return -1;
  scheduler::ExactOptions eo;
  eo.max_nodes = 2'000'000;
  Result<scheduler::ExactResult> r = scheduler::SolveExact(p, eo);
  if (!r.ok() || !r->proven_optimal) return -1;
  return r->schedule.length;
}

// A seed per (point, instance), independent of the order of the loops.
uint64_t InstanceSeed(uint64_t seed, int servers, int pattern, int sizes, int instance) {
  scheduler::Rng rng(seed * 0x9e3779b97f4a7c15ULL ^ (uint64_t(servers) << 32) ^
                     (uint64_t(pattern) << 24) ^ (uint64_t(sizes) << 16) ^ uint64_t(instance));
  return rng.Next();
}

// A point of the experiment: its setting, its instances, and what was measured.
struct Point {
  int servers = 0;
  RequestPattern pattern = RequestPattern::kRandom;
  SizeClass sizes = SizeClass::kUniform;
  std::vector<Instance> instances;
  std::vector<std::vector<double>> finish_s;  // [heuristic][instance]
  uint64_t bad_bytes = 0;
};

// Variable sizes k in 1..1024 become ceil(k * max_mb / 1024): the same
// uniform spread at a fraction of the bytes (the model plans the scaled sizes).
void ScaleSizes(Problem& p, int max_mb) {
  for (scheduler::Transfer& t : p.transfers) t.size = (t.size * max_mb + 1023) / 1024;
}

Result<Instance> MakeInstance(const Point& pt, const Options& o, uint64_t seed) {
  scheduler::Rng rng(seed);
  Instance in;
  in.problem = scheduler::MakePaper001Problem(
      {pt.servers, pt.servers, pt.pattern, pt.sizes, /*replicas=*/2}, rng);
  if (pt.sizes == SizeClass::kVariable) ScaleSizes(in.problem, o.max_mb);
  const std::vector<std::string>& heuristics = o.heuristics;
  for (const std::string& h : heuristics) {
    CLF_ASSIGN_OR_RETURN(Time len, PredictLength(in.problem, h, seed));
    in.predicted.push_back(len);
  }
  in.optimum = OptimumLength(in.problem);
  return in;
}

Result<std::vector<Point>> MakePoints(const Options& o) {
  std::vector<Point> points;
  for (int s : o.servers) {
    for (const std::string& pat : o.patterns) {
      for (const std::string& sz : o.sizes) {
        Point pt;
        pt.servers = s;
        pt.pattern = pat == "random" ? RequestPattern::kRandom : RequestPattern::kAllToAll;
        pt.sizes = sz == "uniform" ? SizeClass::kUniform : SizeClass::kVariable;
        for (int i = 0; i < o.instances; ++i) {
          const uint64_t seed = InstanceSeed(o.seed, s, int(pt.pattern), int(pt.sizes), i);
          CLF_ASSIGN_OR_RETURN(Instance in, MakeInstance(pt, o, seed));
          pt.instances.push_back(std::move(in));
        }
        pt.finish_s.assign(o.heuristics.size(), {});
        points.push_back(std::move(pt));
      }
    }
  }
  return points;
}

// ------------------------------------------------------------------ coordinator

// What every step of a run needs.
struct Env {
  const Options* o = nullptr;
  Testbed* tb = nullptr;
  std::string self, clfd, tmp;
  uint64_t unit = 0;    // bytes per paper MB
  uint32_t stripe = 0;  // the unit rounded up to 4 KiB
  double link_mb_s = 0;
};

// One cluster of `servers` clfd (in namespaces s0..), stopped by the destructor.
class Cluster {
 public:
  Cluster(Env& env, int servers) : env_(env), servers_(servers) {}
  ~Cluster() {
    for (pid_t p : pids_) {
      StopProcess(p, 5000);
      env_.tb->Forget(p);
    }
  }
  Status Start();
  const std::string& file() const { return file_; }

 private:
  Status WriteConfig();
  Env& env_;
  const int servers_;
  std::string file_;
  std::vector<pid_t> pids_;
};

// Its cluster file: 2 copies of every file, one stripe unit per paper MB.
Status Cluster::WriteConfig() {
  const std::string base = env_.tmp + "/S" + std::to_string(servers_);
  ClusterConfig cfg;
  cfg.name = "bench";
  CLF_RETURN_IF_ERROR(WriteBenchSecrets(env_.tmp, &cfg));
  cfg.rpc_timeout_ms = 300000;
  cfg.sched_server_slots = env_.o->server_slots;
  cfg.default_layout = Layout{env_.stripe, static_cast<uint32_t>(servers_), 0, 2};
  AddBenchServers(&cfg, kSubnet, servers_, [&](int k) { return base + "/s" + std::to_string(k); });
  file_ = base + ".toml";
  return WriteFileWithMode(file_, RenderClusterConfig(cfg), 0644);
}

Status Cluster::Start() {
  CLF_RETURN_IF_ERROR(WriteConfig());
  CLF_ASSIGN_OR_RETURN(pids_, StartBenchServers(*env_.tb, env_.clfd, file_, servers_, [&](int k) {
                         return env_.tmp + "/clfd-S" + std::to_string(servers_) + "-" +
                                std::to_string(k) + ".log";
                       }));
  // The bench directory, from client 0's namespace, once every server answers.
  CLF_ASSIGN_OR_RETURN(RunResult r,
                       Run({"ip", "netns", "exec", env_.tb->Namespace("c0"), env_.self, "bench",
                            "replicas-worker", "--setup", "--cluster", file_, "--servers",
                            std::to_string(servers_), "--stripe", std::to_string(env_.stripe)},
                           120000));
  if (r.exit_code != 0) return IoError("cluster setup failed: " + r.output);
  return Status::Ok();
}

// The transfers of compute node `c`, as worker arguments.
std::vector<std::string> WantArgs(const Problem& p, int c, uint64_t unit) {
  std::vector<std::string> args;
  for (const scheduler::Transfer& t : p.transfers) {
    if (t.compute_node != c) continue;
    args.push_back("--want");
    args.push_back(FormatWant({static_cast<uint32_t>(t.io_nodes[0]), uint64_t(t.size) * unit}));
  }
  return args;
}

// One instance on the real system: its workers, started together per round.
class InstanceRun {
 public:
  InstanceRun(Env& env, const std::string& cluster, const std::string& tag)
      : env_(env), cluster_(cluster), tag_(tag), sync_(env.tmp + "/run-" + tag) {}
  ~InstanceRun() {
    for (pid_t p : workers_) {
      StopProcess(p, 2000);
      env_.tb->Forget(p);
    }
  }
  // Runs `order` (heuristic names) on `p`; fills finish_s[k] for order[k] and bad_bytes.
  Status Run(const Problem& p, const std::vector<std::string>& order, std::vector<double>* finish_s,
             uint64_t* bad_bytes);

 private:
  Status SpawnWorker(const Problem& p, int c, const std::vector<std::string>& order);
  Status AwaitAll(const std::string& what);
  Result<double> Finish(size_t round, uint64_t* bad_bytes);
  Env& env_;
  const std::string cluster_, tag_, sync_;
  std::vector<pid_t> workers_;
};

Status InstanceRun::SpawnWorker(const Problem& p, int c, const std::vector<std::string>& order) {
  std::vector<std::string> argv = {
      "ip",      "netns", "exec",           env_.tb->Namespace("c" + std::to_string(c)),
      env_.self, "bench", "replicas-worker"};
  const std::pair<std::string, std::string> flags[] = {
      {"--cluster", cluster_},
      {"--rank", std::to_string(c)},
      {"--servers", std::to_string(p.num_io_nodes)},
      {"--file", "f-" + tag_ + "-c" + std::to_string(c)},
      {"--salt", std::to_string(c + 1)},
      {"--sync-dir", sync_}};
  for (const auto& [flag, value] : flags) {
    argv.push_back(flag);
    argv.push_back(value);
  }
  for (const std::string& a : WantArgs(p, c, env_.unit)) argv.push_back(a);
  for (const std::string& h : order) {
    argv.push_back("--heuristic");
    argv.push_back(h);
  }
  SpawnOptions so;
  so.stdout_path = env_.tmp + "/worker-" + tag_ + "-" + std::to_string(c) + ".log";
  CLF_ASSIGN_OR_RETURN(pid_t pid, Spawn(argv, so));
  workers_.push_back(pid);
  env_.tb->Track(pid);
  return Status::Ok();
}

// Waits for every worker's file `what`.<rank>, failing early when a worker died.
Status InstanceRun::AwaitAll(const std::string& what) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    const std::string p = sync_ + "/" + what + "." + std::to_string(i);
    const int64_t end = MonoNs() + int64_t{600} * 1000000000;
    while (!FileExists(p)) {
      if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
      if (!ProcessAlive(workers_[i]) || MonoNs() > end) {
        return IoError("worker " + std::to_string(i) + " did not report '" + what + "' (see " +
                       env_.tmp + "/worker-" + tag_ + "-" + std::to_string(i) + ".log)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return Status::Ok();
}

// A round's finish time: the last end minus the first start, over the clients.
Result<double> InstanceRun::Finish(size_t round, uint64_t* bad_bytes) {
  int64_t t0 = INT64_MAX, t1 = 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const std::vector<int64_t> v =
        ReadNumbers(sync_ + "/done-" + std::to_string(round) + "." + std::to_string(i));
    if (v.size() != 3) return IoError("malformed report of worker " + std::to_string(i));
    t0 = std::min(t0, v[0]);
    t1 = std::max(t1, v[1]);
    *bad_bytes += static_cast<uint64_t>(v[2]);
  }
  return double(t1 - t0) / 1e9;
}

Status InstanceRun::Run(const Problem& p, const std::vector<std::string>& order,
                        std::vector<double>* finish_s, uint64_t* bad_bytes) {
  std::filesystem::create_directories(sync_);
  for (int c = 0; c < p.num_compute_nodes; ++c) CLF_RETURN_IF_ERROR(SpawnWorker(p, c, order));
  CLF_RETURN_IF_ERROR(AwaitAll("ready"));
  finish_s->clear();
  for (size_t r = 0; r < order.size(); ++r) {
    CLF_RETURN_IF_ERROR(AwaitAll("ready-" + std::to_string(r)));
    CLF_RETURN_IF_ERROR(TouchFile(sync_ + "/go-" + std::to_string(r)));
    CLF_RETURN_IF_ERROR(AwaitAll("done-" + std::to_string(r)));
    CLF_ASSIGN_OR_RETURN(double f, Finish(r, bad_bytes));
    finish_s->push_back(f);
  }
  for (pid_t w : workers_) WaitChild(w, 30000);
  return Status::Ok();
}

std::string PointName(const Point& pt) {
  return std::to_string(pt.servers) + " servers, " +
         std::string(scheduler::RequestPatternName(pt.pattern)) + ", " +
         std::string(scheduler::SizeClassName(pt.sizes));
}

// Every instance of `pt`, heuristics rotated by one place per instance.
Status RunPoint(Env& env, const Cluster& cluster, size_t index, Point& pt) {
  const std::vector<std::string>& hs = env.o->heuristics;
  for (size_t i = 0; i < pt.instances.size(); ++i) {
    std::vector<size_t> order(hs.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::rotate(order.begin(), order.begin() + (i % hs.size()), order.end());
    std::vector<std::string> names;
    for (size_t k : order) names.push_back(hs[k]);
    const std::string tag = "p" + std::to_string(index) + "-i" + std::to_string(i);
    std::vector<double> finish;
    const int64_t t0 = MonoNs();
    {
      InstanceRun run(env, cluster.file(), tag);
      CLF_RETURN_IF_ERROR(run.Run(pt.instances[i].problem, names, &finish, &pt.bad_bytes));
    }
    std::printf("  %s, instance %zu:", PointName(pt).c_str(), i);
    for (size_t k = 0; k < order.size(); ++k) {
      pt.finish_s[order[k]].push_back(finish[k]);
      std::printf(" %s %.3fs", names[k].c_str(), finish[k]);
    }
    std::printf(" (%.1f s with setup)\n", double(MonoNs() - t0) / 1e9);
    std::fflush(stdout);
  }
  return Status::Ok();
}

// Every point with `servers` servers, on one cluster of that size.
Status RunServers(Env& env, int servers, std::vector<Point>& points) {
  Cluster cluster(env, servers);
  CLF_RETURN_IF_ERROR(cluster.Start());
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].servers != servers) continue;
    CLF_RETURN_IF_ERROR(RunPoint(env, cluster, i, points[i]));
  }
  return Status::Ok();
}

// ------------------------------------------------------------------ results

struct Row {
  int servers = 0;
  std::string pattern, sizes, heuristic;
  double finish_s = 0;      // measured, mean over instances
  double ratio = 0;         // measured finish / EATF's
  double sim_ratio = 0;     // planned length / EATF's planned length
  double sim_finish_s = 0;  // planned length at the link rate
  double opt_ratio = -1;    // optimum / EATF's planned length; -1: not known for every instance
  uint64_t bad_bytes = 0;
};

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

// Mean planned length of heuristic k over the instances, and of the optimum
// (-1 unless every instance has one).
double MeanPredicted(const Point& pt, size_t k) {
  double sum = 0;
  for (const Instance& in : pt.instances) sum += double(in.predicted[k]);
  return sum / double(pt.instances.size());
}
double MeanOptimum(const Point& pt) {
  double sum = 0;
  for (const Instance& in : pt.instances) {
    if (in.optimum < 0) return -1;
    sum += double(in.optimum);
  }
  return sum / double(pt.instances.size());
}

std::vector<Row> MakeRows(const Env& env, const std::vector<Point>& points) {
  const std::vector<std::string>& hs = env.o->heuristics;
  const size_t eatf = size_t(std::find(hs.begin(), hs.end(), "eatf") - hs.begin());
  std::vector<Row> rows;
  for (const Point& pt : points) {
    const double m_eatf = Mean(pt.finish_s[eatf]);
    const double p_eatf = MeanPredicted(pt, eatf);
    const double opt = MeanOptimum(pt);
    for (size_t k = 0; k < hs.size(); ++k) {
      Row r;
      r.servers = pt.servers;
      r.pattern = std::string(scheduler::RequestPatternName(pt.pattern));
      r.sizes = std::string(scheduler::SizeClassName(pt.sizes));
      r.heuristic = hs[k];
      r.finish_s = Mean(pt.finish_s[k]);
      r.ratio = m_eatf > 0 ? r.finish_s / m_eatf : 0;
      r.sim_ratio = MeanPredicted(pt, k) / p_eatf;
      r.sim_finish_s = MeanPredicted(pt, k) * double(env.unit) / (env.link_mb_s * 1e6);
      r.opt_ratio = opt < 0 ? -1 : opt / p_eatf;
      r.bad_bytes = pt.bad_bytes;
      rows.push_back(r);
    }
  }
  return rows;
}

std::string RenderCsv(const Env& env, const std::vector<Row>& rows) {
  std::string csv =
      "servers,pattern,sizes,heuristic,finish_s,ratio_to_eatf,sim_ratio_to_eatf,"
      "opt_ratio_to_eatf,sim_finish_s,bad_bytes,instances,unit_bytes,stripe_bytes,rate,"
      "link_mb_s,server_slots,max_mb,seed\n";
  for (const Row& r : rows) {
    char opt[32] = "";
    if (r.opt_ratio >= 0) std::snprintf(opt, sizeof opt, "%.4f", r.opt_ratio);
    char line[512];
    std::snprintf(
        line, sizeof line,
        "%d,%s,%s,%s,%.4f,%.4f,%.4f,%s,%.4f,%llu,%d,%llu,%u,%s,%.2f,%u,%d,%llu\n", r.servers,
        r.pattern.c_str(), r.sizes.c_str(), r.heuristic.c_str(), r.finish_s, r.ratio, r.sim_ratio,
        opt, r.sim_finish_s, static_cast<unsigned long long>(r.bad_bytes), env.o->instances,
        static_cast<unsigned long long>(env.unit), env.stripe, env.o->rate.c_str(), env.link_mb_s,
        env.o->server_slots, env.o->max_mb, static_cast<unsigned long long>(env.o->seed));
    csv += line;
  }
  return csv;
}

void PrintTable(const std::vector<Row>& rows) {
  std::printf("\n%-7s %-10s %-8s %-8s %9s %7s %7s %7s %9s %6s\n", "servers", "pattern", "sizes",
              "heur", "finish_s", "ratio", "sim", "opt", "sim_s", "bad");
  for (const Row& r : rows) {
    char opt[16] = "-";
    if (r.opt_ratio >= 0) std::snprintf(opt, sizeof opt, "%.3f", r.opt_ratio);
    std::printf("%-7d %-10s %-8s %-8s %9.3f %7.3f %7.3f %7s %9.3f %6llu\n", r.servers,
                r.pattern.c_str(), r.sizes.c_str(), r.heuristic.c_str(), r.finish_s, r.ratio,
                r.sim_ratio, opt, r.sim_finish_s, static_cast<unsigned long long>(r.bad_bytes));
  }
}

// The target, checked on the measured numbers: EATF best on variable
// sizes, and at least 15% shorter than `primary` on all-to-all.
void PrintTargets(const std::vector<Row>& rows) {
  std::map<std::string, std::vector<const Row*>> by_point;
  for (const Row& r : rows) {
    by_point[std::to_string(r.servers) + " servers, " + r.pattern + ", " + r.sizes].push_back(&r);
  }
  std::printf("\ntargets (measured):\n");
  for (const auto& [name, rs] : by_point) {
    const Row* best = *std::min_element(
        rs.begin(), rs.end(), [](const Row* a, const Row* b) { return a->finish_s < b->finish_s; });
    const Row* eatf = nullptr;
    const Row* primary = nullptr;
    for (const Row* r : rs) {
      if (r->heuristic == "eatf") eatf = r;
      if (r->heuristic == "primary") primary = r;
    }
    if (rs.front()->sizes == "variable") {
      std::printf("  %-32s EATF best: %s (best %s, ratio %.3f)\n", name.c_str(),
                  best == eatf ? "yes" : "NO", best->heuristic.c_str(), best->ratio);
    }
    if (rs.front()->pattern == "all-to-all" && eatf && primary && primary->finish_s > 0) {
      const double gain = 1 - eatf->finish_s / primary->finish_s;
      std::printf("  %-32s EATF vs primary: %.1f%% shorter (target 15%%): %s\n", name.c_str(),
                  gain * 100, gain >= 0.15 ? "met" : "NOT met");
    }
  }
}

// DIR/replicas.png: one panel per (pattern, sizes); measured ratio to EATF per
// heuristic solid, the model's prediction dashed, one colour per server count.
Status Plot(const Env& env, const std::vector<Row>& rows) {
  std::map<std::string, std::map<int, std::vector<const Row*>>> panels;
  std::vector<int> servers;
  for (const Row& r : rows) {
    panels[r.pattern + ", " + r.sizes + " sizes"][r.servers].push_back(&r);
    if (std::find(servers.begin(), servers.end(), r.servers) == servers.end())
      servers.push_back(r.servers);
  }
  const int cols = panels.size() > 1 ? 2 : 1;
  const int lines = int((panels.size() + 1) / 2);
  std::ostringstream gp;
  gp << "set terminal pngcairo size " << 700 * cols << "," << 450 * lines << " font ',10'\n"
     << "set output '" << env.o->out << "/replicas.png'\n"
     << "set multiplot layout " << lines << "," << cols << " title 'paper 001 on clfd, "
     << env.o->rate << " links, " << HumanBytes(env.unit) << " per MB, variable 1.."
     << env.o->max_mb << " MB, 2 copies: finish time / EATF (solid: measured, dashed: model)'\n";
  int block = 0;
  for (const auto& [title, by_s] : panels) {
    const std::string d = "$d" + std::to_string(block++);
    gp << d << " << EOD\n";
    const std::vector<const Row*>& first = by_s.begin()->second;
    for (size_t k = 0; k < first.size(); ++k) {
      gp << first[k]->heuristic;
      for (const auto& [s, rs] : by_s) gp << " " << rs[k]->ratio << " " << rs[k]->sim_ratio;
      gp << "\n";
    }
    gp << "EOD\nset title '" << title << "'\nset ylabel 'ratio to EATF'\nset grid\n"
       << "set key top left\nset xrange [-0.5:" << first.size() - 0.5 << "]\nplot ";
    int col = 2, colour = 1;
    for (const auto& [s, rs] : by_s) {
      gp << (col > 2 ? ", " : "") << d << " using 0:" << col << ":xtic(1) with linespoints lw 2 "
         << "pt 7 lc " << colour << " title '" << s << " servers', " << d << " using 0:" << col + 1
         << " with linespoints dt 2 pt 6 lc " << colour << " title '" << s << " servers, model'";
      col += 2;
      ++colour;
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  const std::string script = env.o->out + "/replicas.gp";
  CLF_RETURN_IF_ERROR(WriteFileWithMode(script, gp.str(), 0644));
  CLF_ASSIGN_OR_RETURN(RunResult r, Run({"gnuplot", script}, 60000));
  if (r.exit_code != 0) return IoError("gnuplot failed on " + script + ": " + r.output);
  return Status::Ok();
}

// ------------------------------------------------------------------ entry

int Fail(const Status& s) {
  std::fprintf(stderr, "clf bench replicas: %s\n", s.ToString().c_str());
  return 1;
}

// Checks the options and puts the heuristics in canonical names, EATF first
// if it was not asked for (every ratio needs it).
Status Validate(Options& o, Env& env) {
  if (o.instances < 1) return Invalid("--instances must be >= 1");
  if (o.max_mb < 1 || o.max_mb > 1024) return Invalid("--max-mb: 1..1024");
  for (int s : o.servers) {
    if (s < 2 || s > 64) return Invalid("--servers: 2..64 each (2 copies need 2 servers)");
  }
  for (const std::string& p : o.patterns) {
    if (p != "random" && p != "all-to-all") return Invalid("--patterns: random, all-to-all");
  }
  for (const std::string& s : o.sizes) {
    if (s != "uniform" && s != "variable") return Invalid("--sizes: uniform, variable");
  }
  std::vector<std::string> hs;
  for (const std::string& h : o.heuristics) {
    CLF_ASSIGN_OR_RETURN(ReadSched rs, ParseReadSched(h));
    const std::string name(ReadSchedName(rs));
    if (std::find(hs.begin(), hs.end(), name) == hs.end()) hs.push_back(name);
  }
  if (std::find(hs.begin(), hs.end(), "eatf") == hs.end()) hs.insert(hs.begin(), "eatf");
  o.heuristics = hs;
  CLF_ASSIGN_OR_RETURN(env.unit, ParseByteSize(o.unit));
  if (env.unit < 1 || env.unit > (uint64_t{4} << 20)) return Invalid("--unit: 1 byte .. 4 MiB");
  env.stripe = static_cast<uint32_t>((env.unit + 4095) / 4096 * 4096);
  CLF_ASSIGN_OR_RETURN(env.link_mb_s, RateMBs(o.rate));
  return Status::Ok();
}

// The namespaces: s0.. and c0.. for the largest server count (smaller
// clusters use the first ones).
Status BuildTestbed(const Options& o, Testbed& tb) {
  CLF_RETURN_IF_ERROR(tb.Start());
  const int n = *std::max_element(o.servers.begin(), o.servers.end());
  for (int k = 0; k < n; ++k) {
    CLF_RETURN_IF_ERROR(tb.AddNode("s" + std::to_string(k), BenchIp(kSubnet, 10 + k), o.rate));
  }
  for (int i = 0; i < n; ++i) {
    CLF_RETURN_IF_ERROR(tb.AddNode("c" + std::to_string(i), BenchIp(kSubnet, 100 + i), o.rate));
  }
  return Status::Ok();
}

Status WriteOutputs(const Env& env, const std::vector<Row>& rows) {
  const std::string csv = env.o->out + "/replicas.csv";
  CLF_RETURN_IF_ERROR(WriteFileWithMode(csv, RenderCsv(env, rows), 0644));
  std::printf("wrote %s\n", csv.c_str());
  if (env.o->no_plots) return Status::Ok();
  CLF_RETURN_IF_ERROR(Plot(env, rows));
  std::printf("wrote %s/replicas.png\n", env.o->out.c_str());
  return Status::Ok();
}

int RunBench(Options o) {
  if (o.cleanup) return CleanupStale("clfrb");
  const int64_t began = MonoNs();
  Env env;
  env.o = &o;
  if (Status s = Validate(o, env); !s.ok()) return Fail(s);
  std::printf("planning %d instance(s) per point (model, exact optimum where small)\n",
              o.instances);
  std::fflush(stdout);
  Result<std::vector<Point>> points = MakePoints(o);
  if (!points.ok()) return Fail(points.status());
  Result<std::unique_ptr<BenchWork>> work = BenchWork::Start("replicas", o.out, OnSignal);
  if (!work.ok()) return Fail(work.status());
  env.self = (*work)->self();
  env.clfd = (*work)->clfd();
  env.tmp = (*work)->dir();
  std::printf(
      "work folder %s; unit %s (stripe %s), variable sizes 1..%d MB, tc tbf %s "
      "(%.1f MB/s) each way, %u read slot(s) per clfd\n",
      env.tmp.c_str(), HumanBytes(env.unit).c_str(), HumanBytes(env.stripe).c_str(), o.max_mb,
      o.rate.c_str(), env.link_mb_s, o.server_slots);
  std::fflush(stdout);
  Testbed tb("clfrb" + std::to_string(getpid()));
  env.tb = &tb;
  if (Status s = BuildTestbed(o, tb); !s.ok()) return Fail(s);
  std::vector<int> counts = o.servers;
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (int s : counts) {
    if (Status st = RunServers(env, s, *points); !st.ok()) return Fail(st);
  }
  const std::vector<Row> rows = MakeRows(env, *points);
  PrintTable(rows);
  PrintTargets(rows);
  if (Status s = WriteOutputs(env, rows); !s.ok()) return Fail(s);
  std::printf("finished in %.0f s\n", double(MonoNs() - began) / 1e9);
  for (const Row& r : rows) {
    if (r.bad_bytes != 0) return Fail(Status(Code::kIo, "some reads returned wrong bytes"));
  }
  return 0;
}

}  // namespace

void AddBenchReplicasCommand(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "replicas",
      "paper 001 on real processes: clients and clfd in network namespaces, 2 copies per file, "
      "batch-read finish time per read heuristic against the model's prediction");
  cmd->add_option("--out", o->out, "directory for replicas.csv and replicas.png");
  cmd->add_option("--servers", o->servers, "server counts (clients = servers)")
      ->capture_default_str();
  cmd->add_option("--patterns", o->patterns, "random, all-to-all")->capture_default_str();
  cmd->add_option("--sizes", o->sizes, "uniform (1 MB), variable (1..1024 MB, see --max-mb)")
      ->capture_default_str();
  cmd->add_option("--heuristics", o->heuristics, "read_sched values to compare")
      ->capture_default_str();
  cmd->add_option("--unit", o->unit, "bytes per paper MB (stripe: rounded up to 4 KiB)")
      ->capture_default_str();
  cmd->add_option("--max-mb", o->max_mb,
                  "variable sizes (1..1024 MB) scaled to 1..this (1024: unscaled)")
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "tc tbf rate of each link end (kbit, mbit, gbit)")
      ->capture_default_str();
  cmd->add_option("--instances", o->instances, "instances per point (mean reported)")
      ->capture_default_str();
  cmd->add_option("--server-slots", o->server_slots,
                  "reads a clfd serves at once (paper: 1; 0: arrival order, no read queue)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the instances")->capture_default_str();
  cmd->add_flag("--no-plots", o->no_plots, "skip the PNG");
  cmd->add_flag("--cleanup", o->cleanup, "only remove namespaces left by a killed bench");
  cmd->callback([o] { Exit(RunBench(*o)); });

  auto w = std::make_shared<WorkerArgs>();
  CLI::App* wcmd =
      bench.add_subcommand("replicas-worker", "one client of `clf bench replicas` (internal)");
  wcmd->group("");  // hidden from help
  wcmd->add_option("--cluster", w->cluster)->required();
  wcmd->add_flag("--setup", w->setup);
  wcmd->add_option("--rank", w->rank);
  wcmd->add_option("--servers", w->servers);
  wcmd->add_option("--stripe", w->stripe);
  wcmd->add_option("--file", w->file);
  wcmd->add_option("--salt", w->salt);
  wcmd->add_option("--sync-dir", w->sync_dir);
  wcmd->add_option("--want", w->wants);
  wcmd->add_option("--heuristic", w->heuristics);
  wcmd->callback([w] {
    signal(SIGPIPE, SIG_IGN);
    Status s = WorkerRun(*w);
    if (!s.ok()) {
      std::fprintf(stderr, "replicas-worker %u: %s\n", w->rank, s.ToString().c_str());
      Exit(1);
    }
  });
}

}  // namespace clf::tools
