// clf bench collectives: paper 004 on real processes. For each metadata mode
// (client: the client-driven baseline; collective: server-driven binary-tree
// collectives; onehop: the default, no data server touched at create) and each
// number of servers N: N clfd, each in its own network namespace, and one
// client process (a worker mode of this binary, using libclf) in another,
// joined by veth pairs to a switch, every veth end shaped by tc TBF. The
// worker creates F files in one directory striped over all N servers, stats
// them, removes them, one operation at a time, and reports each operation's
// latency. Mean, p50, p99 and throughput go to DIR/collectives.csv and PNGs.
//
// The switch is the kernel bridge (--delay-us 0, the default): the links add
// only TBF's queueing (a few µs at 1 gbit for metadata-sized messages) on top
// of veth. With --delay-us D it is a userspace switch (HopSwitch,
// tools/bench/hop_switch.h; this kernel has no netem) that forwards every
// frame D µs after it arrived, so each node-to-node hop costs one-way D (a
// round trip 2D), like the switched Ethernet of the paper's clusters; D is in
// the CSV and the plot titles. In collective mode a remove's data objects are
// freed by the background REMOVE collective (batched): the remove column is
// M's part only, and remove_drain_s is the time until every server reported
// no pending garbage after the last remove.
//
// Everything the bench creates (namespaces, processes, the temporary folder)
// is removed on exit, also after an error or SIGINT/SIGTERM. Namespace names
// start with "clfcb<pid>-"; `--cleanup` removes those left by a killed bench.
#include <signal.h>
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
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "tools/bench/bench_files.h"
#include "tools/bench/netns_cluster.h"
#include "tools/bench/netns_testbed.h"
#include "tools/commands.h"
#include "tools/process_util.h"

namespace clf::tools {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }


struct OpStats {
  std::string op;
  size_t count = 0;
  double mean_us = 0, p50_us = 0, p99_us = 0, total_s = 0, ops_per_s = 0;
};

OpStats Summarize(const std::string& op, std::vector<int64_t> ns, int64_t total_ns) {
  OpStats s;
  s.op = op;
  s.count = ns.size();
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  double sum = 0;
  for (int64_t v : ns) sum += double(v);
  s.mean_us = sum / double(ns.size()) / 1e3;
  auto pct = [&](double p) {
    size_t i = static_cast<size_t>(p * double(ns.size() - 1) + 0.5);
    return double(ns[std::min(i, ns.size() - 1)]) / 1e3;
  };
  s.p50_us = pct(0.50);
  s.p99_us = pct(0.99);
  s.total_s = double(total_ns) / 1e9;
  s.ops_per_s = s.total_s > 0 ? double(ns.size()) / s.total_s : 0;
  return s;
}

// ------------------------------------------------------------------ worker

struct WorkerArgs {
  std::string cluster, out;
  uint32_t files = 100;
  uint32_t servers = 1;
};

std::string FileName(uint32_t i) { return "f" + std::to_string(i); }

