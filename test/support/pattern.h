// Deterministic test data, shared by the test binaries and their helper
// processes: byte i of the stream (seed, offset) depends only on seed and
// offset + i, so any region of a file can be regenerated for verification.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace clf::testing {

inline uint8_t PatternByte(uint64_t seed, uint64_t pos) {
  uint64_t x = pos * 0x9E3779B97F4A7C15ull + (seed + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<uint8_t>(x & 0xff);
}

inline std::string PatternBytes(uint64_t seed, uint64_t offset, size_t length) {
  std::string out(length, '\0');
  for (size_t i = 0; i < length; ++i) out[i] = static_cast<char>(PatternByte(seed, offset + i));
  return out;
}

// Index of the first differing byte, or -1 if equal (and of equal length).
inline int64_t FirstDifference(const std::string& a, const std::string& b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

}  // namespace clf::testing
