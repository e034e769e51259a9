// `clf bench locks --cluster`: paper 003's workloads on a real local cluster.
//
// The driver starts `servers` clfd processes in a temporary directory (as
// `clf up` does, without a mount), creates one file per run through libclf,
// and starts one worker process per client: this `clf` binary in its hidden
// worker mode (`clf bench locks --worker ...`). A worker opens its own
// libclf Client and LockClient, prepares its extents and data, says "ready"
// on stdout, waits for "go" on stdin, then locks (none | whole file | byte
// range | list), writes (reads for the tile reader) every extent through
// libclf and unlocks, and prints its CLOCK_MONOTONIC start and end. The run's
// time is from the driver's "go" to the last worker's end. It also measures
// the lock service alone: acquire + release round trips through gRPC against
// the in-process LockManager in the same run.
//
// With netns, the driver moves itself into a namespace of the testbed before
// it opens a client (setns on the main thread, before any other thread), and
// SIGINT / SIGTERM stop the runs and remove everything it made.
//
// Thread safety: both entry points run on the main thread of their process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace clf::tools::bench {

struct ClusterBenchOptions {
  std::string out;  // CSV + PNG directory ("" = print only)
  int servers = 2;
  std::vector<int> clients = {1, 2, 4, 8};  // 3-D block and FLASH client counts
  int frames = 3;                           // tile reader frames (6 clients)
  int repeat = 3;                           // runs per point; the median is reported
  bool quick = false;                       // 1 and 2 clients, 1 frame, 1 run, short raw test
  bool skip_raw = false;
  bool skip_workloads = false;
  bool plots = true;
  bool sync = false;  // writers sync (fsync on the servers) before unlocking
  // Every clfd, every worker and the driver in a network namespace of its own
  // (tools/bench/netns_testbed.h), each link shaped by tc TBF: a client's I/O
  // time is its own link's, as on separate nodes. Needs root.
  bool netns = false;
  std::string rate = "1gbit";  // --netns: each client's link (and the driver's)
  std::string server_rate;     // --netns: each server's link ("" = rate)
  std::string burst = "256kb"; // --netns: TBF bucket of the clients' and the driver's links
  int files = 1;               // 3-D block and FLASH: files each client writes per run
  // Which workloads run (3d-block, flash, tile); empty = all.
  std::vector<std::string> workloads;
};

int RunClusterBench(const ClusterBenchOptions& o);

struct ClusterWorkerArgs {
  std::string cluster_file;
  std::string workload;  // 3d-block | flash | tile
  int clients = 0;
  int index = 0;
  std::string method;             // none | file | range | list
  std::vector<uint64_t> handles;  // one per file (tile: frames)
  bool sync = false;
};

int RunClusterWorker(const ClusterWorkerArgs& a);

}  // namespace clf::tools::bench
