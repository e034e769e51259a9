// Small helpers shared by the parts of MetaOps (meta_ops.cc, collective.cc,
// garbage_collector.cc, group_commit.cc). Internal to server/ops.
#pragma once

#include <chrono>
#include <cstdint>

#include "clf/v1/common.pb.h"
#include "common/layout.h"
#include "common/layout_proto.h"

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

using clf::FromProto;  // common/layout_proto.h
using clf::ToProto;

inline bool IsDir(const v1::Attr& a) { return a.type() == v1::FT_DIRECTORY; }


}  // namespace clf::server
