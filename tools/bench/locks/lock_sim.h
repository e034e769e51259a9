// LockSim: runs a Workload with one thread per client against an in-process
// LockManager. Each client, for each of its files, acquires its lock (method
// none | file | range | list, exclusive, as the paper's atomic mode), holds it
// for a simulated I/O time, and releases it. All clients start together.
// Thread safety: Run() is called from one thread and starts its own threads.
#pragma once

#include <chrono>
#include <string>

#include "tools/bench/locks/workloads.h"

namespace clf::tools::bench {

enum class LockMethod { kNone, kFile, kRange, kList };
const char* MethodName(LockMethod m);

struct SimOptions {
  // Simulated I/O time of one access: latency + bytes / bandwidth.
  std::chrono::microseconds latency{100000};
  double megabytes_per_second = 100.0;
};

struct SimResult {
  uint64_t locks_per_client = 0;  // max over clients of extents locked per file
  int max_concurrent = 0;         // most clients holding locks on one file at once
  double seconds = 0;             // wall time from the common start to the last release
  double lock_seconds = 0;        // total time clients spent inside Lock() calls
};

SimResult RunLockSim(const Workload& w, LockMethod method, const SimOptions& options);

}  // namespace clf::tools::bench
