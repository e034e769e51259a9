#include "locking/strided_pattern.h"

namespace clf::locking {
namespace {

bool MulOk(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool AddOk(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

}  // namespace

Result<StridedPattern> StridedPattern::Make(std::vector<StridedLevel> levels) {
  if (levels.empty() || levels.size() > kMaxDepth) {
    return Invalid("strided pattern needs 1.." + std::to_string(kMaxDepth) + " levels");
  }
  for (const StridedLevel& l : levels) {
    if (l.count == 0 || l.block_length == 0) {
      return Invalid("strided pattern level with zero count or block length");
    }
  }
  StridedPattern p(std::move(levels));
  const size_t depth = p.levels_.size();
  p.spans_.assign(depth, 0);
  uint64_t inner = 1;  // S of the innermost level
  uint64_t raw = 1;
  for (size_t k = depth; k-- > 0;) {
    const StridedLevel& l = p.levels_[k];
    uint64_t body, reach, span;
    if (!MulOk(l.block_length, inner, &body) || !MulOk(l.count - 1, l.stride, &reach) ||
        !AddOk(l.offset, reach, &span) || !AddOk(span, body, &span)) {
      return Invalid("strided pattern overflows 64 bits");
    }
    p.spans_[k] = span;
    // Blocks stay in order iff the next block starts after this one's body.
    if (l.count > 1 && l.stride < body) p.monotone_ = false;
    uint64_t per_level;
    if (!MulOk(l.count, k + 1 == depth ? 1 : l.block_length, &per_level) ||
        !MulOk(raw, per_level, &raw)) {
      return Invalid("strided pattern has too many blocks");
    }
    inner = span;
  }
  p.raw_blocks_ = raw;
  const StridedLevel& leaf = p.levels_.back();
  p.walk_steps_ = leaf.stride == leaf.block_length ? raw / leaf.count : raw;
  uint64_t lo = 0;
  for (const StridedLevel& l : p.levels_) lo += l.offset;  // <= span, cannot overflow
  p.lo_ = lo;
  p.span_ = p.spans_[0];
  return p;
}

Result<ExtentList> StridedPattern::Expand(size_t max_extents) const {
  std::vector<Extent> out;
  bool too_big = false;
  ForEachExtent([&](const Extent& e) {
    if (out.size() >= max_extents) {
      too_big = true;
      return false;
    }
    out.push_back(e);
    return true;
  });
  if (too_big) {
    return Status(Code::kTooBig, "strided pattern expands to more than " +
                                     std::to_string(max_extents) + " extents");
  }
  return ExtentList::FromSorted(out);
}

}  // namespace clf::locking