// /bench, made or found; the servers may still be starting, so it is asked
// for again for up to a minute.
Result<client::Attr> MakeBenchDir(client::Client& c) {
  client::CreateArgs da;
  da.type = client::FileType::kDirectory;
  da.mode = 0755;
  da.exclusive = false;
  Result<client::Attr> dir = Unavailable("not tried");
  for (int i = 0; i < 600 && !g_stop.load(); ++i) {
    dir = c.CreateSync(c.root(), "bench", da);
    if (dir.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!dir.ok()) return dir.status().WithContext("create /bench");
  return dir;
}

// Before the clock starts: every server answers (statuses open each channel,
// up to a minute), and three files made, stat'ed and removed open the
// connections on every path the timed ops use.
Status WarmUp(client::Client& c, Handle dir) {
  for (int i = 0; i < 600; ++i) {
    bool all = true;
    for (const client::ServerStatus& s : c.ServerStatuses()) all = all && s.up;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int i = 0; i < 3; ++i) {
    const std::string n = "warm" + std::to_string(i);
    CLF_ASSIGN_OR_RETURN(client::Attr w, c.CreateSync(dir, n, client::CreateArgs{}));
    CLF_RETURN_IF_ERROR(c.GetAttrSync(w.handle).status());
    CLF_RETURN_IF_ERROR(c.RemoveSync(dir, n, false).status());
  }
  return Status::Ok();
}

// `files` creates, one at a time (fewer if stopped); the files made in *made.
Result<OpStats> TimeCreates(client::Client& c, Handle dir, uint32_t files,
                            std::vector<client::Attr>* made) {
  std::vector<int64_t> lat;
  const int64_t t0 = MonoNs();
  for (uint32_t i = 0; i < files && !g_stop.load(); ++i) {
    const int64_t s = MonoNs();
    Result<client::Attr> f = c.CreateSync(dir, FileName(i), client::CreateArgs{});
    lat.push_back(MonoNs() - s);
    if (!f.ok()) return f.status().WithContext("create " + FileName(i));
    made->push_back(*f);
  }
  return Summarize("create", std::move(lat), MonoNs() - t0);
}

Result<OpStats> TimeStats(client::Client& c, const std::vector<client::Attr>& made) {
  std::vector<int64_t> lat;
  const int64_t t0 = MonoNs();
  for (const client::Attr& f : made) {
    const int64_t s = MonoNs();
    Result<client::Attr> st = c.GetAttrSync(f.handle);
    lat.push_back(MonoNs() - s);
    if (!st.ok()) return st.status().WithContext("stat");
  }
  return Summarize("stat", std::move(lat), MonoNs() - t0);
}

// Removes f0..f<count-1>, one at a time; *end_ns is when the last returned.
Result<OpStats> TimeRemoves(client::Client& c, Handle dir, size_t count, int64_t* end_ns) {
  std::vector<int64_t> lat;
  const int64_t t0 = MonoNs();
  for (uint32_t i = 0; i < count; ++i) {
    const int64_t s = MonoNs();
    Result<client::RemoveResult> r = c.RemoveSync(dir, FileName(i), false);
    lat.push_back(MonoNs() - s);
    if (!r.ok()) return r.status().WithContext("remove " + FileName(i));
  }
  *end_ns = MonoNs();
  return Summarize("remove", std::move(lat), *end_ns - t0);
}

// Seconds from `since` until no server has garbage left (collective/onehop:
// the background removal), polling every 25 ms, 1200 times at most.
double DrainSeconds(client::Client& c, int64_t since) {
  for (int i = 0; i < 1200; ++i) {
    bool clean = true;
    for (const client::ServerStatus& s : c.ServerStatuses()) clean = clean && s.up && s.garbage == 0;
    if (clean) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return double(MonoNs() - since) / 1e9;
}

// The report the coordinator reads: one line per op, written to a temporary
// name and renamed into place.
Status WriteReport(const std::string& path, const std::vector<OpStats>& out, double drain_s) {
  std::ostringstream text;
  for (const OpStats& s : out) {
    text << s.op << " " << s.count << " " << s.mean_us << " " << s.p50_us << " " << s.p99_us << " "
         << s.total_s << " " << s.ops_per_s << " " << drain_s << "\n";
  }
  const std::string tmp = path + ".tmp";
  CLF_RETURN_IF_ERROR(WriteFileWithMode(tmp, text.str(), 0644));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return FromErrno(errno, "rename " + tmp);
  return Status::Ok();
}

// /bench -> warm-up -> timed creates, stats, removes -> the removal's drain
// -> the report.
Status WorkerRun(const WorkerArgs& a) {
  client::ClientOptions o;
  o.rpc_timeout_ms = 60000;
  CLF_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, client::Client::Open(a.cluster, o));
  CLF_ASSIGN_OR_RETURN(client::Attr dir, MakeBenchDir(*c));
  CLF_RETURN_IF_ERROR(WarmUp(*c, dir.handle));
  std::vector<client::Attr> made;
  made.reserve(a.files);
  std::vector<OpStats> out;
  CLF_ASSIGN_OR_RETURN(OpStats creates, TimeCreates(*c, dir.handle, a.files, &made));
  out.push_back(std::move(creates));
  CLF_ASSIGN_OR_RETURN(OpStats stats, TimeStats(*c, made));
  out.push_back(std::move(stats));
  int64_t removed_at = 0;
  CLF_ASSIGN_OR_RETURN(OpStats removes, TimeRemoves(*c, dir.handle, made.size(), &removed_at));
  out.push_back(std::move(removes));
  const double drain_s = DrainSeconds(*c, removed_at);
  return WriteReport(a.out, out, drain_s);
}

// ------------------------------------------------------------------ coordinator

struct Options {
  std::string out;
  std::vector<int> servers = {1, 2, 4, 8, 16, 32};
  std::vector<std::string> modes = {"client", "collective", "onehop"};
  uint32_t files = 300;
  std::string rate = "1gbit";
  uint32_t delay_us = 0;
  bool quick = false;
  bool no_plots = false;
  bool cleanup = false;
};

struct Row {
  std::string mode;
  int servers = 0;
  OpStats stats;
  double drain_s = 0;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "clf bench collectives: %s\n", s.ToString().c_str());
  return 1;
}

