// LockRequest: what a lock covers. Whole file, one byte range, an explicit
// list of extents, or a compact strided pattern (see strided_pattern.h).
// Thread safety: a value.
#pragma once

#include <optional>
#include <utility>

#include "locking/extent_list.h"
#include "locking/strided_pattern.h"

namespace clf::locking {

class LockRequest {
 public:
  enum class Kind { kWholeFile, kRange, kList, kPattern };

  static LockRequest WholeFile() {
    return LockRequest(Kind::kWholeFile, ExtentList::Single(0, kToEof));
  }
  static LockRequest Range(uint64_t offset, uint64_t length) {
    return LockRequest(Kind::kRange, ExtentList::Single(offset, length));
  }
  static LockRequest List(ExtentList extents) {
    return LockRequest(Kind::kList, std::move(extents));
  }
  static LockRequest Pattern(StridedPattern pattern) {
    LockRequest r(Kind::kPattern, ExtentList());
    r.pattern_ = std::move(pattern);
    return r;
  }

  Kind kind() const { return kind_; }
  // The extents, for every kind but kPattern.
  const ExtentList& extents() const { return extents_; }
  const std::optional<StridedPattern>& pattern() const { return pattern_; }

  // [lowest offset, highest end) covered.
  Extent Bounds() const { return pattern_ ? pattern_->Bounds() : extents_.Bounds(); }

  // Calls fn(Extent) for each extent (sorted for lists; generation order for a
  // pattern) until fn returns false; returns false iff fn stopped.
  template <typename Fn>
  bool ForEachExtent(Fn&& fn) const {
    if (pattern_) return pattern_->ForEachExtent(fn);
    for (const Extent& e : extents_.extents()) {
      if (!fn(e)) return false;
    }
    return true;
  }

 private:
  LockRequest(Kind kind, ExtentList extents) : kind_(kind), extents_(std::move(extents)) {}

  Kind kind_;
  ExtentList extents_;
  std::optional<StridedPattern> pattern_;
};

}  // namespace clf::locking
