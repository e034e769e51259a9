#include "scheduler/workload.h"

#include <algorithm>
#include <vector>

#include "scheduler/order_policy.h"

namespace clf::scheduler {

std::string_view RequestPatternName(RequestPattern p) {
  return p == RequestPattern::kRandom ? "random" : "all-to-all";
}

std::string_view SizeClassName(SizeClass s) {
  return s == SizeClass::kUniform ? "uniform" : "variable";
}

Problem MakePaper001Problem(const Paper001Config& config, Rng& rng) {
  Problem p;
  p.num_compute_nodes = config.compute_nodes;
  p.num_io_nodes = config.io_nodes;
  const int m = config.io_nodes;
  auto add = [&](int c, int primary) {
    Transfer tr;
    tr.compute_node = c;
    tr.size = config.sizes == SizeClass::kUniform ? 1 : rng.Range(1, 1024);
    for (int k = 0; k < config.replicas; ++k) tr.io_nodes.push_back((primary + k) % m);
    p.transfers.push_back(std::move(tr));
  };
  for (int c = 0; c < config.compute_nodes; ++c) {
    for (int j = 0; j < m; ++j) {
      if (config.pattern == RequestPattern::kAllToAll || rng.Chance(1, 2)) add(c, j);
    }
  }
  if (p.transfers.empty()) {
    add(static_cast<int>(rng.Uniform(config.compute_nodes)), static_cast<int>(rng.Uniform(m)));
  }
  return p;
}

Result<Problem> MakeStripedAccessProblem(const StripedAccessConfig& config) {
  if (config.clients <= 0 || config.servers <= 0 || config.bytes_per_client <= 0 ||
      config.stripe_unit <= 0 || config.block_bytes <= 0) {
    return Invalid("striped access: every count and size must be > 0");
  }
  Problem p;
  p.num_compute_nodes = config.clients;
  p.num_io_nodes = config.servers;
  for (int c = 0; c < config.clients; ++c) {
    std::vector<PeerExtent> extents;
    const int64_t begin = c * config.bytes_per_client;
    const int64_t end = begin + config.bytes_per_client;
    for (int64_t off = begin; off < end;) {
      const int64_t unit = off / config.stripe_unit;
      const int64_t unit_end = std::min(end, (unit + 1) * config.stripe_unit);
      extents.push_back({static_cast<int>(unit % config.servers), off, unit_end - off});
      off = unit_end;
    }
    for (const ScheduleBlock& b : CutIntoScheduleBlocks(std::move(extents), config.block_bytes)) {
      Transfer tr;
      tr.compute_node = c;
      tr.size = b.bytes;
      tr.io_nodes = {b.peer};
      p.transfers.push_back(std::move(tr));
    }
  }
  return p;
}

}  // namespace clf::scheduler
