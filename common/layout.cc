#include "common/layout.h"

#include <algorithm>
#include <string>

namespace clf {

Status ValidateLayout(const Layout& l, uint32_t n) {
  if (n == 0) return Invalid("cluster has no servers");
  if (l.stripe_size < kMinStripeSize || l.stripe_size > kMaxStripeSize ||
      l.stripe_size % kMinStripeSize != 0) {
    return Invalid("stripe size must be a multiple of 4096 between 4 KiB and 1 GiB, got " +
                   std::to_string(l.stripe_size));
  }
  if (l.stripe_count == 0 || l.stripe_count > n) {
    return Invalid("stripe count must be between 1 and " + std::to_string(n) + ", got " +
                   std::to_string(l.stripe_count));
  }
  if (l.first_server >= n) return Invalid("first server out of range");
  const uint32_t max_replicas = std::min(kMaxReplicas, n);
  if (l.replicas == 0 || l.replicas > max_replicas) {
    return Invalid("replicas must be between 1 and " + std::to_string(max_replicas) +
                   " (at most " + std::to_string(kMaxReplicas) +
                   ", and not more than the servers), got " + std::to_string(l.replicas));
  }
  if (l.sched_policy > kMaxSchedCode) return Invalid("unknown schedule policy code");
  if (l.read_sched > kMaxReadSchedCode) return Invalid("unknown read_sched code");
  if (l.sched_block != 0) CLF_RETURN_IF_ERROR(ValidateSchedBlock(l.sched_block));
  return Status::Ok();
}

static ServerId ServerOfUnit(const Layout& l, uint32_t n, uint64_t unit) {
  return static_cast<ServerId>((l.first_server + unit % l.stripe_count) % n);
}

// The math below divides by stripe_size, stripe_count and n; a layout with a
// zero among them (refused by ValidateLayout) maps to nothing instead.
static bool Degenerate(const Layout& l, uint32_t n) {
  return n == 0 || l.stripe_size == 0 || l.stripe_count == 0;
}

std::vector<Piece> MapRange(const Layout& l, uint32_t n, uint64_t offset, uint64_t length) {
  std::vector<Piece> out;
  if (Degenerate(l, n)) return out;
  const uint64_t ss = l.stripe_size;
  uint64_t pos = offset;
  const uint64_t end = offset + length;
  while (pos < end) {
    uint64_t unit = pos / ss;
    uint64_t in_unit = pos % ss;
    uint64_t len = std::min(ss - in_unit, end - pos);
    ServerId s = ServerOfUnit(l, n, unit);
    uint64_t local = (unit / l.stripe_count) * ss + in_unit;
    // Merge with the previous piece on the same server when contiguous in both spaces
    // (only possible with stripe_count == 1).
    if (!out.empty() && out.back().server == s &&
        out.back().local_offset + out.back().length == local &&
        out.back().logical_offset + out.back().length == pos) {
      out.back().length += len;
    } else {
      out.push_back(Piece{s, local, len, pos});
    }
    pos += len;
  }
  return out;
}

std::vector<ServerId> DataServers(const Layout& l, uint32_t n) {
  std::vector<ServerId> out;
  if (Degenerate(l, n)) return out;
  out.reserve(std::min(l.stripe_count, n));
  for (uint32_t k = 0; k < std::min(l.stripe_count, n); ++k)
    out.push_back((l.first_server + k) % n);
  return out;
}

std::vector<uint32_t> SlotsOn(const Layout& l, uint32_t n, ServerId server) {
  std::vector<uint32_t> out;
  if (Degenerate(l, n) || server >= n) return out;
  for (uint32_t i = 0; i < std::min(l.replicas, n); ++i) {
    if (StripeIndex(l, n, PrimaryOfSlot(server, i, n)) >= 0) out.push_back(i);
  }
  return out;
}

std::vector<ServerId> CopyServers(const Layout& l, uint32_t n) {
  std::vector<ServerId> out;
  if (Degenerate(l, n)) return out;
  for (ServerId s = 0; s < n; ++s) {
    if (!SlotsOn(l, n, s).empty()) out.push_back(s);
  }
  return out;
}

int StripeIndex(const Layout& l, uint32_t n, ServerId server) {
  if (Degenerate(l, n) || server >= n) return -1;
  uint32_t k = (server + n - l.first_server % n) % n;
  return k < l.stripe_count ? static_cast<int>(k) : -1;
}

uint64_t LogicalEnd(const Layout& l, uint32_t n, ServerId server, uint64_t local_size) {
  int k = StripeIndex(l, n, server);
  if (k < 0 || local_size == 0) return 0;
  const uint64_t ss = l.stripe_size;
  uint64_t last = local_size - 1;
  uint64_t row = last / ss;
  uint64_t unit = row * l.stripe_count + static_cast<uint64_t>(k);
  return unit * ss + last % ss + 1;
}

uint64_t LocalSizeFor(const Layout& l, uint32_t n, ServerId server, uint64_t logical_size) {
  int k = StripeIndex(l, n, server);
  if (k < 0 || logical_size == 0) return 0;
  const uint64_t ss = l.stripe_size;
  const uint64_t full_units = logical_size / ss;  // units wholly below logical_size
  const uint64_t tail = logical_size % ss;        // bytes in unit `full_units`
  // Units of this server among 0..full_units-1: those with u mod count == k.
  uint64_t mine = full_units / l.stripe_count + (full_units % l.stripe_count > uint64_t(k) ? 1 : 0);
  uint64_t local = mine * ss;
  if (tail > 0 && full_units % l.stripe_count == uint64_t(k)) local += tail;
  return local;
}

}  // namespace clf
