// `clf sim`: runs the scheduling experiments of papers 000 and 001 on the
// scheduler library, prints tables, writes CSV and draws PNG plots.
//
//   clf sim paper001 [--runs R] [--seed S] --out DIR   -> DIR/paper001.csv
//   clf sim paper000 [--runs R] [--seed S] --out DIR   -> DIR/paper000.csv
//   clf sim optimum  [--runs R] [--seed S] --out DIR   -> DIR/optimum.csv
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/sim/experiments.h"
#include "tools/sim/plots.h"

namespace clf::tools {
namespace {

using sim::OptimumRow;
using sim::Paper000Row;
using sim::Paper001Row;

struct CommonArgs {
  std::string out;
  bool no_plots = false;
};

Status PrepareDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create " + dir + ": " + ec.message());
  return Status::Ok();
}

Status WriteCsv(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return IoError("cannot write " + path);
  std::printf("wrote %s\n", path.c_str());
  return Status::Ok();
}

int Fail(const Status& s) {
  std::fprintf(stderr, "clf sim: %s\n", s.ToString().c_str());
  return 1;
}

int Paper001(const sim::Paper001Options& o, const CommonArgs& a) {
  if (Status s = PrepareDir(a.out); !s.ok()) return Fail(s);
  Result<std::vector<Paper001Row>> rows = sim::RunPaper001(o);
  if (!rows.ok()) return Fail(rows.status());
  std::string csv = "pattern,sizes,cn_per_ion,io_nodes,heuristic,ratio_to_eatf\n";
  char line[256];
  for (const Paper001Row& r : *rows) {
    std::snprintf(line, sizeof line, "%s,%s,%d,%d,%s,%.4f\n", r.pattern.c_str(), r.sizes.c_str(),
                  r.cn_per_ion, r.io_nodes, r.heuristic.c_str(), r.ratio_to_eatf);
    csv += line;
  }
  // Tables: one per (pattern, sizes); a row per (ratio, I/O nodes).
  std::vector<std::string> heuristics;
  for (const Paper001Row& r : *rows) {
    if (std::find(heuristics.begin(), heuristics.end(), r.heuristic) == heuristics.end()) {
      heuristics.push_back(r.heuristic);
    }
  }
  std::string last_group;
  std::string last_point;
  for (const Paper001Row& r : *rows) {
    const std::string group = r.pattern + " requests, " + r.sizes + " sizes";
    if (group != last_group) {
      std::printf("\npaper 001: %s (%d runs per point): finish time / EATF finish time\n",
                  group.c_str(), o.runs);
      std::printf("%-6s %-5s", "cn:ion", "ions");
      for (const std::string& h : heuristics) std::printf(" %8s", h.c_str());
      last_group = group;
      last_point.clear();
    }
    const std::string point = std::to_string(r.cn_per_ion) + "/" + std::to_string(r.io_nodes);
    if (point != last_point) {
      std::printf("\n%-6s %-5d", (std::to_string(r.cn_per_ion) + ":1").c_str(), r.io_nodes);
      last_point = point;
    }
    std::printf(" %8.3f", r.ratio_to_eatf);
  }
  std::printf("\n\n");
  if (Status s = WriteCsv(a.out + "/paper001.csv", csv); !s.ok()) return Fail(s);
  if (!a.no_plots) {
    if (Status s = sim::PlotPaper001(a.out, *rows); !s.ok()) return Fail(s);
    std::printf("wrote %s/paper001-*.png\n", a.out.c_str());
  }
  return 0;
}

int Paper000(const sim::Paper000Options& o, const CommonArgs& a) {
  if (Status s = PrepareDir(a.out); !s.ok()) return Fail(s);
  Result<std::vector<Paper000Row>> rows = sim::RunPaper000(o);
  if (!rows.ok()) return Fail(rows.status());
  std::string csv = "policy,block_bytes,schedule_length,throughput_mb_s\n";
  char line[256];
  for (const Paper000Row& r : *rows) {
    std::snprintf(line, sizeof line, "%s,%lld,%.6f,%.2f\n", r.policy.c_str(),
                  static_cast<long long>(r.block_bytes), r.schedule_length_s, r.throughput_mb_s);
    csv += line;
  }
  std::printf(
      "\npaper 000 setting: %d clients x %lld MiB to %d servers, stripe unit %lld KiB, "
      "link %.0f MB/s, latency %.0f us per block\n",
      o.clients, static_cast<long long>(o.bytes_per_client >> 20), o.servers,
      static_cast<long long>(o.stripe_unit >> 10), o.link_mb_s, o.latency_us);
  std::printf("aggregate throughput in MB/s (schedule length in s in brackets)\n%-9s", "b (KiB)");
  std::map<std::string, std::map<int64_t, const Paper000Row*>> table;
  std::vector<std::string> policies;
  for (const Paper000Row& r : *rows) {
    if (!table.count(r.policy)) policies.push_back(r.policy);
    table[r.policy][r.block_bytes] = &r;
  }
  for (const std::string& p : policies) std::printf(" %22s", p.c_str());
  std::printf("\n");
  for (int64_t b : o.block_bytes) {
    std::printf("%-9lld", static_cast<long long>(b >> 10));
    for (const std::string& p : policies) {
      const Paper000Row* r = table[p][b];
      std::printf("      %7.1f (%7.4f)", r->throughput_mb_s, r->schedule_length_s);
    }
    std::printf("\n");
  }
  std::printf("\n");
  if (Status s = WriteCsv(a.out + "/paper000.csv", csv); !s.ok()) return Fail(s);
  if (!a.no_plots) {
    if (Status s = sim::PlotPaper000(a.out, *rows, o.link_mb_s, o.clients); !s.ok()) {
      return Fail(s);
    }
    std::printf("wrote %s/paper000.png\n", a.out.c_str());
  }
  return 0;
}

int Optimum(const sim::OptimumOptions& o, const CommonArgs& a) {
  if (Status s = PrepareDir(a.out); !s.ok()) return Fail(s);
  Result<std::vector<OptimumRow>> rows = sim::RunOptimum(o);
  if (!rows.ok()) return Fail(rows.status());
  std::string csv =
      "instances,heuristic,runs,mean_ratio_to_optimum,max_ratio_to_optimum,"
      "optimal_share\n";
  char line[256];
  std::printf("\nheuristic finish time / exact optimum (branch and bound), %d instances each\n",
              o.runs);
  std::printf("%-26s %-8s %10s %10s %10s\n", "instances", "heur", "mean", "max", "optimal");
  for (const OptimumRow& r : *rows) {
    std::snprintf(line, sizeof line, "%s,%s,%d,%.4f,%.4f,%.3f\n", r.instances.c_str(),
                  r.heuristic.c_str(), r.runs, r.mean_ratio, r.max_ratio, r.optimal_share);
    csv += line;
    std::printf("%-26s %-8s %10.3f %10.3f %9.0f%%\n", r.instances.c_str(), r.heuristic.c_str(),
                r.mean_ratio, r.max_ratio, 100 * r.optimal_share);
  }
  std::printf("\n");
  if (Status s = WriteCsv(a.out + "/optimum.csv", csv); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace

void AddSimCommand(CLI::App& app) {
  CLI::App* sim = app.add_subcommand(
      "sim", "scheduling simulator: reproduce the results of papers 000 and 001");
  sim->require_subcommand(1);

  auto common = std::make_shared<CommonArgs>();
  auto add_common = [&common](CLI::App* cmd, uint64_t* seed) {
    cmd->add_option("--out", common->out, "directory for the CSV and the plots")->required();
    cmd->add_option("--seed", *seed, "seed of every random choice");
    cmd->add_flag("--no-plots", common->no_plots, "skip the gnuplot PNGs");
  };

  auto p1 = std::make_shared<sim::Paper001Options>();
  CLI::App* paper001 = sim->add_subcommand(
      "paper001", "paper 001 Figs. 7-8: LDDF, LCDF, LDSDF, SJF, EATF, Random as ratio to EATF");
  paper001->add_option("--runs", p1->runs, "instances per point (paper: 100)");
  paper001->add_option("--io-nodes", p1->io_nodes, "I/O node counts (default 4..20 step 2)");
  add_common(paper001, &p1->seed);
  paper001->callback([p1, common] { Exit(Paper001(*p1, *common)); });

  auto p0 = std::make_shared<sim::Paper000Options>();
  CLI::App* paper000 = sim->add_subcommand(
      "paper000", "paper 000 §7.1: first-, random-, hash-IOS over schedule block sizes");
  paper000->add_option("--runs", p0->runs, "random-IOS repetitions per point");
  paper000->add_option("--link-mb-s", p0->link_mb_s, "link speed in MB/s (paper: 120)");
  paper000->add_option("--latency-us", p0->latency_us, "fixed cost per block in microseconds");
  add_common(paper000, &p0->seed);
  paper000->callback([p0, common] { Exit(Paper000(*p0, *common)); });

  auto opt = std::make_shared<sim::OptimumOptions>();
  CLI::App* optimum = sim->add_subcommand(
      "optimum", "each paper 001 heuristic against the exact optimum on small instances");
  optimum->add_option("--runs", opt->runs, "instances per family");
  add_common(optimum, &opt->seed);
  optimum->callback([opt, common] { Exit(Optimum(*opt, *common)); });
}

}  // namespace clf::tools
