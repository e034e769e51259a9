// clf bench transport: one client (libclf, in this process) to one server of a
// running cluster, per bulk-data transport: N MiB written then read back in
// requests of a fixed size, W requests in flight, with the bytes checked. Then
// iperf3 on loopback in the same run, so each transport's MB/s comes with its
// share of what a plain TCP stream does on this machine (issue 7: the TCP
// channel should reach >= 70% of it with 1 MiB requests). No FUSE here: this
// is the transport; scripts/bench-transports.sh measures the same through a
// mount.
//
// Two kinds of writes: fresh (N MiB of new data: every byte lands on a page
// the server's page cache allocates for it) and rewrite (the same N MiB of
// traffic sent to a region of R MiB of the file, over and over: after the
// first pass the server's pages are there). On a VM that hands free memory
// back to its host (free page reporting, as this project's Firecracker VMs),
// a new page-cache page costs a host fault on first touch, so fresh writes
// measure that cost as much as the channel; rewrites measure the channel.
//
// The bench makes a folder /.bench-transport-<pid> whose layout puts each file
// on one server (stripe count 1; the cluster picks which), and removes it at
// the end.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clf/client.h"
#include "common/config.h"
#include "common/sched_settings.h"
#include "tools/bench/bench_files.h"
#include "tools/commands.h"
#include "tools/process_util.h"

