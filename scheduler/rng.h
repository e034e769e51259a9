// Rng: a small seeded pseudo-random generator (SplitMix64) for the scheduler.
// The standard library's distributions differ between implementations, so the
// scheduler draws its own numbers: the same seed gives the same schedule on
// every platform. Not thread safe; one per caller.
#pragma once

#include <cstdint>

namespace clf::scheduler {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n); n must be > 0. Rejection sampling, so no modulo bias.
  uint64_t Uniform(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x = Next();
    while (x >= limit) x = Next();
    return x % n;
  }

  // Uniform in [lo, hi], lo <= hi.
  int64_t Range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Uniform(static_cast<uint64_t>(hi - lo) + 1));
  }

  // True with probability num/den.
  bool Chance(uint64_t num, uint64_t den) { return Uniform(den) < num; }

 private:
  uint64_t state_;
};

}  // namespace clf::scheduler