// One /24: servers 10.78.0.10.., the client .250 (at most 64 servers).
constexpr const char* kSubnet = "10.78.0";
std::string ServerIp(int k) { return BenchIp(kSubnet, 10 + k); }
constexpr const char* kClientIp = "10.78.0.250";

// One (mode, N) point: N clfd, the worker, its report.
Result<std::vector<Row>> RunPoint(Testbed& tb, const Options& o, const std::string& self,
                                  const std::string& clfd, const std::string& tmp,
                                  MetadataMode mode, int n) {
  const std::string tag = std::string(MetadataModeName(mode)) + "-" + std::to_string(n);
  const std::string dir = tmp + "/" + tag;
  std::filesystem::create_directories(dir);
  ClusterConfig cfg;
  cfg.name = "bench";
  CLF_RETURN_IF_ERROR(WriteBenchSecrets(tmp, &cfg));
  cfg.rpc_timeout_ms = 60000;
  cfg.metadata_mode = mode;
  cfg.transport = TransportKind::kTcp;
  cfg.default_layout = Layout{64 << 10, static_cast<uint32_t>(n), 0, 1};
  AddBenchServers(&cfg, kSubnet, n, [&](int k) { return dir + "/s" + std::to_string(k); });
  const std::string cluster = dir + "/cluster.toml";
  CLF_RETURN_IF_ERROR(WriteFileWithMode(cluster, RenderClusterConfig(cfg), 0644));
  std::vector<pid_t> pids;
  auto stop_all = [&] {
    for (pid_t p : pids) {
      StopProcess(p, 5000);
      tb.Forget(p);
    }
    pids.clear();
  };
  CLF_ASSIGN_OR_RETURN(pids, StartBenchServers(tb, clfd, cluster, n, [&](int k) {
                         return dir + "/clfd-" + std::to_string(k) + ".log";
                       }));
  const std::string report = dir + "/report.txt";
  SpawnOptions wo;
  wo.stdout_path = dir + "/worker.log";
  Result<pid_t> worker =
      Spawn({"ip", "netns", "exec", tb.Namespace("c"), self, "bench", "collectives-worker",
             "--cluster", cluster, "--files", std::to_string(o.files), "--out", report},
            wo);
  if (!worker.ok()) {
    stop_all();
    return worker.status();
  }
  tb.Track(*worker);
  int wstatus = 0;
  bool exited = false;
  const int64_t end = MonoNs() + int64_t{1200} * 1000000000;
  while (!g_stop.load() && MonoNs() < end) {
    if (WaitChild(*worker, 200, &wstatus)) {
      exited = true;
      break;
    }
  }
  if (!exited) StopProcess(*worker, 2000);
  tb.Forget(*worker);
  stop_all();
  if (g_stop.load()) return Status(Code::kCancelled, "interrupted");
  if (!exited || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    Result<std::string> log = ReadFileToString(dir + "/worker.log");
    return IoError("worker for " + tag + " failed: " + (log.ok() ? *log : "(no log)"));
  }
  std::ifstream in(report);
  std::vector<Row> rows;
  Row r;
  while (in >> r.stats.op >> r.stats.count >> r.stats.mean_us >> r.stats.p50_us >> r.stats.p99_us >>
         r.stats.total_s >> r.stats.ops_per_s >> r.drain_s) {
    r.mode = MetadataModeName(mode);
    r.servers = n;
    rows.push_back(r);
  }
  if (rows.size() != 3) return IoError("malformed report " + report);
  // The servers' data of this point is not needed any more.
  std::error_code ec;
  for (int k = 0; k < n; ++k) std::filesystem::remove_all(dir + "/s" + std::to_string(k), ec);
  return rows;
}

