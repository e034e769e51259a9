// What one step of a differential run gave on one side: the call's return
// value, its errno, and what was observed after it (bytes read, stat fields,
// names). Two sides agree when all three are equal.
#pragma once

#include <cerrno>
#include <cstdint>
#include <random>
#include <string>

namespace clf::torture {

struct Outcome {
  long rc = 0;
  int err = 0;
  std::string info;
  bool operator==(const Outcome&) const = default;
};

// rc < 0: -1 with the errno; else rc.
inline Outcome Sys(long rc) {
  Outcome o;
  o.rc = rc < 0 ? -1 : rc;
  o.err = rc < 0 ? errno : 0;
  return o;
}

std::string Describe(const Outcome& o);

// The seeded generator every run draws from (same seed, same sequence).
class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  // Uniform in [lo, hi].
  uint64_t In(uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(g_); }
  bool Chance(int percent) { return In(0, 99) < static_cast<uint64_t>(percent); }
  template <typename T, size_t N>
  const T& Pick(const T (&a)[N]) {
    return a[In(0, N - 1)];
  }

 private:
  std::mt19937_64 g_;
};

// Bytes `len` long derived from `tag` (the same on both sides).
std::string Pattern(uint64_t tag, size_t len);

}  // namespace clf::torture
