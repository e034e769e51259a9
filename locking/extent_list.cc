#include "locking/extent_list.h"

#include <algorithm>

namespace clf::locking {
namespace {

Status ValidateExtent(const Extent& e) {
  if (e.length != kToEof && e.length > kMaxOffset - e.offset) {
    return Invalid("extent end overflows: offset " + std::to_string(e.offset) + " length " +
                   std::to_string(e.length));
  }
  return Status::Ok();
}

// Appends e to out (sorted by offset so far), merging with the last extent when
// they overlap or touch.
void AppendMerged(std::vector<Extent>* out, const Extent& e) {
  if (!out->empty()) {
    Extent& last = out->back();
    uint64_t last_end = last.end();
    if (e.offset <= last_end) {
      uint64_t end = std::max(last_end, e.end());
      last.length = end - last.offset;
      return;
    }
  }
  out->push_back(Extent{e.offset, e.end() - e.offset});
}

}  // namespace

Result<ExtentList> ExtentList::FromExtents(std::vector<Extent> extents) {
  for (const Extent& e : extents) CLF_RETURN_IF_ERROR(ValidateExtent(e));
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.offset < b.offset; });
  std::vector<Extent> out;
  out.reserve(extents.size());
  for (const Extent& e : extents) {
    if (e.length > 0) AppendMerged(&out, e);
  }
  return ExtentList(std::move(out));
}

Result<ExtentList> ExtentList::FromSorted(const std::vector<Extent>& extents) {
  std::vector<Extent> out;
  out.reserve(extents.size());
  for (const Extent& e : extents) {
    CLF_RETURN_IF_ERROR(ValidateExtent(e));
    if (e.length == 0) continue;
    if (!out.empty() && e.offset < out.back().offset) {
      return FromExtents(std::vector<Extent>(extents));  // not sorted after all
    }
    AppendMerged(&out, e);
  }
  return ExtentList(std::move(out));
}

ExtentList ExtentList::Single(uint64_t offset, uint64_t length) {
  if (length == 0) return ExtentList();
  Extent e{offset, length};
  return ExtentList({Extent{offset, e.end() - offset}});
}

Extent ExtentList::Bounds() const {
  if (extents_.empty()) return Extent{0, 0};
  return Extent{extents_.front().offset, extents_.back().end() - extents_.front().offset};
}

uint64_t ExtentList::TotalBytes() const {
  uint64_t total = 0;
  for (const Extent& e : extents_) total += e.length;
  return total;
}

bool ExtentList::OverlapsRange(uint64_t lo, uint64_t hi) const {
  if (lo >= hi || extents_.empty()) return false;
  // First extent whose end is > lo.
  auto it = std::partition_point(extents_.begin(), extents_.end(),
                                 [lo](const Extent& e) { return e.end() <= lo; });
  return it != extents_.end() && it->offset < hi;
}

bool ExtentList::Overlaps(const ExtentList& other) const {
  const ExtentList& small = size() <= other.size() ? *this : other;
  const ExtentList& big = size() <= other.size() ? other : *this;
  Extent sb = small.Bounds();
  Extent bb = big.Bounds();
  if (small.empty() || big.empty() || sb.end() <= bb.offset || bb.end() <= sb.offset) {
    return false;
  }
  for (const Extent& e : small.extents_) {
    if (big.OverlapsRange(e.offset, e.end())) return true;
  }
  return false;
}

}  // namespace clf::locking
