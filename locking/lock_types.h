// Plain value types shared by the lock tables: extents, modes, owners, ids.
// Thread safety: values only; no shared state.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

#include "common/extent.h"

namespace clf::locking {

// Offsets are bytes; an extent [offset, offset + length) with length > 0.
// kToEof as a length means "to the end of the file, however large it grows".
inline constexpr uint64_t kMaxOffset = std::numeric_limits<uint64_t>::max();
inline constexpr uint64_t kToEof = kMaxOffset;

// The extent type is clf::Extent (common/extent.h): end() saturates at
// kMaxOffset, so kToEof reaches the end.
using clf::Extent;

enum class LockMode : uint8_t { kShared = 0, kExclusive = 1 };

inline bool ModesConflict(LockMode a, LockMode b) {
  return a == LockMode::kExclusive || b == LockMode::kExclusive;
}

// A client session (holder of a lease) and an owner inside it (a process, an
// open file description, an MPI rank...). Locks of the same owner never
// conflict with each other.
using SessionId = uint64_t;
struct Owner {
  SessionId session = 0;
  uint64_t owner = 0;
  auto operator<=>(const Owner&) const = default;
};

// Returned by an acquire; names everything granted under it. 0 is never used.
using LockId = uint64_t;
inline constexpr LockId kNoLock = 0;

}  // namespace clf::locking
