// The experiments behind `clf sim`: paper 001 Figs. 7-8 (finish time of each
// heuristic as a ratio to EATF), paper 000 §7.1 (schedule length and implied
// throughput of the decentralized policies), and the heuristics' distance
// from the exact optimum on small instances. Pure computation over
// clf::scheduler; printing and plotting are in sim_cmd.cc and gnuplot.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace clf::tools::sim {

struct Paper001Row {
  std::string pattern;  // random | all-to-all
  std::string sizes;    // uniform | variable
  int cn_per_ion = 1;
  int io_nodes = 4;
  std::string heuristic;
  double ratio_to_eatf = 1.0;  // mean finish time / mean EATF finish time
};

struct Paper001Options {
  int runs = 100;
  uint64_t seed = 1;
  std::vector<int> io_nodes = {4, 6, 8, 10, 12, 14, 16, 18, 20};
  std::vector<int> ratios = {1, 2, 4};
};

Result<std::vector<Paper001Row>> RunPaper001(const Paper001Options& options);

struct Paper000Row {
  std::string policy;  // first-ios | random-ios | hash-ios, "-read" for reads
  int64_t block_bytes = 0;
  double schedule_length_s = 0;  // mean over runs for random-ios
  double throughput_mb_s = 0;    // total bytes / schedule length, MB = 1e6 bytes
};

struct Paper000Options {
  int runs = 5;  // random-ios repetitions (others are deterministic)
  uint64_t seed = 1;
  double link_mb_s = 120;  // paper 000's measured node-to-node TCP throughput
  double latency_us = 0;   // fixed cost added to every block
  int clients = 8;
  int servers = 8;
  int64_t bytes_per_client = int64_t{32} << 20;
  int64_t stripe_unit = int64_t{64} << 10;  // paper 000: file block size 64 KB
  std::vector<int64_t> block_bytes = {4 << 10,   8 << 10,   16 << 10, 32 << 10, 64 << 10, 128 << 10,
                                      256 << 10, 512 << 10, 1 << 20,  2 << 20,  4 << 20};
};

Result<std::vector<Paper000Row>> RunPaper000(const Paper000Options& options);

struct OptimumRow {
  std::string instances;  // description of the instance family
  std::string heuristic;
  int runs = 0;
  double mean_ratio = 1.0;  // mean of heuristic length / optimal length
  double max_ratio = 1.0;
  double optimal_share = 1.0;  // fraction of runs where the heuristic was optimal
};

struct OptimumOptions {
  int runs = 100;
  uint64_t seed = 1;
};

Result<std::vector<OptimumRow>> RunOptimum(const OptimumOptions& options);

}  // namespace clf::tools::sim
