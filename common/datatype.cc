#include "common/datatype.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace clf {
namespace {

constexpr int64_t kCap = kMaxTypeBytes;

Status Bad(std::string msg) { return Invalid("datatype: " + std::move(msg)); }
Status TooBig(std::string_view what) {
  return Bad(std::string(what) + " overflows or passes 2^60 bytes");
}

// Checked arithmetic: false on overflow or a result outside [-kCap, kCap].
bool InCap(int64_t v) { return v >= -kCap && v <= kCap; }
bool MulS(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out) && InCap(*out);
}
bool AddS(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out) && InCap(*out);
}
bool MulU(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out) && *out <= uint64_t(kCap);
}
bool AddU(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out) && *out <= uint64_t(kCap);
}
// A count as a signed factor (counts above the cap overflow anyway).
bool ToS(uint64_t v, int64_t* out) {
  if (v > uint64_t(kCap)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

}  // namespace

// The builders: fill a Datatype's walk shape and properties, checking caps.
// Internal shapes (the subarray's nest) are built without the depth check;
// public constructors end in Done(), which applies it.
struct DatatypeAccess {
  using Mut = std::shared_ptr<Datatype>;

  static Mut New(TypeKind kind) {
    Mut t(new Datatype());
    t->kind_ = kind;
    return t;
  }

  static TypePtr Base(TypeKind kind, uint64_t size) {
    Mut t = New(kind);
    t->size_ = size;
    t->ub_ = t->true_ub_ = static_cast<int64_t>(size);
    t->pieces_ = 1;
    return t;
  }

  static Status CheckOld(const TypePtr& old) { return old ? Status::Ok() : Bad("null old type"); }

  // A repetition of a type with neither data nor extent describes nothing but
  // work: refused (the "zero-size loop").
  static Status CheckRepeat(const Datatype& c, uint64_t copies) {
    if (copies > 1 && c.size_ == 0 && c.extent() == 0)
      return Bad("repeats a type with no data and no extent");
    return Status::Ok();
  }

  // The bounds of a typemap made of copies of children (MPI 4.1.7 with
  // sticky markers): lb/ub from Resized markers when any child carries them,
  // else from the data; true bounds from the data alone.
  struct Bounds {
    bool has_m = false, has_d = false, has_t = false;
    int64_t mlb = 0, mub = 0, dlb = 0, dub = 0, tlb = 0, tub = 0;

    static void Widen(bool* has, int64_t* lo, int64_t* hi, int64_t l, int64_t h) {
      *lo = *has ? std::min(*lo, l) : l;
      *hi = *has ? std::max(*hi, h) : h;
      *has = true;
    }
    // Copies of c at displacements dmin..dmax (both within the cap, so the
    // sums below stay within 2^61).
    void Add(const Datatype& c, int64_t dmin, int64_t dmax) {
      if (c.marked_) Widen(&has_m, &mlb, &mub, dmin + c.lb_, dmax + c.ub_);
      if (!c.marked_ && c.size_ > 0) Widen(&has_d, &dlb, &dub, dmin + c.lb_, dmax + c.ub_);
      if (c.size_ > 0) Widen(&has_t, &tlb, &tub, dmin + c.true_lb_, dmax + c.true_ub_);
    }
    Status Finish(Datatype* t) const {
      t->marked_ = has_m;
      t->lb_ = has_m ? mlb : has_d ? dlb : 0;
      t->ub_ = has_m ? mub : has_d ? dub : 0;
      t->true_lb_ = has_t ? tlb : 0;
      t->true_ub_ = has_t ? tub : 0;
      if (!InCap(t->lb_) || !InCap(t->ub_) || !InCap(t->true_lb_) || !InCap(t->true_ub_))
        return TooBig("bounds");
      return Status::Ok();
    }
  };

  // True when `copies` copies of c placed one extent apart form one run.
  static bool RunOfCopies(const Datatype& c, uint64_t copies) {
    return c.dense_ && (copies <= 1 || c.extent() == static_cast<int64_t>(c.size_));
  }

  // blocks blocks of per_block copies of c, block i at i * step bytes.
  static Status MakeStrided(Datatype* t, uint64_t blocks, uint64_t per_block, int64_t step,
                            const TypePtr& c) {
    if (step < 0) return Bad("negative stride");
    t->shape_ = Datatype::Shape::kStrided;
    t->blocks_ = blocks, t->per_block_ = per_block, t->step_ = step;
    t->children_ = {c};
    uint64_t copies, block_bytes;
    if (!MulU(blocks, per_block, &copies)) return TooBig("count * blocklen");
    CLF_RETURN_IF_ERROR(CheckRepeat(*c, copies));
    if (!MulU(per_block, c->size_, &block_bytes) || !MulU(blocks, block_bytes, &t->size_))
      return TooBig("size");
    Bounds b;
    if (copies > 0) {
      int64_t nb, np, last_block, last_copy, dmax;
      if (!ToS(blocks - 1, &nb) || !ToS(per_block - 1, &np) || !MulS(nb, step, &last_block) ||
          !MulS(np, c->extent(), &last_copy) || !AddS(last_block, last_copy, &dmax))
        return TooBig("extent");
      b.Add(*c, 0, dmax);
    }
    CLF_RETURN_IF_ERROR(b.Finish(t));
    const bool block_run = RunOfCopies(*c, per_block);
    t->dense_ =
        t->size_ == 0 || (block_run && (blocks <= 1 || step == static_cast<int64_t>(block_bytes)));
    uint64_t block_pieces = block_run ? (block_bytes > 0 ? 1 : 0) : per_block * c->pieces_;
    t->pieces_ = t->dense_ ? (t->size_ > 0 ? 1 : 0) : blocks * block_pieces;  // <= size
    return Status::Ok();
  }

  // One block of a list: len copies of c at disp bytes; updates the running
  // data bytes, bounds, density and pieces.
  struct ListState {
    Bounds bounds;
    uint64_t bytes = 0, pieces = 0;
    bool dense = true, seen = false;
    int64_t run_end = 0;
  };
  static Status AddBlock(ListState* s, int64_t disp, uint64_t len, const Datatype& c) {
    if (disp < 0) return Bad("negative displacement");
    if (!InCap(disp)) return TooBig("displacement");
    CLF_RETURN_IF_ERROR(CheckRepeat(c, len));
    uint64_t block_bytes;
    if (!MulU(len, c.size_, &block_bytes) || !AddU(s->bytes, block_bytes, &s->bytes))
      return TooBig("size");
    if (len == 0) return Status::Ok();
    int64_t nl, last_copy, dmax;
    if (!ToS(len - 1, &nl) || !MulS(nl, c.extent(), &last_copy) || !AddS(disp, last_copy, &dmax))
      return TooBig("extent");
    s->bounds.Add(c, disp, dmax);
    if (block_bytes == 0) return Status::Ok();
    const bool block_run = RunOfCopies(c, len);
    const int64_t start = disp + c.true_lb_;
    if (!block_run || (s->seen && start != s->run_end)) s->dense = false;
    s->run_end = start + static_cast<int64_t>(block_bytes);
    s->seen = true;
    s->pieces += block_run ? 1 : len * c.pieces_;  // <= bytes: no overflow
    return Status::Ok();
  }

  // Blocks i = 0..disps.size()-1: len_at(i) copies of child_at(i) at disps[i].
  template <typename LenAt, typename ChildAt>
  static Status MakeList(Datatype* t, std::span<const int64_t> disps, LenAt len_at,
                         ChildAt child_at) {
    if (disps.size() > kMaxTypeListEntries) return Bad("list longer than 2^20 entries");
    t->shape_ = Datatype::Shape::kList;
    t->disps_.assign(disps.begin(), disps.end());
    t->cum_.reserve(disps.size() + 1);
    ListState s;
    for (size_t i = 0; i < disps.size(); ++i) {
      t->cum_.push_back(s.bytes);
      CLF_RETURN_IF_ERROR(AddBlock(&s, disps[i], len_at(i), *child_at(i)));
    }
    t->cum_.push_back(s.bytes);
    t->size_ = s.bytes;
    t->dense_ = s.dense;
    t->pieces_ = s.dense ? (s.bytes > 0 ? 1 : 0) : s.pieces;
    return s.bounds.Finish(t);
  }

  // A single-old-type list; element displacements are scaled by its extent.
  template <typename LenAt>
  static Status MakeOneChildList(Datatype* t, std::span<const int64_t> disps, bool in_elements,
                                 LenAt len_at, const TypePtr& c) {
    std::vector<int64_t> bytes(disps.begin(), disps.end());
    if (disps.size() > kMaxTypeListEntries) return Bad("list longer than 2^20 entries");
    for (int64_t& d : bytes) {
      if (d < 0) return Bad("negative displacement");
      if (in_elements && !MulS(d, c->extent(), &d)) return TooBig("displacement");
    }
    t->children_ = {c};
    return MakeList(t, bytes, len_at, [&c](size_t) -> const TypePtr& { return c; });
  }

  static Status MakeResized(Datatype* t, const TypePtr& c, int64_t lb, int64_t extent) {
    if (extent < 0) return Bad("negative extent");
    if (!InCap(lb) || !InCap(extent) || !AddS(lb, extent, &t->ub_)) return TooBig("bounds");
    t->shape_ = Datatype::Shape::kAlias;
    t->impl_ = c;
    t->children_ = {c};
    t->marked_ = true;
    t->lb_ = lb;
    t->true_lb_ = c->true_lb_, t->true_ub_ = c->true_ub_;
    t->size_ = c->size_, t->dense_ = c->dense_, t->pieces_ = c->pieces_;
    return Status::Ok();
  }

  // Public constructors end here: depth and description-size caps.
  static Result<TypePtr> Done(Mut t, uint64_t own_entries, uint64_t own_nodes) {
    int depth = 0;
    uint64_t entries = own_entries, nodes = own_nodes;
    for (const TypePtr& c : t->children_) {
      depth = std::max(depth, c->depth_);
      if (__builtin_add_overflow(entries, c->entries_, &entries) ||
          __builtin_add_overflow(nodes, c->nodes_, &nodes) || entries > kMaxTypeEntries ||
          nodes > kMaxTypeNodes)
        return Bad("description larger than 2^20 entries or 2^16 constructors");
    }
    if (depth + 1 > kMaxTypeDepth) return Bad("nested deeper than 16 constructors");
    t->depth_ = depth + 1;
    t->entries_ = entries, t->nodes_ = nodes;
    return TypePtr(std::move(t));
  }

  static Result<TypePtr> IndexedLike(TypeKind kind, std::span<const uint64_t> blocklens,
                                     std::span<const int64_t> disps, const TypePtr& old);
  static Result<TypePtr> BlockLike(TypeKind kind, uint64_t blocklen, std::span<const int64_t> disps,
                                   const TypePtr& old);
  static Result<TypePtr> SubarrayImpl(std::span<const uint64_t> sizes,
                                      std::span<const uint64_t> subsizes,
                                      std::span<const uint64_t> starts, ArrayOrder order,
                                      const TypePtr& old);
  static void Append(const Datatype& t, std::string* out);
};

namespace {
using A = DatatypeAccess;
}  // namespace

TypePtr Datatype::Byte() {
  static const TypePtr t = A::Base(TypeKind::kByte, 1);
  return t;
}
TypePtr Datatype::Int32() {
  static const TypePtr t = A::Base(TypeKind::kInt32, 4);
  return t;
}
TypePtr Datatype::Int64() {
  static const TypePtr t = A::Base(TypeKind::kInt64, 8);
  return t;
}
TypePtr Datatype::Double() {
  static const TypePtr t = A::Base(TypeKind::kDouble, 8);
  return t;
}

Result<TypePtr> Datatype::Contiguous(uint64_t count, TypePtr old) {
  CLF_RETURN_IF_ERROR(A::CheckOld(old));
  A::Mut t = A::New(TypeKind::kContiguous);
  CLF_RETURN_IF_ERROR(A::MakeStrided(t.get(), 1, count, 0, old));
  return A::Done(std::move(t), 0, 1);
}

Result<TypePtr> Datatype::Vector(uint64_t count, uint64_t blocklen, int64_t stride, TypePtr old) {
  CLF_RETURN_IF_ERROR(A::CheckOld(old));
  if (stride < 0) return Bad("negative stride");
  int64_t step;
  if (!MulS(stride, old->extent(), &step)) return TooBig("stride");
  A::Mut t = A::New(TypeKind::kVector);
  t->stride_ = stride;
  CLF_RETURN_IF_ERROR(A::MakeStrided(t.get(), count, blocklen, step, old));
  return A::Done(std::move(t), 0, 1);
}

Result<TypePtr> Datatype::Hvector(uint64_t count, uint64_t blocklen, int64_t stride_bytes,
                                  TypePtr old) {
  CLF_RETURN_IF_ERROR(A::CheckOld(old));
  A::Mut t = A::New(TypeKind::kHvector);
  t->stride_ = stride_bytes;
  CLF_RETURN_IF_ERROR(A::MakeStrided(t.get(), count, blocklen, stride_bytes, old));
  return A::Done(std::move(t), 0, 1);
}

Result<TypePtr> DatatypeAccess::IndexedLike(TypeKind kind, std::span<const uint64_t> blocklens,
                                            std::span<const int64_t> disps, const TypePtr& old) {
  CLF_RETURN_IF_ERROR(A::CheckOld(old));
  if (blocklens.size() != disps.size()) return Bad("blocklens and displacements differ in length");
  if (disps.size() > kMaxTypeListEntries) return Bad("list longer than 2^20 entries");
  A::Mut t = A::New(kind);
  const bool elements = kind == TypeKind::kIndexed;
  if (elements) t->given_disps_.assign(disps.begin(), disps.end());
  t->blocklens_.assign(blocklens.begin(), blocklens.end());
  CLF_RETURN_IF_ERROR(A::MakeOneChildList(
      t.get(), disps, elements, [&](size_t i) { return blocklens[i]; }, old));
  return A::Done(std::move(t), disps.size(), 1);
}

Result<TypePtr> DatatypeAccess::BlockLike(TypeKind kind, uint64_t blocklen,
                                          std::span<const int64_t> disps, const TypePtr& old) {
  CLF_RETURN_IF_ERROR(A::CheckOld(old));
  if (disps.size() > kMaxTypeListEntries) return Bad("list longer than 2^20 entries");
  A::Mut t = A::New(kind);
  const bool elements = kind == TypeKind::kIndexedBlock;
  if (elements) t->given_disps_.assign(disps.begin(), disps.end());
  t->blocklen_ = blocklen;
  CLF_RETURN_IF_ERROR(A::MakeOneChildList(
      t.get(), disps, elements, [blocklen](size_t) { return blocklen; }, old));
  return A::Done(std::move(t), disps.size(), 1);
}

Result<TypePtr> Datatype::Indexed(std::span<const uint64_t> blocklens,
                                  std::span<const int64_t> disps, TypePtr old) {
  return A::IndexedLike(TypeKind::kIndexed, blocklens, disps, old);
}

Result<TypePtr> Datatype::Hindexed(std::span<const uint64_t> blocklens,
                                   std::span<const int64_t> byte_disps, TypePtr old) {
  return A::IndexedLike(TypeKind::kHindexed, blocklens, byte_disps, old);
}

Result<TypePtr> Datatype::IndexedBlock(uint64_t blocklen, std::span<const int64_t> disps,
                                       TypePtr old) {
  return A::BlockLike(TypeKind::kIndexedBlock, blocklen, disps, old);
}

Result<TypePtr> Datatype::HindexedBlock(uint64_t blocklen, std::span<const int64_t> byte_disps,
                                        TypePtr old) {
  return A::BlockLike(TypeKind::kHindexedBlock, blocklen, byte_disps, old);
}

Result<TypePtr> Datatype::Struct(std::span<const uint64_t> blocklens,
                                 std::span<const int64_t> byte_disps,
                                 std::span<const TypePtr> types) {
  if (blocklens.size() != byte_disps.size() || types.size() != byte_disps.size())
    return Bad("struct lists differ in length");
  if (types.size() > kMaxTypeListEntries) return Bad("list longer than 2^20 entries");
  for (const TypePtr& c : types) CLF_RETURN_IF_ERROR(A::CheckOld(c));
  A::Mut t = A::New(TypeKind::kStruct);
  t->blocklens_.assign(blocklens.begin(), blocklens.end());
  t->children_.assign(types.begin(), types.end());
  CLF_RETURN_IF_ERROR(A::MakeList(
      t.get(), byte_disps, [&](size_t i) { return blocklens[i]; },
      [&](size_t i) -> const TypePtr& { return types[i]; }));
  return A::Done(std::move(t), types.size(), 1);
}

// The subarray as MPI builds it: a contiguous run along the fastest
// dimension, an hvector per slower one, moved to the start corner and resized
// to the full array.
Result<TypePtr> DatatypeAccess::SubarrayImpl(std::span<const uint64_t> sizes,
                                             std::span<const uint64_t> subsizes,
                                             std::span<const uint64_t> starts, ArrayOrder order,
                                             const TypePtr& old) {
  const size_t n = sizes.size();
  auto dim = [&](size_t k) { return order == ArrayOrder::kC ? n - 1 - k : k; };  // k-th fastest
  int64_t step = old->extent(), offset = 0;
  TypePtr t = old;
  for (size_t k = 0; k < n; ++k) {
    const size_t d = dim(k);
    int64_t start, size, corner;
    if (!ToS(starts[d], &start) || !ToS(sizes[d], &size)) return TooBig("subarray");
    if (!MulS(start, step, &corner) || !AddS(offset, corner, &offset)) return TooBig("subarray");
    Mut next = New(TypeKind::kHvector);
    CLF_RETURN_IF_ERROR(k == 0 ? MakeStrided(next.get(), 1, subsizes[d], 0, t)
                               : MakeStrided(next.get(), subsizes[d], 1, step, t));
    t = std::move(next);
    if (!MulS(step, size, &step)) return TooBig("subarray extent");
  }
  Mut moved = New(TypeKind::kHindexed);
  const int64_t disp[1] = {offset};
  const TypePtr inner = t;
  CLF_RETURN_IF_ERROR(MakeOneChildList(
      moved.get(), disp, false, [](size_t) { return uint64_t{1}; }, inner));
  Mut sized = New(TypeKind::kResized);
  CLF_RETURN_IF_ERROR(MakeResized(sized.get(), moved, 0, step));
  return TypePtr(std::move(sized));
}

Result<TypePtr> Datatype::Subarray(std::span<const uint64_t> sizes,
                                   std::span<const uint64_t> subsizes,
                                   std::span<const uint64_t> starts, ArrayOrder order,
                                   TypePtr old) {
  CLF_RETURN_IF_ERROR(A::CheckOld(old));
  const size_t n = sizes.size();
  if (n == 0 || n > kMaxTypeDims) return Bad("subarray needs 1 to 16 dimensions");
  if (subsizes.size() != n || starts.size() != n) return Bad("subarray lists differ in length");
  if (order != ArrayOrder::kC && order != ArrayOrder::kFortran) return Bad("unknown array order");
  for (size_t d = 0; d < n; ++d) {
    if (sizes[d] == 0 || subsizes[d] > sizes[d] || starts[d] > sizes[d] - subsizes[d])
      return Bad("subarray dimension " + std::to_string(d) + " out of range");
  }
  CLF_ASSIGN_OR_RETURN(TypePtr impl, A::SubarrayImpl(sizes, subsizes, starts, order, old));
  A::Mut t = A::New(TypeKind::kSubarray);
  *t = *impl;  // shape and properties of the nest; the parameters follow
  t->kind_ = TypeKind::kSubarray;
  t->impl_ = impl;
  t->children_ = {old};
  t->order_ = order;
  t->dims_.assign(sizes.begin(), sizes.end());
  t->dims_.insert(t->dims_.end(), subsizes.begin(), subsizes.end());
  t->dims_.insert(t->dims_.end(), starts.begin(), starts.end());
  return A::Done(std::move(t), 0, n + 2);
}

Result<TypePtr> Datatype::Resized(TypePtr old, int64_t lb, int64_t extent) {
  CLF_RETURN_IF_ERROR(A::CheckOld(old));
  A::Mut t = A::New(TypeKind::kResized);
  CLF_RETURN_IF_ERROR(A::MakeResized(t.get(), old, lb, extent));
  return A::Done(std::move(t), 0, 1);
}

// ---------------------------------------------------------------------------
// Wire encoding.

namespace {

void PutU(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutS(int64_t v, std::string* out) {
  PutU((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63), out);
}

}  // namespace

void DatatypeAccess::Append(const Datatype& t, std::string* out) {
  out->push_back(static_cast<char>(t.kind_));
  const size_t n = t.disps_.size();
  switch (t.kind_) {
    case TypeKind::kByte:
    case TypeKind::kInt32:
    case TypeKind::kInt64:
    case TypeKind::kDouble:
      return;
    case TypeKind::kContiguous:
      PutU(t.per_block_, out);
      break;
    case TypeKind::kVector:
    case TypeKind::kHvector:
      PutU(t.blocks_, out), PutU(t.per_block_, out), PutS(t.stride_, out);
      break;
    case TypeKind::kIndexed:
    case TypeKind::kHindexed:
      PutU(n, out);
      for (size_t i = 0; i < n; ++i) {
        PutU(t.blocklens_[i], out);
        PutS(t.kind_ == TypeKind::kIndexed ? t.given_disps_[i] : t.disps_[i], out);
      }
      break;
    case TypeKind::kIndexedBlock:
    case TypeKind::kHindexedBlock:
      PutU(n, out), PutU(t.blocklen_, out);
      for (size_t i = 0; i < n; ++i)
        PutS(t.kind_ == TypeKind::kIndexedBlock ? t.given_disps_[i] : t.disps_[i], out);
      break;
    case TypeKind::kStruct:
      PutU(n, out);
      for (size_t i = 0; i < n; ++i) {
        PutU(t.blocklens_[i], out), PutS(t.disps_[i], out);
        Append(*t.children_[i], out);
      }
      return;
    case TypeKind::kSubarray: {
      const size_t dims = t.dims_.size() / 3;
      PutU(dims, out);
      out->push_back(static_cast<char>(t.order_));
      for (size_t d = 0; d < dims; ++d)
        PutU(t.dims_[d], out), PutU(t.dims_[dims + d], out), PutU(t.dims_[2 * dims + d], out);
      break;
    }
    case TypeKind::kResized:
      PutS(t.lb_, out), PutS(t.extent(), out);
      break;
  }
  Append(*t.children_[0], out);
}

std::string Encode(const Datatype& type) {
  std::string out(1, static_cast<char>(kTypeWireVersion));
  DatatypeAccess::Append(type, &out);
  return out;
}

namespace {

// Reads an encoding front to back; every read checks what is left, and
// varints must be in their shortest form (so an encoding is canonical). Counts the
// constructor nodes and list entries so far, so a hostile input is refused
// before it makes the decoder allocate past the caps.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  size_t left() const { return in_.size() - pos_; }
  Status Byte(uint8_t* v) {
    if (left() < 1) return Bad("truncated encoding");
    *v = static_cast<uint8_t>(in_[pos_++]);
    return Status::Ok();
  }
  Status U(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = 0;
      CLF_RETURN_IF_ERROR(Byte(&b));
      if (shift == 63 && b > 1) return Bad("varint overflows 64 bits");
      *v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) != 0) continue;
      if (b == 0 && shift > 0) return Bad("varint not in its shortest form");
      return Status::Ok();
    }
    return Bad("varint longer than 10 bytes");
  }
  Status S(int64_t* v) {
    uint64_t u = 0;
    CLF_RETURN_IF_ERROR(U(&u));
    *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
    return Status::Ok();
  }
  // A list of n entries of at least min_bytes bytes each is about to be read.
  Status Entries(uint64_t n, size_t min_bytes) {
    if (n > kMaxTypeListEntries || n > left() / min_bytes) return Bad("list count too large");
    entries_ += n;
    if (entries_ > kMaxTypeEntries) return Bad("description larger than 2^20 entries");
    return Status::Ok();
  }
  Status Node() {
    if (++nodes_ > kMaxTypeNodes) return Bad("description larger than 2^16 constructors");
    return Status::Ok();
  }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  uint64_t entries_ = 0, nodes_ = 0;
};

