// Small helpers shared by the parts of MetaOps (meta_ops.cc, collective.cc,
// garbage_collector.cc, group_commit.cc). Internal to server/ops.
#pragma once

#include <chrono>
#include <cstdint>

#include "clf/v1/common.pb.h"
#include "common/layout.h"

namespace clf::server {

inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

inline Layout FromProto(const v1::Layout& l) {
  return Layout{l.stripe_size(), l.stripe_count(), l.first_server(),
                l.replicas(),    l.sched_policy(), l.sched_block()};
}
inline v1::Layout ToProto(const Layout& l) {
  v1::Layout p;
  p.set_stripe_size(l.stripe_size);
  p.set_stripe_count(l.stripe_count);
  p.set_first_server(l.first_server);
  p.set_replicas(l.replicas);
  p.set_sched_policy(l.sched_policy);
  p.set_sched_block(l.sched_block);
  return p;
}

inline bool IsDir(const v1::Attr& a) { return a.type() == v1::FT_DIRECTORY; }


}  // namespace clf::server