Status Plot(const Options& o, const std::vector<Row>& rows, const std::string& title) {
  // DIR/collectives-<op>.png: mean latency (ms) against N, one line per mode;
  // DIR/collectives-ratio.png: client / collective mean latency per op.
  std::string data;
  for (const char* op : {"create", "stat", "remove"}) {
    std::string script = "set terminal pngcairo size 900,560\nset output '" + o.out +
                         "/collectives-" + op + ".png'\nset title '" + op + ": " + title +
                         "' noenhanced\nset xlabel 'servers (N)'\nset ylabel 'mean latency (ms)'\n"
                         "set logscale x 2\nset key left top\nset grid\n";
    std::string plot = "plot ";
    std::string inline_data;
    bool first = true;
    for (const std::string& mode : o.modes) {
      if (!first) plot += ", ";
      first = false;
      plot += "'-' using 1:2 with linespoints title '" + mode + "'";
      for (const Row& r : rows) {
        if (r.mode == mode && r.stats.op == op) {
          inline_data += std::to_string(r.servers) + " " + std::to_string(r.stats.mean_us / 1e3) + "\n";
        }
      }
      inline_data += "e\n";
    }
    script += plot + "\n" + inline_data;
    const std::string path = o.out + "/collectives-" + op + ".gp";
    CLF_RETURN_IF_ERROR(WriteFileWithMode(path, script, 0644));
    CLF_ASSIGN_OR_RETURN(RunResult r, Run({"gnuplot", path}, 60000));
    if (r.exit_code != 0) return IoError("gnuplot failed on " + path + ": " + r.output);
  }
  {
    std::string script = "set terminal pngcairo size 900,560\nset output '" + o.out +
                         "/collectives-ratio.png'\nset title 'client / collective mean latency: " +
                         title + "' noenhanced\nset xlabel 'servers (N)'\nset ylabel 'ratio'\n"
                         "set logscale x 2\nset key left top\nset grid\n";
    std::string plot = "plot 1 notitle dt 2";
    std::string inline_data;
    for (const char* op : {"create", "stat", "remove"}) {
      plot += ", '-' using 1:2 with linespoints title '" + std::string(op) + "'";
      for (const Row& c : rows) {
        if (c.mode != "client" || c.stats.op != op) continue;
        for (const Row& k : rows) {
          if (k.mode == "collective" && k.stats.op == op && k.servers == c.servers &&
              k.stats.mean_us > 0) {
            inline_data += std::to_string(c.servers) + " " +
                           std::to_string(c.stats.mean_us / k.stats.mean_us) + "\n";
          }
        }
      }
      inline_data += "e\n";
    }
    script += plot + "\n" + inline_data;
    const std::string path = o.out + "/collectives-ratio.gp";
    CLF_RETURN_IF_ERROR(WriteFileWithMode(path, script, 0644));
    CLF_ASSIGN_OR_RETURN(RunResult r, Run({"gnuplot", path}, 60000));
    if (r.exit_code != 0) return IoError("gnuplot failed on " + path + ": " + r.output);
  }
  return Status::Ok();
}

// What the checked options name: the metadata modes, the largest N.
struct Checked {
  std::vector<MetadataMode> modes;
  int max_n = 0;
};

// The options checked, in order: --files, --servers, --modes, --rate, --delay-us.
Result<Checked> CheckOptions(const Options& o) {
  if (o.files < 1 || o.files > 1000000) return Invalid("--files must be 1..1000000");
  Checked c;
  for (int n : o.servers) {
    if (n < 1 || n > 64) return Invalid("--servers values must be 1..64");
    c.max_n = std::max(c.max_n, n);
  }
  for (const std::string& m : o.modes) {
    if (m == "client") c.modes.push_back(MetadataMode::kClient);
    else if (m == "collective") c.modes.push_back(MetadataMode::kCollective);
    else if (m == "onehop") c.modes.push_back(MetadataMode::kOneHop);
    else return Invalid("--modes: client, collective or onehop, got " + m);
  }
  if (Result<double> r = RateMBs(o.rate); !r.ok()) return r.status();
  if (o.delay_us > 1000000) return Invalid("--delay-us must be 0..1000000");
  return c;
}

