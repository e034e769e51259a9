// PNG plots of the `clf sim` results, drawn by gnuplot run as an external
// program (Debian: gnuplot-nox). Each function writes a gnuplot script with
// the data inline next to the PNGs, then runs it; it fails with a message
// naming the package if gnuplot is not on PATH.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "tools/sim/experiments.h"

namespace clf::tools::sim {

// DIR/paper001-<pattern>-<sizes>.png: one panel per compute:I/O ratio, ratio
// to EATF against the number of I/O nodes, one line per heuristic.
Status PlotPaper001(const std::string& dir, const std::vector<Paper001Row>& rows);

// DIR/paper000.png: throughput against schedule block size, writes and reads.
Status PlotPaper000(const std::string& dir, const std::vector<Paper000Row>& rows, double link_mb_s,
                    int clients);

// DIR/sched.png (`clf bench sched`): measured aggregate write and read
// throughput against b, one line per policy, with the simulator's prediction
// for the same setting dashed; `ceiling_mb_s` (all links busy) as a line.
struct SchedBenchPoint {
  std::string policy;
  int64_t block_bytes = 0;
  double write_mb_s = 0, read_mb_s = 0;
  double sim_write_mb_s = 0, sim_read_mb_s = 0;
};
Status PlotSchedBench(const std::string& dir, const std::vector<SchedBenchPoint>& points,
                      const std::string& title, double ceiling_mb_s);

}  // namespace clf::tools::sim