Result<TypePtr> DecodeNode(Reader* r, int level);

Result<TypePtr> DecodeStrided(Reader* r, int level, TypeKind kind) {
  uint64_t count = 1, blocklen = 0;
  int64_t stride = 0;
  if (kind != TypeKind::kContiguous) CLF_RETURN_IF_ERROR(r->U(&count));
  CLF_RETURN_IF_ERROR(r->U(&blocklen));
  if (kind != TypeKind::kContiguous) CLF_RETURN_IF_ERROR(r->S(&stride));
  CLF_ASSIGN_OR_RETURN(TypePtr old, DecodeNode(r, level + 1));
  if (kind == TypeKind::kContiguous) return Datatype::Contiguous(blocklen, old);
  if (kind == TypeKind::kVector) return Datatype::Vector(count, blocklen, stride, old);
  return Datatype::Hvector(count, blocklen, stride, old);
}

Result<TypePtr> DecodeList(Reader* r, int level, TypeKind kind) {
  const bool one_len = kind == TypeKind::kIndexedBlock || kind == TypeKind::kHindexedBlock;
  uint64_t n = 0, blocklen = 0;
  CLF_RETURN_IF_ERROR(r->U(&n));
  if (one_len) CLF_RETURN_IF_ERROR(r->U(&blocklen));
  CLF_RETURN_IF_ERROR(r->Entries(n, one_len ? 1 : 2));
  std::vector<uint64_t> lens(one_len ? 0 : n);
  std::vector<int64_t> disps(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (!one_len) CLF_RETURN_IF_ERROR(r->U(&lens[i]));
    CLF_RETURN_IF_ERROR(r->S(&disps[i]));
  }
  CLF_ASSIGN_OR_RETURN(TypePtr old, DecodeNode(r, level + 1));
  switch (kind) {
    case TypeKind::kIndexed:
      return Datatype::Indexed(lens, disps, old);
    case TypeKind::kHindexed:
      return Datatype::Hindexed(lens, disps, old);
    case TypeKind::kIndexedBlock:
      return Datatype::IndexedBlock(blocklen, disps, old);
    default:
      return Datatype::HindexedBlock(blocklen, disps, old);
  }
}

