// Extent: a byte range [offset, offset + length), the one extent type from
// the client's list I/O through the data transports to the object store and
// the lock tables. Its meaning (file offsets or an object's local offsets)
// is the field or parameter's; public in libclf (clf/client.h's FileExtent,
// clf/lock_client.h's LockExtent are this type).
#pragma once

#include <cstdint>
#include <limits>

namespace clf {

struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;

  // Exclusive end, saturating at the largest offset (a lock's "to the end
  // of the file" length reaches the end).
  uint64_t end() const {
    return length > std::numeric_limits<uint64_t>::max() - offset
               ? std::numeric_limits<uint64_t>::max()
               : offset + length;
  }
  bool operator==(const Extent&) const = default;
};
static_assert(sizeof(Extent) == 16);

}  // namespace clf
