#include "tools/sim/plots.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

extern "C" char** environ;

namespace clf::tools::sim {
namespace {

Status RunGnuplot(const std::string& script) {
  char arg0[] = "gnuplot";
  std::string path = script;
  char* argv[] = {arg0, path.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ);
  if (rc == ENOENT) {
    return Unavailable(
        "gnuplot not found on PATH: install it (apt-get install gnuplot-nox) or pass --no-plots; "
        "the CSV is written");
  }
  if (rc != 0) return FromErrno(rc, "spawning gnuplot");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return FromErrno(errno, "waiting for gnuplot");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return IoError("gnuplot failed on " + script);
  }
  return Status::Ok();
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return IoError("cannot write " + path);
  return Status::Ok();
}

}  // namespace

Status PlotPaper001(const std::string& dir, const std::vector<Paper001Row>& rows) {
  // (pattern, sizes) -> ratio -> io_nodes -> heuristic -> value
  std::map<std::pair<std::string, std::string>,
           std::map<int, std::map<int, std::map<std::string, double>>>>
      data;
  std::vector<std::string> heuristics;
  for (const Paper001Row& r : rows) {
    data[{r.pattern, r.sizes}][r.cn_per_ion][r.io_nodes][r.heuristic] = r.ratio_to_eatf;
    if (std::find(heuristics.begin(), heuristics.end(), r.heuristic) == heuristics.end()) {
      heuristics.push_back(r.heuristic);
    }
  }
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1500,450 font ',10'\n";
  int block = 0;
  for (const auto& [key, by_ratio] : data) {
    gp << "set output '" << dir << "/paper001-" << key.first << "-" << key.second << ".png'\n";
    gp << "set multiplot layout 1," << by_ratio.size() << " title 'paper 001, " << key.first
       << " requests, " << key.second << " sizes: finish time / EATF finish time'\n";
    for (const auto& [ratio, by_m] : by_ratio) {
      const std::string name = "$d" + std::to_string(block++);
      gp << name << " << EOD\n";
      for (const auto& [m, by_h] : by_m) {
        gp << m;
        for (const std::string& h : heuristics) gp << " " << by_h.at(h);
        gp << "\n";
      }
      gp << "EOD\n";
      gp << "set title 'CN:ION = " << ratio << ":1'\nset xlabel 'I/O nodes'\n"
         << "set ylabel 'ratio to EATF'\nset key top left\nset grid\n";
      gp << "plot ";
      for (size_t h = 0; h < heuristics.size(); ++h) {
        gp << (h ? ", " : "") << name << " using 1:" << h + 2 << " with linespoints title '"
           << heuristics[h] << "'";
      }
      gp << "\n";
    }
    gp << "unset multiplot\n";
  }
  const std::string script = dir + "/paper001.gp";
  CLF_RETURN_IF_ERROR(WriteFile(script, gp.str()));
  return RunGnuplot(script);
}

Status PlotPaper000(const std::string& dir, const std::vector<Paper000Row>& rows, double link_mb_s,
                    int clients) {
  std::map<std::string, std::map<int64_t, double>> by_policy;
  for (const Paper000Row& r : rows) by_policy[r.policy][r.block_bytes] = r.throughput_mb_s;
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1200,450 font ',10'\n";
  gp << "set output '" << dir << "/paper000.png'\n";
  gp << "set multiplot layout 1,2 title 'paper 000 setting: " << clients
     << " clients x 32 MiB, one transfer at a time per node, link " << link_mb_s << " MB/s'\n";
  int block = 0;
  for (bool read : {false, true}) {
    gp << "set title '" << (read ? "read (servers order)" : "write (clients order)") << "'\n"
       << "set logscale x 2\nset xlabel 'schedule block b (KiB)'\n"
       << "set ylabel 'aggregate MB/s'\nset key bottom right\nset grid\nset yrange [0:*]\n";
    std::vector<std::pair<std::string, std::string>> series;
    for (const auto& [policy, points] : by_policy) {
      const bool is_read = policy.size() > 5 && policy.ends_with("-read");
      if (is_read != read) continue;
      const std::string name = "$p" + std::to_string(block++);
      gp << name << " << EOD\n";
      for (const auto& [b, mbs] : points) gp << b / 1024.0 << " " << mbs << "\n";
      gp << "EOD\n";
      series.emplace_back(name, policy);
    }
    gp << "plot ";
    for (size_t i = 0; i < series.size(); ++i) {
      gp << (i ? ", " : "") << series[i].first << " using 1:2 with linespoints title '"
         << series[i].second << "'";
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  const std::string script = dir + "/paper000.gp";
  CLF_RETURN_IF_ERROR(WriteFile(script, gp.str()));
  return RunGnuplot(script);
}

Status PlotSchedBench(const std::string& dir, const std::vector<SchedBenchPoint>& points,
                      const std::string& title, double ceiling_mb_s) {
  std::vector<std::string> policies;
  for (const SchedBenchPoint& p : points) {
    if (std::find(policies.begin(), policies.end(), p.policy) == policies.end()) {
      policies.push_back(p.policy);
    }
  }
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1400,560 noenhanced\n";
  gp << "set output '" << dir << "/sched.png'\n";
  gp << "set multiplot layout 1,2 title '" << title << "'\n";
  int block = 0;
  for (bool read : {false, true}) {
    gp << "set title '"
       << (read ? "read (servers order the waiting blocks)" : "write (clients order)")
       << "'\nset logscale x 2\nset xlabel 'schedule block b (KiB)'\n"
       << "set ylabel 'aggregate MB/s'\nset key outside bottom center horizontal\nset grid\n"
       << "set yrange [0:" << ceiling_mb_s * 1.1 << "]\n";
    std::vector<std::string> plots;
    int color = 1;
    for (const std::string& policy : policies) {
      const std::string m = "$m" + std::to_string(block), s = "$s" + std::to_string(block);
      ++block;
      gp << m << " << EOD\n";
      for (const SchedBenchPoint& p : points) {
        if (p.policy == policy)
          gp << p.block_bytes / 1024.0 << " " << (read ? p.read_mb_s : p.write_mb_s) << "\n";
      }
      gp << "EOD\n" << s << " << EOD\n";
      for (const SchedBenchPoint& p : points) {
        if (p.policy == policy) {
          gp << p.block_bytes / 1024.0 << " " << (read ? p.sim_read_mb_s : p.sim_write_mb_s)
             << "\n";
        }
      }
      gp << "EOD\n";
      plots.push_back(m + " using 1:2 with linespoints lw 2 lc " + std::to_string(color) +
                      " title '" + policy + " measured'");
      plots.push_back(s + " using 1:2 with lines dt 2 lc " + std::to_string(color) + " title '" +
                      policy + " sim'");
      ++color;
    }
    gp << "plot ";
    for (size_t i = 0; i < plots.size(); ++i) gp << (i ? ", " : "") << plots[i];
    gp << ", " << ceiling_mb_s << " with lines lc rgb 'gray' title 'all links busy'\n";
  }
  gp << "unset multiplot\n";
  const std::string script = dir + "/sched.gp";
  CLF_RETURN_IF_ERROR(WriteFile(script, gp.str()));
  return RunGnuplot(script);
}

}  // namespace clf::tools::sim