Result<TypePtr> DecodeStruct(Reader* r, int level) {
  uint64_t n = 0;
  CLF_RETURN_IF_ERROR(r->U(&n));
  CLF_RETURN_IF_ERROR(r->Entries(n, 3));
  std::vector<uint64_t> lens(n);
  std::vector<int64_t> disps(n);
  std::vector<TypePtr> types(n);
  for (uint64_t i = 0; i < n; ++i) {
    CLF_RETURN_IF_ERROR(r->U(&lens[i]));
    CLF_RETURN_IF_ERROR(r->S(&disps[i]));
    CLF_ASSIGN_OR_RETURN(types[i], DecodeNode(r, level + 1));
  }
  return Datatype::Struct(lens, disps, types);
}

Result<TypePtr> DecodeSubarray(Reader* r, int level) {
  uint64_t n = 0;
  uint8_t order = 0;
  CLF_RETURN_IF_ERROR(r->U(&n));
  if (n == 0 || n > kMaxTypeDims) return Bad("subarray needs 1 to 16 dimensions");
  CLF_RETURN_IF_ERROR(r->Byte(&order));
  std::vector<uint64_t> sizes(n), subsizes(n), starts(n);
  for (uint64_t d = 0; d < n; ++d) {
    CLF_RETURN_IF_ERROR(r->U(&sizes[d]));
    CLF_RETURN_IF_ERROR(r->U(&subsizes[d]));
    CLF_RETURN_IF_ERROR(r->U(&starts[d]));
  }
  if (order > 1) return Bad("unknown array order");
  CLF_ASSIGN_OR_RETURN(TypePtr old, DecodeNode(r, level + 1));
  return Datatype::Subarray(sizes, subsizes, starts, static_cast<ArrayOrder>(order), old);
}