namespace clf::tools {
namespace {


struct Options {
  std::string cluster;
  uint64_t mib = 1024;
  std::string request = "1M";
  std::vector<uint32_t> windows = {1, 4};
  std::vector<uint64_t> regions = {0, 64};  // MiB; 0: fresh data
  std::vector<std::string> transports = {"tcp", "rdma", "grpc"};
  int iperf_seconds = 5;
  bool no_iperf = false;
};

char PatternAt(uint64_t off) { return static_cast<char>((off * 2654435761u) >> 13); }

// Runs `count` requests, at most `window` in flight; start(i, done) starts
// request i and calls done(status) once. Returns the first error.
Status Pipeline(uint64_t count, uint32_t window,
                const std::function<void(uint64_t, std::function<void(Status)>)>& start) {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next = 0, finished = 0;
  uint32_t in_flight = 0;
  Status first = Status::Ok();
  std::unique_lock<std::mutex> l(mu);
  while (finished < count) {
    while (next < count && in_flight < window && first.ok()) {
      const uint64_t i = next++;
      ++in_flight;
      l.unlock();
      start(i, [&](Status s) {
        std::lock_guard<std::mutex> g(mu);
        --in_flight;
        ++finished;
        if (!s.ok() && first.ok()) first = s;
        cv.notify_all();
      });
      l.lock();
    }
    if (!first.ok() && in_flight == 0) break;
    // A request may finish while start() runs unlocked: wait on the state,
    // not for a notification that may already have come.
    cv.wait(l, [&] {
      return finished >= count || (!first.ok() && in_flight == 0) ||
             (first.ok() && next < count && in_flight < window);
    });
  }
  return first;
}

struct Row {
  std::string transport;
  uint32_t window = 0;
  uint64_t region_mib = 0;  // 0: fresh data
  uint32_t server = 0;
  double write_mbs = 0, read_mbs = 0;
  std::string error;
};

Row Measure(const Options& o, const ClusterConfig& cfg, const std::string& transport, uint32_t window,
            uint64_t region_mib, uint64_t req_bytes, const std::string& dir_name) {
  Row row;
  row.transport = transport;
  row.window = window;
  row.region_mib = region_mib;
  auto fail = [&row](const Status& s) {
    row.error = s.ToString();
    return row;
  };
  client::ClientOptions co;
  co.transport = transport;
  Result<std::unique_ptr<client::Client>> opened = client::Client::Open(cfg, co);
  if (!opened.ok()) return fail(opened.status());
  client::Client& c = **opened;
  Result<client::Attr> dir = c.ResolvePath("/" + dir_name);
  if (!dir.ok()) return fail(dir.status());
  const std::string name = transport + "-w" + std::to_string(window) + "-r" + std::to_string(region_mib);
  client::CreateArgs ca;
  Result<client::Attr> f = c.CreateSync(dir->handle, name, ca);
  if (!f.ok()) return fail(f.status());
  row.server = f->layout.first_server;
  const uint64_t count = o.mib * (1u << 20) / req_bytes;
  // Request i goes to OffsetOf(i): i * req, or within the rewrite region.
  const uint64_t region = region_mib == 0 ? count * req_bytes : region_mib << 20;
  auto offset_of = [&](uint64_t i) { return (i * req_bytes) % region; };
  // One buffer per request slot: the byte at file offset o is PatternAt(o).
  std::vector<std::string> bufs(count);
  for (uint64_t i = 0; i < count; ++i) {
    bufs[i].resize(req_bytes);
    for (uint64_t k = 0; k < req_bytes; k += 512) bufs[i][k] = PatternAt(offset_of(i) + k);
  }
  // Connect first (one small write), outside the clock.
  if (Status s = c.WriteSync(f->handle, f->layout, 0, std::string(4096, 'x')).status(); !s.ok()) return fail(s);
  const int64_t w0 = MonoNs();
  Status ws = Pipeline(count, window, [&](uint64_t i, std::function<void(Status)> done) {
    c.Write(f->handle, f->layout, offset_of(i), std::move(bufs[i]),
            [done = std::move(done)](Result<uint64_t> r) { done(r.status()); });
  });
  const int64_t w1 = MonoNs();
  if (!ws.ok()) return fail(ws.WithContext("write"));
  uint64_t bad = 0;
  std::mutex bad_mu;
  const int64_t r0 = MonoNs();
  Status rs = Pipeline(count, window, [&](uint64_t i, std::function<void(Status)> done) {
    c.Read(f->handle, f->layout, offset_of(i), req_bytes,
           [&, i, done = std::move(done)](Result<std::string> r) {
             if (r.ok()) {
               uint64_t b = 0;
               for (uint64_t k = 0; k < req_bytes; k += 512) b += (*r)[k] != PatternAt(offset_of(i) + k);
               std::lock_guard<std::mutex> g(bad_mu);
               bad += b;
             }
             done(r.status());
           });
  });
  const int64_t r1 = MonoNs();
  if (!rs.ok()) return fail(rs.WithContext("read"));
  (void)c.RemoveSync(dir->handle, name, false);
  if (bad != 0) return fail(IoError(std::to_string(bad) + " sampled bytes read back differ"));
  const double bytes = static_cast<double>(count * req_bytes);
  row.write_mbs = bytes / (static_cast<double>(w1 - w0) / 1e9) / 1e6;
  row.read_mbs = bytes / (static_cast<double>(r1 - r0) / 1e9) / 1e6;
  return row;
}

// iperf3 on loopback: one stream, `seconds` long. MB/s received, or < 0.
double Iperf3(int seconds, std::string* why) {
  Result<std::vector<uint16_t>> ports = PickFreePorts(1);
  if (!ports.ok()) return *why = ports.status().ToString(), -1;
  const std::string port = std::to_string((*ports)[0]);
  Result<pid_t> srv = Spawn({"iperf3", "-s", "-p", port, "-B", "127.0.0.1"},
                            SpawnOptions{"/dev/null", "", true, false, {}});
  if (!srv.ok()) return *why = "iperf3 not installed (apt install iperf3)", -1;
  Result<RunResult> r = Unavailable("iperf3 not run");
  usleep(300000);  // let the server listen
  for (int attempt = 0; attempt < 20; ++attempt) {  // it may still not listen
    r = Run({"iperf3", "-c", "127.0.0.1", "-p", port, "-t", std::to_string(seconds), "-J"},
            (seconds + 20) * 1000);
    if (r.ok() && r->exit_code == 0) break;
    usleep(100000);
  }
  StopProcess(*srv, 1000);
  if (!r.ok() || r->exit_code != 0) return *why = "iperf3 failed: " + (r.ok() ? r->output : r.status().ToString()), -1;
  try {
    const auto j = nlohmann::json::parse(r->output);
    return j.at("end").at("sum_received").at("bits_per_second").get<double>() / 8 / 1e6;
  } catch (const std::exception& e) {
    *why = std::string("iperf3 output: ") + e.what() + "\n" + r->output.substr(0, 2000);
    return -1;
  }
}

// --request's size in bytes, checked against --mib and --regions; the
// error's message is the line to print.
Result<uint64_t> RequestBytes(const Options& o) {
  Result<uint64_t> req = ParseByteSize(o.request);
  if (!req.ok() || *req == 0 || *req > (64u << 20) || (o.mib << 20) % *req != 0) {
    return Invalid("--request must be a size up to 64M dividing --mib MiB");
  }
  for (uint64_t r : o.regions) {
    if (r != 0 && ((r << 20) % *req != 0 || r > o.mib)) {
      return Invalid("--regions: each must be 0 or a multiple of the request size up to --mib");
    }
  }
  return *req;
}

// The folder /`dir_name` whose files live on one server each (stripe count
// 1). False: why, said on stderr.
bool MakeBenchDir(const ClusterConfig& cfg, const std::string& dir_name) {
  Result<std::unique_ptr<client::Client>> c = client::Client::Open(cfg);
  if (!c.ok()) {
    std::fprintf(stderr, "bench transport: %s\n", c.status().ToString().c_str());
    return false;
  }
  client::CreateArgs ca;
  ca.type = client::FileType::kDirectory;
  ca.mode = 0755;
  Result<client::Attr> d = (*c)->CreateSync((*c)->root(), dir_name, ca);
  client::SetAttrArgs sa;
  sa.valid = client::kSetLayout;
  sa.layout = Layout{1u << 20, 1, 0, 1};
  Status s = d.ok() ? (*c)->SetAttrSync(d->handle, sa).status() : d.status();
  if (!s.ok()) {
    std::fprintf(stderr, "bench transport: set up /%s: %s\n", dir_name.c_str(),
                 s.ToString().c_str());
    return false;
  }
  return true;
}

void PrintSetup(const Options& o, const ClusterConfig& cfg) {
  std::printf("one client -> one server (each file has stripe count 1), %llu MiB in %s requests, "
              "written then read\n",
              static_cast<unsigned long long>(o.mib), o.request.c_str());
  // The servers' early writeback competes with the transfer for CPU (docs/ARCHITECTURE.md).
  if (cfg.early_writeback_kib == 0) {
    std::printf("servers' early writeback: off (early_writeback_kib = 0)\n");
  } else {
    std::printf("servers' early writeback: writes of %u KiB or more (early_writeback_kib)\n",
                static_cast<unsigned>(cfg.early_writeback_kib));
  }
}

std::string KindOf(const Row& r) {
  return r.region_mib == 0 ? std::string("fresh")
                           : "rewrite " + std::to_string(r.region_mib) + " MiB";
}

// Every (region, transport, window), each printed as it ends.
std::vector<Row> MeasureAll(const Options& o, const ClusterConfig& cfg, uint64_t req,
                            const std::string& dir_name) {
  std::vector<Row> rows;
  for (uint64_t region : o.regions) {
    for (const std::string& t : o.transports) {
      for (uint32_t w : o.windows) {
        rows.push_back(Measure(o, cfg, t, w, region, req, dir_name));
        const Row& r = rows.back();
        if (!r.error.empty()) {
          std::printf("  %-5s window %-3u %-16s n/a: %s\n", t.c_str(), w, KindOf(r).c_str(),
                      r.error.c_str());
        } else {
          std::printf("  %-5s window %-3u %-16s write %8.0f MB/s   read %8.0f MB/s   (server %u)\n",
                      t.c_str(), w, KindOf(r).c_str(), r.write_mbs, r.read_mbs, r.server);
        }
        std::fflush(stdout);
      }
    }
  }
  return rows;
}

// iperf3 on loopback, and each measured row's share of it.
void PrintIperfShares(const Options& o, const std::vector<Row>& rows) {
  std::string why;
  const double iperf = Iperf3(o.iperf_seconds, &why);
  if (iperf <= 0) {
    std::printf("iperf3: n/a (%s)\n", why.c_str());
    return;
  }
  std::printf("iperf3 loopback, one stream, %d s: %.0f MB/s\n", o.iperf_seconds, iperf);
  std::printf("share of iperf3:\n");
  for (const Row& r : rows) {
    if (!r.error.empty()) continue;
    std::printf("  %-5s window %-3u %-16s write %5.1f%%   read %5.1f%%\n", r.transport.c_str(),
                r.window, KindOf(r).c_str(), 100 * r.write_mbs / iperf, 100 * r.read_mbs / iperf);
  }
}

// Cluster file and sizes checked -> the bench folder -> every measurement ->
// the folder removed -> iperf3 for comparison.
int RunBench(const Options& o) {
  Result<ClusterConfig> cfg = LoadClusterConfig(o.cluster);
  if (!cfg.ok()) {
    std::fprintf(stderr, "bench transport: %s\n", cfg.status().ToString().c_str());
    return 1;
  }
  Result<uint64_t> req = RequestBytes(o);
  if (!req.ok()) {
    std::fprintf(stderr, "bench transport: %s\n", req.status().message().c_str());
    return 2;
  }
  const std::string dir_name = ".bench-transport-" + std::to_string(getpid());
  if (!MakeBenchDir(*cfg, dir_name)) return 1;
  PrintSetup(o, *cfg);
  const std::vector<Row> rows = MeasureAll(o, *cfg, *req, dir_name);
  if (Result<std::unique_ptr<client::Client>> c = client::Client::Open(*cfg); c.ok()) {
    (void)(*c)->RemoveSync((*c)->root(), dir_name, true);
  }
  if (!o.no_iperf) PrintIperfShares(o, rows);
  return 0;
}

}  // namespace

void AddBenchTransportCommand(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand(
      "transport",
      "one client to one server per bulk-data transport (tcp, rdma, grpc), 1 MiB requests, "
      "against iperf3 on loopback in the same run");
  cmd->add_option("--cluster", o->cluster, "cluster file")->envname("CLF_CLUSTER")->required();
  cmd->add_option("--mib", o->mib, "MiB written and read per transport and window")->capture_default_str();
  cmd->add_option("--request", o->request, "request size")->capture_default_str();
  cmd->add_option("--windows", o->windows, "requests in flight (1,4 or 1 4)")->delimiter(',')->capture_default_str();
  cmd->add_option("--regions", o->regions,
                  "MiB of the file the writes go to, over and over (0: fresh data, every byte new)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--transports", o->transports, "tcp, rdma (the cluster's rdma_provider), grpc")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--iperf-seconds", o->iperf_seconds, "length of the iperf3 run")->capture_default_str();
  cmd->add_flag("--no-iperf", o->no_iperf, "skip iperf3");
  cmd->callback([o] { Exit(RunBench(*o)); });
}

}  // namespace clf::tools
