// Handles: 64 bits, the owning server id in the top 16 bits, a per-server
// counter below. Root is server 0's first handle.
#pragma once

#include <cstdint>

namespace clf {

using Handle = uint64_t;
using ServerId = uint32_t;

inline constexpr int kServerShift = 48;
inline constexpr uint64_t kCounterMask = (uint64_t{1} << kServerShift) - 1;
inline constexpr Handle kRootHandle = 1;  // server 0, counter 1
inline constexpr uint32_t kMaxServers = 1u << 16;

constexpr ServerId ServerOf(Handle h) { return static_cast<ServerId>(h >> kServerShift); }
constexpr Handle MakeHandle(ServerId server, uint64_t counter) {
  return (static_cast<uint64_t>(server) << kServerShift) | (counter & kCounterMask);
}

}  // namespace clf