Result<TypePtr> DecodeResized(Reader* r, int level) {
  int64_t lb = 0, extent = 0;
  CLF_RETURN_IF_ERROR(r->S(&lb));
  CLF_RETURN_IF_ERROR(r->S(&extent));
  CLF_ASSIGN_OR_RETURN(TypePtr old, DecodeNode(r, level + 1));
  return Datatype::Resized(old, lb, extent);
}

// One node at `level` constructors below the root.
Result<TypePtr> DecodeNode(Reader* r, int level) {
  uint8_t tag = 0;
  CLF_RETURN_IF_ERROR(r->Byte(&tag));
  const auto kind = static_cast<TypeKind>(tag);
  switch (kind) {
    case TypeKind::kByte:
      return Datatype::Byte();
    case TypeKind::kInt32:
      return Datatype::Int32();
    case TypeKind::kInt64:
      return Datatype::Int64();
    case TypeKind::kDouble:
      return Datatype::Double();
    default:
      break;
  }
  if (tag < static_cast<uint8_t>(TypeKind::kContiguous) ||
      tag > static_cast<uint8_t>(TypeKind::kResized))
    return Bad("unknown node tag " + std::to_string(tag));
  if (level >= kMaxTypeDepth) return Bad("nested deeper than 16 constructors");
  CLF_RETURN_IF_ERROR(r->Node());
  switch (kind) {
    case TypeKind::kContiguous:
    case TypeKind::kVector:
    case TypeKind::kHvector:
      return DecodeStrided(r, level, kind);
    case TypeKind::kStruct:
      return DecodeStruct(r, level);
    case TypeKind::kSubarray:
      return DecodeSubarray(r, level);
    case TypeKind::kResized:
      return DecodeResized(r, level);
    default:
      return DecodeList(r, level, kind);
  }
}

}  // namespace

