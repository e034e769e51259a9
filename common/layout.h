// Layout math: where the bytes of a striped file live.
// Stripe unit u lives on server (first + u mod count) mod n; each data server
// keeps its units of a file densely packed in one local object.
#pragma once

#include <cstdint>
#include <vector>

#include "common/handle.h"
#include "common/object_ref.h"
#include "common/sched_settings.h"
#include "common/status.h"

namespace clf {

inline constexpr uint64_t kMaxFileSize = uint64_t{1} << 60;  // 1 EiB: offsets past this are EFBIG
inline constexpr uint32_t kDefaultStripeSize = 1u << 20;
inline constexpr uint32_t kMinStripeSize = 4096;
inline constexpr uint32_t kMaxStripeSize = 1u << 30;

struct Layout {
  uint32_t stripe_size = kDefaultStripeSize;
  uint32_t stripe_count = 1;
  uint32_t first_server = 0;
  uint32_t replicas = 1;
  // Data-path scheduling (paper 000) for this file, set with the directory's
  // layout and inherited like it: 0 = not set (the mount's or the cluster
  // file's setting applies); else sched_policy = 1 + OrderPolicy
  // (common/sched_settings.h) and sched_block = b in bytes.
  uint32_t sched_policy = 0;
  uint32_t sched_block = 0;
  // Replicated files: which copy serves each read block; 0 = not set, else
  // 1 + ReadSched (common/sched_settings.h).
  uint32_t read_sched = 0;
  bool operator==(const Layout&) const = default;
};

// Checks a layout against a cluster of n servers: replicas between 1 and
// min(kMaxReplicas, n).
Status ValidateLayout(const Layout& l, uint32_t n);

// Replica placement (paper 001; DESIGN.md): the copy in `slot` of the stripe
// units whose primary is `primary` lives on (primary + slot) mod n.
inline ServerId ReplicaServer(ServerId primary, uint32_t slot, uint32_t n) {
  return n == 0 ? 0 : static_cast<ServerId>((uint64_t{primary} + slot) % n);
}
// The primary whose units `holder` keeps a copy of in `slot`.
inline ServerId PrimaryOfSlot(ServerId holder, uint32_t slot, uint32_t n) {
  return n == 0 ? 0 : static_cast<ServerId>((uint64_t{holder} + n - slot % n) % n);
}
// The slots whose copies `server` holds for this layout (slot i when
// server - i is a data server), ascending.
std::vector<uint32_t> SlotsOn(const Layout& l, uint32_t n, ServerId server);
// Every server holding a copy of some units (data servers and their
// replicas), distinct, ascending.
std::vector<ServerId> CopyServers(const Layout& l, uint32_t n);

// One piece of a logical byte range: a contiguous run in one server's object.
struct Piece {
  ServerId server = 0;
  uint64_t local_offset = 0;
  uint64_t length = 0;
  uint64_t logical_offset = 0;  // position in the file
};

// Splits [offset, offset+length) into pieces in logical order.
std::vector<Piece> MapRange(const Layout& l, uint32_t n, uint64_t offset, uint64_t length);

// The servers that hold units of this layout (stripe_count distinct servers).
std::vector<ServerId> DataServers(const Layout& l, uint32_t n);

// Index of `server` within the stripe (0..count-1), or -1 if it holds no units.
int StripeIndex(const Layout& l, uint32_t n, ServerId server);

// The logical file end implied by `server`'s object holding `local_size` bytes.
uint64_t LogicalEnd(const Layout& l, uint32_t n, ServerId server, uint64_t local_size);

// The object size `server` must have for the file to be exactly `logical_size`
// long: every byte below logical_size that maps to the server is kept.
uint64_t LocalSizeFor(const Layout& l, uint32_t n, ServerId server, uint64_t logical_size);

// The first data server of a new file: a hash of its handle over n servers
// (the metadata server and a client creating under a directory lease agree).
inline uint32_t FirstServerFor(uint64_t handle, uint32_t n) {
  uint64_t x = handle;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x % n);
}

}  // namespace clf
