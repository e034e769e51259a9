// Problem generators for the papers' experiments, shared by the simulator,
// the benchmarks and the tests. Deterministic for a given Rng state.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "scheduler/problem.h"
#include "scheduler/rng.h"

namespace clf::scheduler {

// Paper 001 §5.
enum class RequestPattern { kRandom, kAllToAll };
enum class SizeClass { kUniform, kVariable };

std::string_view RequestPatternName(RequestPattern p);  // "random", "all-to-all"
std::string_view SizeClassName(SizeClass s);            // "uniform", "variable"

struct Paper001Config {
  int compute_nodes = 4;
  int io_nodes = 4;
  RequestPattern pattern = RequestPattern::kRandom;
  SizeClass sizes = SizeClass::kUniform;
  int replicas = 2;  // <= io_nodes
};

// One batch of read requests. Sizes are in MB (1 for uniform, uniform in
// 1..1024 for variable: the paper's 1 MB..1 GB). Choices the paper leaves
// open: a request for a block whose master copy is on I/O node p may be served
// by p, p+1, ..., p+replicas-1 (mod io_nodes), the replica layout of the
// paper's Fig. 1 (the copy striped one server further). All-to-all: every
// compute node requests one block from every I/O node. Random: each (compute
// node, I/O node) pair independently with probability 1/2 (so the random graph
// has half the edges of all-to-all on average), at least one request overall.
Problem MakePaper001Problem(const Paper001Config& config, Rng& rng);

// Paper 000 §7.1: each of `clients` writes `bytes_per_client` contiguous bytes
// (client i at offset i * bytes_per_client) of a file striped round-robin
// over `servers` in units of `stripe_unit`; each client cuts its data for each
// server into schedule blocks of `block_bytes`. The Problem has one transfer
// per block (size in bytes, allowed only on its server), each client's blocks
// in file-offset order, so the paper 000 policies of MakeScheduler apply
// directly ("first-ios" etc. for writes, "...-read" for reading it back).
struct StripedAccessConfig {
  int clients = 8;
  int servers = 8;
  int64_t bytes_per_client = int64_t{32} << 20;
  int64_t stripe_unit = int64_t{64} << 10;
  int64_t block_bytes = int64_t{64} << 10;
};
Result<Problem> MakeStripedAccessProblem(const StripedAccessConfig& config);

}  // namespace clf::scheduler