Result<TypePtr> Decode(std::string_view bytes) {
  if (bytes.size() > kMaxEncodedTypeBytes) return Bad("encoding larger than 64 MiB");
  Reader r(bytes);
  uint8_t version = 0;
  CLF_RETURN_IF_ERROR(r.Byte(&version));
  if (version != kTypeWireVersion)
    return Bad("unknown encoding version " + std::to_string(version));
  CLF_ASSIGN_OR_RETURN(TypePtr t, DecodeNode(&r, 0));
  if (r.left() != 0) return Bad("trailing bytes after the type");
  return t;
}

// ---------------------------------------------------------------------------
// Flattening.

Result<TypeCursor> TypeCursor::Make(TypePtr type, uint64_t disp, uint64_t count, uint64_t skip,
                                    uint64_t limit) {
  if (!type) return Bad("null type");
  const Datatype& t = *type;
  uint64_t total = 0, last_base = 0, last = 0;
  if (!MulU(count, t.size(), &total)) return TooBig("data of the cursor");
  if (total > 0) {  // the last byte's offset: disp + (count - 1) * extent + true_ub
    const uint64_t ext = static_cast<uint64_t>(t.extent());
    if (!MulU(count - 1, ext, &last_base) || !AddU(last_base, disp, &last_base) ||
        !AddU(last_base, static_cast<uint64_t>(t.true_ub()), &last))
      return TooBig("offset of the cursor's last byte");
  }
  TypeCursor c;
  c.type_ = std::move(type);
  c.disp_ = disp;
  c.ext_ = static_cast<uint64_t>(c.type_->extent());
  c.pos_ = std::min(skip, total);
  c.end_ = total - c.pos_ < limit ? total : c.pos_ + limit;
  return c;
}

