// ExtentList: a sorted list of disjoint, non-adjacent extents (adjacent and
// overlapping extents are coalesced), the canonical form of a list lock.
// Thread safety: a value; const methods are safe to call concurrently.
#pragma once

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "locking/lock_types.h"

namespace clf::locking {

class ExtentList {
 public:
  ExtentList() = default;

  // Sorts and coalesces. Zero-length extents are dropped; an extent whose end
  // overflows 2^64 - 1 is invalid (kToEof as a length is allowed).
  static Result<ExtentList> FromExtents(std::vector<Extent> extents);
  // Appends extents that arrive already sorted (offset non-decreasing), merging
  // as it goes; falls back to a sort when they are not. Used by expansions.
  static Result<ExtentList> FromSorted(const std::vector<Extent>& extents);
  static ExtentList Single(uint64_t offset, uint64_t length);

  const std::vector<Extent>& extents() const { return extents_; }
  size_t size() const { return extents_.size(); }
  bool empty() const { return extents_.empty(); }
  // [min offset, max end); {0,0} when empty.
  Extent Bounds() const;
  uint64_t TotalBytes() const;

  // True iff some byte is in both lists. O(min * log max).
  bool Overlaps(const ExtentList& other) const;
  // True iff some byte of [lo, hi) is in this list. O(log n).
  bool OverlapsRange(uint64_t lo, uint64_t hi) const;

  bool operator==(const ExtentList&) const = default;

 private:
  explicit ExtentList(std::vector<Extent> e) : extents_(std::move(e)) {}
  std::vector<Extent> extents_;  // sorted, disjoint, non-adjacent, non-empty
};

}  // namespace clf::locking
