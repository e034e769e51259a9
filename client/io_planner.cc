#include "client/io_planner.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>

#include "common/transport/transport.h"

namespace clf::client {
namespace {

// A rank for a client that was given none: a hash of host name and pid, so
// clients of different processes start their hash-IOS rotation at different servers.
uint32_t DefaultRank() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  uint64_t x =
      std::hash<std::string>()(std::string(host)) ^ (uint64_t(::getpid()) * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 32;
  return static_cast<uint32_t>(x & 0xFFFFFF);
}

}  // namespace

IoPlanner::IoPlanner(const ClusterConfig& cluster, const ClientOptions& opts)
    : servers_(cluster.size()), sched_(cluster.sched) {
  if (!opts.sched.empty()) sched_.policy = ParseOrderPolicy(opts.sched).value();  // checked by Open
  if (opts.sched_block != 0) sched_.block = opts.sched_block;
  if (opts.sched_window != 0) sched_.window = opts.sched_window;
  if (!opts.read_sched.empty()) sched_.read = ParseReadSched(opts.read_sched).value();  // checked by Open
  rank_ = opts.sched_rank >= 0 ? static_cast<uint32_t>(opts.sched_rank & 0xFFFFFF) : DefaultRank();
}

SchedSettings IoPlanner::SchedFor(const Layout& l) const {
  SchedSettings s = sched_;
  if (l.sched_policy != kSchedUnset && l.sched_policy <= kMaxSchedCode) {
    s.policy = SchedFromCode(l.sched_policy);
  }
  if (l.sched_block != 0) s.block = l.sched_block;
  if (l.read_sched != 0 && l.read_sched <= kMaxReadSchedCode) s.read = ReadSchedFromCode(l.read_sched);
  if (s.window == 0) s.window = std::max<uint32_t>(1, l.stripe_count);
  return s;
}

IoPlan IoPlanner::Plan(const Layout& l, uint64_t offset, uint64_t length) {
  const SchedSettings s = SchedFor(l);
  const uint64_t seed =
      rank_ * 0x9e3779b97f4a7c15ULL + seq_.fetch_add(1, std::memory_order_relaxed);
  IoPlan p;
  p.blocks = scheduler::PlanDataBlocks(l, servers_, offset, length, s.policy, s.block, rank_, seed);
  p.window = s.window;
  p.tag = transport::SchedTag(SchedCode(s.policy), rank_);
  return p;
}

uint32_t IoPlanner::TagFor(const Layout& l) const {
  return transport::SchedTag(SchedCode(SchedFor(l).policy), rank_);
}

}  // namespace clf::client