Result<TypeCursor> TypeCursor::View(TypePtr filetype, uint64_t disp, uint64_t view_offset,
                                    uint64_t length) {
  if (!filetype) return Bad("null type");
  const uint64_t size = filetype->size();
  if (size == 0) return Bad("a view's filetype must hold data");
  uint64_t end;
  if (!AddU(view_offset, length, &end)) return TooBig("view window");
  const uint64_t count = end / size + (end % size != 0 ? 1 : 0);
  return Make(std::move(filetype), disp, count, view_offset, length);
}

// The block of a non-dense strided or list node t that holds data byte p of
// an instance at *d: moves *d to the block's start.
TypeCursor::Block TypeCursor::Pick(const Datatype& t, uint64_t p, uint64_t* d) {
  Block b;
  if (t.shape_ == Datatype::Shape::kStrided) {
    b.c = t.children_[0].get();
    b.copies = t.per_block_;
    b.bytes = b.copies * b.c->size_;
    *d += (p / b.bytes) * static_cast<uint64_t>(t.step_);
    b.r = p % b.bytes;
    return b;
  }
  // kList: the last block starting at or before p holds it; empty blocks
  // share their cum_ value with the next one, so they are never picked.
  const auto i =
      static_cast<size_t>(std::upper_bound(t.cum_.begin(), t.cum_.end(), p) - t.cum_.begin() - 1);
  b.c = t.children_.size() == 1 ? t.children_[0].get() : t.children_[i].get();
  b.bytes = t.cum_[i + 1] - t.cum_[i];
  b.copies = b.bytes / b.c->size_;
  b.r = p - t.cum_[i];
  *d += static_cast<uint64_t>(t.disps_[i]);
  return b;
}

