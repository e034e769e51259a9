// StridedPattern: a compact description of a list lock, the nested strided
// vector of MPI derived datatypes (MPI_Type_hvector nested in itself).
//
// A pattern is a chain of levels, outermost first; level i + 1 is the child of
// level i. All quantities are bytes. Placed at base b, a level emits, for
// i in [0, count):
//   leaf (last level):  the block [b + offset + i*stride, + block_length)
//   inner level:        block_length consecutive copies of the child, copy j
//                       placed at b + offset + i*stride + j*child.Span()
// where Span() of a level is offset + (count - 1)*stride + block_length*S,
// S = 1 for a leaf and the child's Span() otherwise (the MPI extent of the type
// with lower bound 0). Example: the 3-D subarray [z0,z0+nz) x [y0,y0+ny) x
// [x0,x0+nx) of an N^3 array of 4-byte ints is
//   {(z0*N*N + y0*N + x0)*4, 1, N*N*4, nz}, {0, 1, N*4, ny}, {0, nx*4, nx*4, 1}.
//
// The table checks conflicts by walking the pattern (ForEachExtent) without
// building a list; a list is built only when a lock is granted.
// Thread safety: a value; const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "locking/extent_list.h"
#include "locking/lock_types.h"

namespace clf::locking {

struct StridedLevel {
  uint64_t offset = 0;
  uint64_t block_length = 1;
  uint64_t stride = 0;
  uint64_t count = 1;
};

class StridedPattern {
 public:
  static constexpr size_t kMaxDepth = 16;

  // Validates: 1..kMaxDepth levels, count >= 1, block_length >= 1, and every
  // offset, span and bound fits in 64 bits.
  static Result<StridedPattern> Make(std::vector<StridedLevel> levels);

  const std::vector<StridedLevel>& levels() const { return levels_; }
  // Number of blocks emitted before coalescing (product of the counts).
  uint64_t RawBlocks() const { return raw_blocks_; }
  // Steps a walk takes: RawBlocks() with a contiguous leaf counted once. Bounds
  // the cost of ForEachExtent; callers cap it before walking untrusted input.
  uint64_t WalkSteps() const { return walk_steps_; }
  // [lowest offset, highest end) of the pattern placed at 0.
  Extent Bounds() const { return Extent{lo_, span_ - lo_}; }
  // True iff the pattern emits its blocks in increasing, disjoint order.
  bool Monotone() const { return monotone_; }

  // Calls fn(Extent) for each extent in generation order, adjacent blocks
  // coalesced, until fn returns false. Returns false iff fn stopped it.
  template <typename Fn>
  bool ForEachExtent(Fn&& fn) const {
    Extent pending{0, 0};
    if (!Emit(0, 0, &pending, fn)) return false;
    return pending.length == 0 || fn(pending);
  }

  // The canonical extent list; kTooBig if it would hold more than max_extents.
  Result<ExtentList> Expand(size_t max_extents) const;

 private:
  explicit StridedPattern(std::vector<StridedLevel> levels) : levels_(std::move(levels)) {}

  template <typename Fn>
  bool Emit(size_t level, uint64_t base, Extent* pending, Fn& fn) const {
    const StridedLevel& l = levels_[level];
    if (level + 1 == levels_.size()) {
      if (l.stride == l.block_length) {  // contiguous run: one extent
        return Push(Extent{base + l.offset, l.count * l.block_length}, pending, fn);
      }
      for (uint64_t i = 0; i < l.count; ++i) {
        if (!Push(Extent{base + l.offset + i * l.stride, l.block_length}, pending, fn)) {
          return false;
        }
      }
      return true;
    }
    const uint64_t child_span = spans_[level + 1];
    for (uint64_t i = 0; i < l.count; ++i) {
      uint64_t b = base + l.offset + i * l.stride;
      for (uint64_t j = 0; j < l.block_length; ++j) {
        if (!Emit(level + 1, b + j * child_span, pending, fn)) return false;
      }
    }
    return true;
  }

  template <typename Fn>
  static bool Push(Extent e, Extent* pending, Fn& fn) {
    if (pending->length != 0 && e.offset == pending->offset + pending->length) {
      pending->length += e.length;
      return true;
    }
    if (pending->length != 0 && !fn(*pending)) return false;
    *pending = e;
    return true;
  }

  std::vector<StridedLevel> levels_;
  std::vector<uint64_t> spans_;  // Span() of each level
  uint64_t raw_blocks_ = 0;
  uint64_t walk_steps_ = 0;
  uint64_t lo_ = 0;
  uint64_t span_ = 0;
  bool monotone_ = true;
};

}  // namespace clf::locking