// The testbed's nodes: `max_n` servers and the client, said on stdout first.
Status StartTestbed(Testbed& tb, const Options& o, int max_n) {
  const std::string hop =
      o.delay_us == 0 ? "a bridge, tc tbf " + o.rate + " each way; no added per-hop delay"
                      : "a userspace switch holding every frame " + std::to_string(o.delay_us) +
                            " us, tc tbf " + o.rate + " each way";
  std::printf("testbed: 1 client + up to %d servers, each in a network namespace, veth to %s\n",
              max_n, hop.c_str());
  std::fflush(stdout);
  CLF_RETURN_IF_ERROR(tb.Start());
  // Node names are short: the bridge end of a veth is "v<name>" (IFNAMSIZ).
  for (int k = 0; k < max_n; ++k) {
    CLF_RETURN_IF_ERROR(tb.AddNode("s" + std::to_string(k), ServerIp(k), o.rate));
  }
  return tb.AddNode("c", kClientIp, o.rate);
}

// Every (N, mode) point, its rows printed as it ends.
Result<std::vector<Row>> RunPoints(Testbed& tb, const Options& o,
                                   const std::vector<MetadataMode>& modes, const std::string& self,
                                   const std::string& clfd, const std::string& tmp) {
  std::printf("%u files per point, one operation at a time from one client\n", o.files);
  std::printf("%-10s %4s %-7s %10s %10s %10s %10s %9s\n", "mode", "N", "op", "ops/s", "mean us",
              "p50 us", "p99 us", "drain s");
  // N outer, mode inner: the machine's load drifts (other work, the number of
  // clfd), and the modes compared at one N should see the same conditions.
  std::vector<Row> rows;
  for (int n : o.servers) {
    for (MetadataMode m : modes) {
      CLF_ASSIGN_OR_RETURN(std::vector<Row> r, RunPoint(tb, o, self, clfd, tmp, m, n));
      for (const Row& row : r) {
        std::printf("%-10s %4d %-7s %10.1f %10.1f %10.1f %10.1f %9.2f\n", row.mode.c_str(),
                    row.servers, row.stats.op.c_str(), row.stats.ops_per_s, row.stats.mean_us,
                    row.stats.p50_us, row.stats.p99_us, row.stats.op == "remove" ? row.drain_s : 0.0);
        rows.push_back(row);
      }
      std::fflush(stdout);
    }
  }
  return rows;
}

std::string CsvOf(const Options& o, const std::vector<Row>& rows) {
  std::string csv =
      "mode,servers,op,files,ops_per_s,mean_us,p50_us,p99_us,total_s,remove_drain_s,rate,"
      "delay_us\n";
  for (const Row& r : rows) {
    char line[512];
    std::snprintf(line, sizeof line, "%s,%d,%s,%zu,%.2f,%.1f,%.1f,%.1f,%.3f,%.3f,%s,%u\n",
                  r.mode.c_str(), r.servers, r.stats.op.c_str(), r.stats.count, r.stats.ops_per_s,
                  r.stats.mean_us, r.stats.p50_us, r.stats.p99_us, r.stats.total_s,
                  r.stats.op == "remove" ? r.drain_s : 0.0, o.rate.c_str(), o.delay_us);
    csv += line;
  }
  return csv;
}

// Stops the userspace switch (every point's processes are stopped: it is not
// needed any more) and prints what it forwarded.
void StopSwitchAndReport(Testbed& tb) {
  const HopSwitch::Stats st = tb.StopSwitch();
  std::printf(
      "switch: %llu frames in, %llu out (%llu flooded), %llu dropped, %llu dropped by "
      "the kernel; sent %.1f us after due on average (max %.1f us)%s\n",
      static_cast<unsigned long long>(st.frames_in),
      static_cast<unsigned long long>(st.frames_out), static_cast<unsigned long long>(st.flooded),
      static_cast<unsigned long long>(st.dropped),
      static_cast<unsigned long long>(st.kernel_drops), st.mean_late_us, st.max_late_us,
      st.realtime ? "" : "; not SCHED_FIFO");
}