// Walks down from t (an instance at file offset d) to the run holding its
// data byte p < t->size_. Every node on the way holds p, so no size is 0.
Extent TypeCursor::Locate(const Datatype* t, uint64_t d, uint64_t p) {
  for (;;) {
    if (t->dense_) return Extent{d + static_cast<uint64_t>(t->true_lb_) + p, t->size_ - p};
    if (t->shape_ == Datatype::Shape::kAlias) {
      t = t->impl_.get();
      continue;
    }
    const Block b = Pick(*t, p, &d);
    if (DatatypeAccess::RunOfCopies(*b.c, b.copies))
      return Extent{d + static_cast<uint64_t>(b.c->true_lb_) + b.r, b.bytes - b.r};
    d += (b.r / b.c->size_) * static_cast<uint64_t>(b.c->extent());
    p = b.r % b.c->size_;
    t = b.c;
  }
}

Extent TypeCursor::Raw() {
  const Datatype& t = *type_;
  Extent run;
  if (t.dense_ && ext_ == t.size_) {  // instances abut: the whole window is one run
    run = Extent{disp_ + static_cast<uint64_t>(t.true_lb_) + pos_, end_ - pos_};
  } else {
    run = Locate(&t, disp_ + (pos_ / t.size_) * ext_, pos_ % t.size_);
  }
  run.length = std::min(run.length, end_ - pos_);
  pos_ += run.length;
  return run;
}

