// `clf bench locks`: paper 003's experiments (3-D block, FLASH, tile reader)
// with no, whole-file, byte-range and list locking, and the raw speed of the
// lock table.
#include <malloc.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tools/bench/locks/cluster_bench.h"
#include "tools/bench/locks/lock_sim.h"
#include "tools/bench/locks/raw_speed.h"
#include "tools/bench/locks/workloads.h"
#include "tools/commands.h"

namespace clf::tools {
namespace {

using bench::LockMethod;
using bench::SimResult;
using bench::Workload;

struct Options {
  std::string out;
  bool quick = false;
  bool skip_raw = false;
  bool skip_sim = false;
  double mbps = 100.0;
  bool mbps_set = false;
  double latency_ms = 100.0;
};

struct Row {
  std::string workload;
  int clients;
  LockMethod method;
  SimResult r;
};

constexpr LockMethod kMethods[] = {LockMethod::kNone, LockMethod::kFile, LockMethod::kRange,
                                   LockMethod::kList};

const char* MethodTitle(LockMethod m) {
  switch (m) {
    case LockMethod::kFile:
      return "Whole-file locking";
    case LockMethod::kRange:
      return "Byte-range locking";
    case LockMethod::kList:
      return "List locking";
    default:
      return "No locking";
  }
}

void PrintCharacteristics(const std::string& title, const std::vector<Row>& rows,
                          const std::string& workload) {
  std::printf("\n%s\n", title.c_str());
  std::printf("  %-20s %8s %16s %16s\n", "method", "clients", "locks/client", "max concurrent");
  for (LockMethod m : kMethods) {
    if (m == LockMethod::kNone) continue;
    bool first = true;
    for (const Row& row : rows) {
      if (row.workload != workload || row.method != m) continue;
      std::printf("  %-20s %8d %16llu %16d\n", first ? MethodTitle(m) : "", row.clients,
                  static_cast<unsigned long long>(row.r.locks_per_client), row.r.max_concurrent);
      first = false;
    }
  }
}

void PrintTimes(const std::string& title, const std::vector<Row>& rows,
                const std::string& workload) {
  std::map<int, std::map<LockMethod, SimResult>> by_clients;
  for (const Row& row : rows) {
    if (row.workload == workload) by_clients[row.clients][row.method] = row.r;
  }
  std::printf("\n%s\n", title.c_str());
  std::printf("  %7s %8s %8s %8s %8s | %10s %10s %10s | %10s %10s | %9s\n", "clients", "none s",
              "file s", "range s", "list s", "file/none", "range/none", "list/none", "file/list",
              "range/list", "list bw %");
  for (auto& [clients, m] : by_clients) {
    double none = m[LockMethod::kNone].seconds, file = m[LockMethod::kFile].seconds;
    double range = m[LockMethod::kRange].seconds, list = m[LockMethod::kList].seconds;
    std::printf("  %7d %8.3f %8.3f %8.3f %8.3f | %10.2f %10.2f %10.2f | %10.2f %10.2f | %8.1f%%\n",
                clients, none, file, range, list, file / none, range / none, list / none,
                file / list, range / list, 100.0 * none / list);
  }
}

// The simulated I/O: a latency plus bytes at a rate.
bench::SimOptions SimOptionsOf(const Options& o) {
  bench::SimOptions sim;
  // Quick mode runs faster I/O unless told otherwise; the latency (which keeps
  // every list-locking client's hold overlapping) stays.
  sim.megabytes_per_second = o.quick && !o.mbps_set ? 400.0 : o.mbps;
  // The hold must outlast the serialized lock processing of all clients plus
  // their scheduling delays on a loaded 2-core machine, or list locking's
  // holds stop overlapping for reasons that are not the table's.
  sim.latency = std::chrono::microseconds(static_cast<int64_t>(o.latency_ms * 1000));
  return sim;
}

// Paper 003's workloads at its client counts (fewer with --quick); none with --skip-sim.
std::vector<Workload> SimWorkloads(const Options& o) {
  std::vector<Workload> workloads;
  if (o.skip_sim) return workloads;
  std::vector<int> cube = o.quick ? std::vector<int>{8, 27} : std::vector<int>{8, 27, 64};
  for (int c : cube) workloads.push_back(bench::ThreeDBlock(c));
  std::vector<int> flash = o.quick ? std::vector<int>{2, 8} : std::vector<int>{2, 4, 8, 16, 32, 64};
  for (int c : flash) workloads.push_back(bench::Flash(c));
  workloads.push_back(bench::TileReader(o.quick ? 2 : 10));
  return workloads;
}

// Keeps freed memory in the heap and touches it once, untimed: on this VM a
// first-touch page fault costs microseconds, and a fresh process would
// otherwise charge the first list-locking run (not the table) for them.
void WarmHeap(bool quick) {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  bench::SimOptions warm;
  warm.latency = std::chrono::microseconds(0);
  warm.megabytes_per_second = 1e9;
  bench::RunLockSim(bench::Flash(quick ? 8 : 64), LockMethod::kList, warm);
}

// Every workload with every method, each printed to stderr as it ends.
std::vector<Row> RunSims(const std::vector<Workload>& workloads, const bench::SimOptions& sim) {
  std::vector<Row> rows;
  for (const Workload& w : workloads) {
    for (LockMethod m : kMethods) {
      SimResult r = bench::RunLockSim(w, m, sim);
      rows.push_back(Row{w.name, w.clients, m, r});
      std::fprintf(stderr,
                   "  %-8s clients=%-3d %-5s %8.3f s (max concurrent %d, in Lock() %.3f s)\n",
                   w.name.c_str(), w.clients, bench::MethodName(m), r.seconds, r.max_concurrent,
                   r.lock_seconds);
    }
  }
  return rows;
}

// Paper 003's Tables 1-3 and Figures 4-6, from the simulated rows.
void PrintPaperTables(const std::vector<Row>& rows) {
  PrintCharacteristics("Table 1: 3-D block test (100^3 4-byte ints, block distribution)", rows,
                       "3d-block");
  PrintCharacteristics("Table 2: FLASH I/O simulation (80 blocks x 24 variables per client)", rows,
                       "flash");
  PrintCharacteristics("Table 3: tile reader (6 clients, 3x2 tiles of 1024x768x3, per frame file)",
                       rows, "tile");
  PrintTimes("Figure 4: 3-D block test, total time and ratios", rows, "3d-block");
  PrintTimes("Figure 5: FLASH I/O simulation, total time and ratios", rows, "flash");
  PrintTimes("Figure 6: tile reader, total time and ratios", rows, "tile");
}

// The lock table's raw speed at a few table sizes, printed as a table.
std::vector<bench::RawSpeedRow> RunAndPrintRawSpeed(bool quick) {
  std::vector<size_t> sizes =
      quick ? std::vector<size_t>{1000, 100000} : std::vector<size_t>{1000, 10000, 100000, 1000000};
  std::vector<bench::RawSpeedRow> raw =
      bench::RunRawSpeed(sizes, 10000, quick ? 20000 : 200000, quick ? 3 : 20);
  std::printf(
      "\nRaw speed: acquire + release on a table already holding n locks (one thread, CPU ns)\n");
  std::printf("  %10s %18s %24s %24s\n", "n locks", "1 extent (ns)", "10k-extent list ns/ext",
              "10k-extent pattern ns/ext");
  for (const bench::RawSpeedRow& r : raw) {
    std::printf("  %10zu %18.0f %24.0f %24.0f\n", r.table_locks, r.single_ns, r.list_ns_per_extent,
                r.pattern_ns_per_extent);
  }
  return raw;
}

// DIR/locks.csv, and DIR/locks_raw.csv when the raw speed was measured.
// False when locks.csv cannot be written (said on stderr).
bool WriteCsvs(const std::string& dir, const std::vector<Row>& rows,
               const std::vector<bench::RawSpeedRow>& raw) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = dir + "/locks.csv";
  std::ofstream csv(path);
  if (!csv) {
    std::fprintf(stderr, "clf bench locks: cannot write %s\n", path.c_str());
    return false;
  }
  csv << "workload,clients,method,locks_per_client,max_concurrent,seconds\n";
  for (const Row& row : rows) {
    csv << row.workload << ',' << row.clients << ',' << bench::MethodName(row.method) << ','
        << row.r.locks_per_client << ',' << row.r.max_concurrent << ',' << row.r.seconds << '\n';
  }
  if (!raw.empty()) {
    std::ofstream rcsv(dir + "/locks_raw.csv");
    rcsv << "table_locks,single_ns,list_ns_per_extent,pattern_ns_per_extent\n";
    for (const bench::RawSpeedRow& r : raw) {
      rcsv << r.table_locks << ',' << r.single_ns << ',' << r.list_ns_per_extent << ','
           << r.pattern_ns_per_extent << '\n';
    }
  }
  std::printf("\nwrote %s\n", path.c_str());
  return true;
}

// Simulated workloads -> paper tables -> raw lock-table speed -> CSV.
int Run(const Options& o) {
  const bench::SimOptions sim = SimOptionsOf(o);
  const std::vector<Workload> workloads = SimWorkloads(o);
  std::printf(
      "clf bench locks: %s mode, simulated I/O = %.1f ms + bytes / %.0f MB/s, exclusive locks\n",
      o.quick ? "quick" : "full", o.latency_ms, sim.megabytes_per_second);
  if (!workloads.empty()) WarmHeap(o.quick);
  const std::vector<Row> rows = RunSims(workloads, sim);
  PrintPaperTables(rows);
  std::vector<bench::RawSpeedRow> raw;
  if (!o.skip_raw) raw = RunAndPrintRawSpeed(o.quick);
  if (!o.out.empty() && !WriteCsvs(o.out, rows, raw)) return 1;
  return 0;
}

}  // namespace