// DIR/collectives.csv, then (unless --no-plots) the PNGs; each said when written.
Status WriteOutputs(const Options& o, const std::vector<Row>& rows, const std::string& csv) {
  CLF_RETURN_IF_ERROR(WriteFileWithMode(o.out + "/collectives.csv", csv, 0644));
  std::printf("wrote %s/collectives.csv\n", o.out.c_str());
  if (o.no_plots) return Status::Ok();
  std::string title = std::to_string(o.files) + " files, 1 client, netns + tbf " + o.rate;
  if (o.delay_us > 0) title += " + " + std::to_string(o.delay_us) + " us per hop";
  CLF_RETURN_IF_ERROR(Plot(o, rows, title));
  std::printf("wrote %s/collectives-{create,stat,remove,ratio}.png\n", o.out.c_str());
  return Status::Ok();
}

// Options checked -> work folder -> testbed -> every point -> CSV and plots.
int RunBench(Options o) {
  if (o.cleanup) return CleanupStale("clfcb");
  if (o.quick) {
    o.servers = {1, 2};
    o.files = std::min<uint32_t>(o.files, 20);
  }
  Result<Checked> checked = CheckOptions(o);
  if (!checked.ok()) return Fail(checked.status());
  Result<std::unique_ptr<BenchWork>> work = BenchWork::Start("coll", o.out, OnSignal);
  if (!work.ok()) return Fail(work.status());
  const std::string& tmp = (*work)->dir();
  std::printf("work folder %s\n", tmp.c_str());
  // Declared after the work folder: torn down (processes stopped) before the folder goes.
  Testbed tb("clfcb" + std::to_string(getpid()), o.delay_us);
  if (Status s = StartTestbed(tb, o, checked->max_n); !s.ok()) return Fail(s);
  Result<std::vector<Row>> rows =
      RunPoints(tb, o, checked->modes, (*work)->self(), (*work)->clfd(), tmp);
  if (!rows.ok()) return Fail(rows.status());
  const std::string csv = CsvOf(o, *rows);
  if (o.delay_us > 0) StopSwitchAndReport(tb);
  if (Status s = WriteOutputs(o, *rows, csv); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace

void AddBenchCollectivesCommand(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "collectives",
      "paper 004 on real processes: create/stat/remove latency and throughput per metadata "
      "mode (client, collective, onehop) and number of servers, in network namespaces joined by "
      "a bridge, or with --delay-us by a userspace switch adding that one-way delay per hop");
  cmd->add_option("--out", o->out, "directory for collectives.csv and the PNGs");
  cmd->add_option("--servers", o->servers, "numbers of servers (comma separated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--modes", o->modes, "metadata modes (comma separated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--files", o->files, "files created, stat'ed and removed per point")
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "tc tbf rate of each link end (kbit, mbit, gbit)")
      ->capture_default_str();
  cmd->add_option("--delay-us", o->delay_us,
                  "one-way delay of every node-to-node hop, µs (0: the kernel bridge, no delay; "
                  "otherwise a userspace switch holds each frame this long)")
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick, "N = 1,2 and at most 20 files (for tests)");
  cmd->add_flag("--no-plots", o->no_plots, "skip the PNGs");
  cmd->add_flag("--cleanup", o->cleanup, "only remove namespaces left by a killed bench");
  cmd->callback([o] { Exit(RunBench(*o)); });

  auto w = std::make_shared<WorkerArgs>();
  CLI::App* wcmd = bench.add_subcommand("collectives-worker",
                                        "the client of `clf bench collectives` (internal)");
  wcmd->group("");
  wcmd->add_option("--cluster", w->cluster)->required();
  wcmd->add_option("--files", w->files);
  wcmd->add_option("--out", w->out)->required();
  wcmd->callback([w] {
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigaction(SIGTERM, &sa, nullptr);
    Status s = WorkerRun(*w);
    if (!s.ok()) {
      std::fprintf(stderr, "collectives-worker: %s\n", s.ToString().c_str());
      Exit(1);
    }
  });
}

}  // namespace clf::tools
