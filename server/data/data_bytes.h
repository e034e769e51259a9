// DataBytes: payload bytes clfd's data paths moved, per transport (the TCP data
// channel, the RDMA listener, inline gRPC Data.Write/Read) and direction
// (in: write payload received; out: read payload sent). Headers and protobuf
// framing are not counted (the gRPC interceptor counts whole messages).
// Thread safety: every method may be called from any thread (relaxed atomics:
// the counts are statistics, they order nothing).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace clf::server {

class DataBytes {
 public:
  enum Path : int { kTcp = 0, kRdma = 1, kGrpc = 2 };
  static constexpr int kPaths = 3;
  // The `transport` label value of a path: "tcp", "rdma", "grpc".
  static constexpr const char* Name(Path p) {
    return p == kTcp ? "tcp" : p == kRdma ? "rdma" : "grpc";
  }

  void AddIn(Path p, uint64_t n) { in_[p].fetch_add(n, std::memory_order_relaxed); }
  void AddOut(Path p, uint64_t n) { out_[p].fetch_add(n, std::memory_order_relaxed); }
  uint64_t in(Path p) const { return in_[p].load(std::memory_order_relaxed); }
  uint64_t out(Path p) const { return out_[p].load(std::memory_order_relaxed); }
  // Of the TCP channel's write bytes, those spliced into the object without a
  // buffer (common/transport/zero_copy.h).
  void AddZeroCopyIn(uint64_t n) { zero_copy_in_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t zero_copy_in() const { return zero_copy_in_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, kPaths> in_{};
  std::array<std::atomic<uint64_t>, kPaths> out_{};
  std::atomic<uint64_t> zero_copy_in_{0};
};

}  // namespace clf::server