// Long on purpose: the command's table of options (CLI11), then its dispatch.
void AddBenchLocksCommand(CLI::App& bench) {
  auto opts = std::make_shared<Options>();
  auto cl = std::make_shared<bench::ClusterBenchOptions>();
  auto cluster = std::make_shared<bool>(false);
  auto worker = std::make_shared<bench::ClusterWorkerArgs>();
  auto is_worker = std::make_shared<bool>(false);
  auto handles = std::make_shared<std::string>();
  auto no_plots = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "locks",
      "paper 003: whole-file, byte-range and list locking on 3-D block, FLASH, tile reader");
  cmd->add_option("--out", opts->out, "directory for locks.csv (and locks_raw.csv)");
  cmd->add_flag(
      "--quick", opts->quick,
      "small configuration for tests: 3-D block 8 and 27 clients, FLASH 2 and 8, 2 frames");
  cmd->add_flag("--skip-raw", opts->skip_raw, "skip the raw table speed measurement");
  cmd->add_flag("--skip-sim", opts->skip_sim, "skip the workload simulations");
  cmd->add_option("--mbps", opts->mbps, "simulated per-client I/O bandwidth, MB/s")
      ->capture_default_str();
  cmd->add_option("--latency-ms", opts->latency_ms, "simulated per-access latency, ms")
      ->capture_default_str();
  cmd->add_flag("--cluster", *cluster,
                "run the workloads on a real local cluster (clfd processes, one client process "
                "per client, writes through libclf) and measure the lock service over gRPC");
  cmd->add_option("--servers", cl->servers, "--cluster: number of clfd")->capture_default_str();
  cmd->add_option("--clients", cl->clients, "--cluster: client counts of 3-D block and FLASH")
      ->delimiter(',');
  cmd->add_option("--frames", cl->frames, "--cluster: tile reader frames")->capture_default_str();
  cmd->add_option("--repeat", cl->repeat, "--cluster: runs per point (median)")
      ->capture_default_str();
  cmd->add_flag("--no-plots", *no_plots, "--cluster: CSV only (no gnuplot)");
  cmd->add_flag("--skip-workloads", cl->skip_workloads, "--cluster: only the raw lock service");
  cmd->add_flag("--sync", cl->sync,
                "--cluster: writers sync their data to the servers' disks before unlocking (and "
                "without locks, before finishing); list locking then goes through LockList + "
                "writes + Sync + Unlock instead of AtomicWriteList");
  cmd->add_flag("--netns", cl->netns,
                "--cluster: every clfd, every client worker and the driver in its own network "
                "namespace, links shaped by tc tbf (needs root)");
  cmd->add_option("--rate", cl->rate, "--cluster --netns: each client's link (tc rate)")
      ->capture_default_str();
  cmd->add_option("--server-rate", cl->server_rate,
                  "--cluster --netns: each server's link (default: --rate)");
  cmd->add_option("--burst", cl->burst,
                  "--cluster --netns: tc tbf bucket of the client links (bytes up to it pass at line "
                  "rate; keep it well below a client's share)")
      ->capture_default_str();
  cmd->add_option("--workloads", cl->workloads,
                  "--cluster: which of 3d-block, flash, tile run (default: all)")
      ->delimiter(',');
  cmd->add_option("--files", cl->files,
                  "--cluster: files each 3-D block / FLASH client writes per run, one after the other "
                  "(whole-file and byte-range locks then pipeline across files: keep 1 to "
                  "compare with the paper)")
      ->capture_default_str();
  // The worker mode of --cluster (one client process), started by the driver.
  cmd->add_flag("--worker", *is_worker)->group("");
  cmd->add_option("--cluster-file", worker->cluster_file)->group("");
  cmd->add_option("--workload", worker->workload)->group("");
  cmd->add_option("--worker-clients", worker->clients)->group("");
  cmd->add_option("--index", worker->index)->group("");
  cmd->add_option("--method", worker->method)->group("");
  cmd->add_option("--handles", *handles)->group("");
  CLI::Option* mbps = cmd->get_option("--mbps");
  cmd->callback([opts, mbps, cl, cluster, worker, is_worker, handles, no_plots] {
    if (*is_worker) {
      std::string hs = *handles;
      for (size_t pos = 0; pos < hs.size();) {
        size_t comma = hs.find(',', pos);
        if (comma == std::string::npos) comma = hs.size();
        worker->handles.push_back(std::stoull(hs.substr(pos, comma - pos)));
        pos = comma + 1;
      }
      worker->sync = cl->sync;
      return Exit(bench::RunClusterWorker(*worker));
    }
    if (*cluster) {
      cl->out = opts->out;
      cl->quick = opts->quick;
      cl->skip_raw = opts->skip_raw;
      cl->plots = !*no_plots;
      return Exit(bench::RunClusterBench(*cl));
    }
    opts->mbps_set = mbps->count() > 0;
    Exit(Run(*opts));
  });
}

}  // namespace clf::tools