bool TypeCursor::Next(Extent* out, uint64_t* stream_pos) {
  Extent cur;
  uint64_t cur_pos;
  if (has_peek_) {
    cur = peek_, cur_pos = peek_pos_, has_peek_ = false;
  } else {
    if (pos_ >= end_) return false;
    cur_pos = pos_;
    cur = Raw();
  }
  while (pos_ < end_) {  // merge the runs that continue this one
    const uint64_t next_pos = pos_;
    const Extent next = Raw();
    if (next.offset != cur.offset + cur.length) {
      peek_ = next, peek_pos_ = next_pos, has_peek_ = true;
      break;
    }
    cur.length += next.length;
  }
  *out = cur;
  if (stream_pos) *stream_pos = cur_pos;
  return true;
}

// ---------------------------------------------------------------------------
// One server's pieces.

ServerPieces::ServerPieces(TypeCursor cursor, const Layout& layout, uint32_t n, ServerId server)
    : cursor_(std::move(cursor)),
      layout_(layout),
      n_(n),
      server_(server),
      index_(ValidateLayout(layout, n).ok() ? StripeIndex(layout, n, server) : -1) {}

bool ServerPieces::Cut(Piece* out, uint64_t* stream_pos) {
  if (index_ < 0) return false;
  const uint64_t ss = layout_.stripe_size, count = layout_.stripe_count;
  for (;;) {
    if (rest_.length == 0 && !cursor_.Next(&rest_, &rest_pos_)) return false;
    const uint64_t unit = rest_.offset / ss;
    const uint64_t ahead = (static_cast<uint64_t>(index_) + count - unit % count) % count;
    if (ahead > 0) {  // skip to this server's next unit
      const uint64_t skip = (unit + ahead) * ss - rest_.offset;
      const uint64_t step = std::min(skip, rest_.length);
      rest_.offset += step, rest_.length -= step, rest_pos_ += step;
      continue;
    }
    const uint64_t len = std::min(ss - rest_.offset % ss, rest_.length);
    const std::vector<Piece> one = MapRange(layout_, n_, rest_.offset, len);
    CLF_CHECK(one.size() == 1 && one[0].server == server_);
    *out = one[0];
    *stream_pos = rest_pos_;
    rest_.offset += len, rest_.length -= len, rest_pos_ += len;
    return true;
  }
}

bool ServerPieces::Next(Piece* out, uint64_t* stream_pos) {
  Piece cur;
  uint64_t cur_pos;
  if (has_peek_) {
    cur = peek_, cur_pos = peek_pos_, has_peek_ = false;
  } else if (!Cut(&cur, &cur_pos)) {
    return false;
  }
  Piece next;
  uint64_t next_pos;
  while (Cut(&next, &next_pos)) {
    if (next.local_offset != cur.local_offset + cur.length ||
        next.logical_offset != cur.logical_offset + cur.length) {
      peek_ = next, peek_pos_ = next_pos, has_peek_ = true;
      break;
    }
    cur.length += next.length;
  }
  *out = cur;
  if (stream_pos) *stream_pos = cur_pos;
  return true;
}

}  // namespace clf
