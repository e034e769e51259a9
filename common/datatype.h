// Datatypes: MPI-like descriptions of where the bytes of a noncontiguous
// access lie (paper 002). A client describes a strided or irregular access once
// (a vector of structs, a subarray of a 3-D array, ...) and sends the
// description; a server turns it into (offset, length) pairs itself with a
// TypeCursor, a few pieces at a time, never holding the whole list.
//
// Definitions follow the MPI standard (MPI-3.1 chapter 4) with two choices of
// ours, both stated where they apply:
//  - no alignment padding: a type's extent is ub - lb exactly (as with
//    MPI_BYTE); use Resized to pad;
//  - displacements, strides and extents are never negative (a file view's
//    offsets only grow); only Resized's lb may be negative.
//
// Thread safety: a Datatype is immutable once built and shared through
// TypePtr (shared_ptr<const Datatype>); any thread may read it. A TypeCursor
// or ServerPieces is a value used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/extent.h"
#include "common/handle.h"
#include "common/layout.h"
#include "common/status.h"

namespace clf {

class Datatype;
using TypePtr = std::shared_ptr<const Datatype>;

// Caps, enforced by every constructor and so by Decode (which builds through
// them). Bad input gets Code::kInvalid, never a crash or a huge allocation.
// Constructor nesting: a base type is depth 0, each constructor adds one.
inline constexpr int kMaxTypeDepth = 16;
// Entries in one explicit list (indexed, hindexed, struct blocks). Paper 002's
// largest test type is a struct of 1,024,000 blocks.
inline constexpr uint64_t kMaxTypeListEntries = uint64_t{1} << 20;
// List entries of a whole description, counted as if shared children were
// copied (this is what Encode writes and Decode allocates).
inline constexpr uint64_t kMaxTypeEntries = uint64_t{1} << 20;
// Constructor nodes of a whole description, counted the same way.
inline constexpr uint64_t kMaxTypeNodes = uint64_t{1} << 16;
// Dimensions of a subarray.
inline constexpr uint64_t kMaxTypeDims = 16;
// Sizes, bounds, extents and every offset a cursor yields stay within
// [-2^60, 2^60] (kMaxFileSize): all arithmetic is checked against it.
inline constexpr int64_t kMaxTypeBytes = int64_t{1} << 60;
// The largest encoding Decode accepts (every type the caps allow encodes
// smaller).
inline constexpr size_t kMaxEncodedTypeBytes = size_t{64} << 20;
// The wire format's version (the first byte of an encoding).
inline constexpr uint8_t kTypeWireVersion = 1;

// Which constructor made a type. The values are the wire format's node tags.
enum class TypeKind : uint8_t {
  kByte = 1,
  kInt32 = 2,
  kInt64 = 3,
  kDouble = 4,
  kContiguous = 5,
  kVector = 6,
  kHvector = 7,
  kIndexed = 8,
  kHindexed = 9,
  kIndexedBlock = 10,
  kHindexedBlock = 11,
  kStruct = 12,
  kSubarray = 13,
  kResized = 14,
};

// Memory order of a subarray's full array: kC = the last dimension varies
// fastest, kFortran = the first one does.
enum class ArrayOrder : uint8_t { kC = 0, kFortran = 1 };

// A datatype: a sequence of data bytes (its typemap, in order) placed at byte
// offsets relative to where an instance of the type starts, plus the bounds
// lb/ub that say where the next instance starts (at + extent). Built only
// through the static constructors below; immutable.
class Datatype {
 public:
  // Base types: contiguous runs of 1, 4, 8 and 8 bytes (alignment 1).
  static TypePtr Byte();
  static TypePtr Int32();
  static TypePtr Int64();
  static TypePtr Double();

  // `count` copies of `old`, each one extent after the previous.
  static Result<TypePtr> Contiguous(uint64_t count, TypePtr old);
  // `count` blocks of `blocklen` copies of `old`; block i starts at
  // i * stride * extent(old) bytes.
  static Result<TypePtr> Vector(uint64_t count, uint64_t blocklen, int64_t stride, TypePtr old);
  // As Vector, with the stride in bytes.
  static Result<TypePtr> Hvector(uint64_t count, uint64_t blocklen, int64_t stride_bytes,
                                 TypePtr old);
  // Block i: blocklens[i] copies of `old` at disps[i] * extent(old) bytes, in
  // list order (not sorted). The spans must have the same length.
  static Result<TypePtr> Indexed(std::span<const uint64_t> blocklens,
                                 std::span<const int64_t> disps, TypePtr old);
  // As Indexed, with the displacements in bytes.
  static Result<TypePtr> Hindexed(std::span<const uint64_t> blocklens,
                                  std::span<const int64_t> byte_disps, TypePtr old);
  // As Indexed with every block `blocklen` copies long.
  static Result<TypePtr> IndexedBlock(uint64_t blocklen, std::span<const int64_t> disps,
                                      TypePtr old);
  // As Hindexed with every block `blocklen` copies long.
  static Result<TypePtr> HindexedBlock(uint64_t blocklen, std::span<const int64_t> byte_disps,
                                       TypePtr old);
  // Block i: blocklens[i] copies of types[i] at byte_disps[i]. No alignment
  // padding is added to the extent (see the file comment).
  static Result<TypePtr> Struct(std::span<const uint64_t> blocklens,
                                std::span<const int64_t> byte_disps,
                                std::span<const TypePtr> types);
  // The elements [starts[d], starts[d] + subsizes[d]) of each dimension d of
  // a full array of sizes[d] elements of `old`, stored in `order`. lb is 0 and
  // the extent that of the full array (prod(sizes) * extent(old)), so
  // consecutive instances tile consecutive full arrays. A subsize may be 0.
  static Result<TypePtr> Subarray(std::span<const uint64_t> sizes,
                                  std::span<const uint64_t> subsizes,
                                  std::span<const uint64_t> starts, ArrayOrder order, TypePtr old);
  // `old`'s data with new bounds: lb = `lb` (may be negative), extent =
  // `extent` (not negative). Like MPI's markers these bounds are sticky: a
  // type built from it takes its lb/ub from them, not from its data.
  static Result<TypePtr> Resized(TypePtr old, int64_t lb, int64_t extent);

  TypeKind kind() const { return kind_; }
  // Data bytes of one instance.
  uint64_t size() const { return size_; }
  // Bounds (MPI's lb, ub, extent): where an instance's footprint starts and
  // ends relative to its displacement; the next instance starts extent later.
  int64_t lb() const { return lb_; }
  int64_t ub() const { return ub_; }
  int64_t extent() const { return ub_ - lb_; }
  // Where the data bytes really lie (MPI's true lb / true extent); 0 and 0
  // for a type without data.
  int64_t true_lb() const { return true_lb_; }
  int64_t true_ub() const { return true_ub_; }
  int64_t true_extent() const { return true_ub_ - true_lb_; }
  // True when the data of one instance is one run: size() bytes from
  // true_lb(), in typemap order.
  bool dense() const { return dense_; }
  // Runs a TypeCursor finds in one instance before it merges adjacent ones
  // (an upper bound on the instance's (offset, length) pairs).
  uint64_t pieces() const { return pieces_; }
  // Constructor nesting (0 for a base type).
  int depth() const { return depth_; }

 private:
  friend struct DatatypeAccess;  // datatype.cc: the builders and the encoder
  friend class TypeCursor;

  // How a cursor walks the type (the constructors reduce to these).
  enum class Shape : uint8_t { kLeaf, kStrided, kList, kAlias };

  Datatype() = default;

  TypeKind kind_ = TypeKind::kByte;
  Shape shape_ = Shape::kLeaf;
  ArrayOrder order_ = ArrayOrder::kC;
  bool marked_ = false;  // lb/ub come from Resized markers, not the data
  bool dense_ = true;
  int depth_ = 0;
  uint64_t size_ = 0;
  int64_t lb_ = 0, ub_ = 0, true_lb_ = 0, true_ub_ = 0;
  uint64_t pieces_ = 0;
  uint64_t entries_ = 0;  // list entries of the description, tree-expanded
  uint64_t nodes_ = 0;    // constructor nodes of the description, tree-expanded

  // kStrided: blocks_ blocks of per_block_ copies of children_[0], block i at
  // i * step_ bytes.
  uint64_t blocks_ = 0, per_block_ = 0;
  int64_t step_ = 0;
  // kList: block i at disps_[i] bytes, holding the data bytes [cum_[i],
  // cum_[i+1]) of the instance; copies of children_[i] (or children_[0]).
  std::vector<int64_t> disps_;
  std::vector<uint64_t> cum_;
  // kAlias: the data and walk are impl_'s (Resized: the old type; Subarray:
  // the nest of hvectors it is built from).
  TypePtr impl_;
  std::vector<TypePtr> children_;  // the old type(s) as given

  // Parameters as given, for Encode.
  int64_t stride_ = 0;                // vector: elements; hvector: bytes
  uint64_t blocklen_ = 0;             // *_block kinds
  std::vector<uint64_t> blocklens_;   // indexed, hindexed, struct
  std::vector<int64_t> given_disps_;  // indexed, indexed_block: in extents of old
  std::vector<uint64_t> dims_;        // subarray: sizes, subsizes, starts
};

// The wire form of a type: version byte, then the constructor tree in
// preorder, each node a kind byte and its parameters as little-endian base-128
// varints (signed ones zigzag-encoded). Self-describing and compact.
std::string Encode(const Datatype& type);
// Parses an encoding, rebuilding the type through the constructors (so all
// the caps above apply, plus kMaxEncodedTypeBytes). Any malformed, truncated,
// oversized or trailing input is Code::kInvalid.
Result<TypePtr> Decode(std::string_view bytes);

// Walks the data bytes of `count` instances of a type placed at a file
// displacement (instance k at disp + k * extent) in typemap order, as
// (offset, length) extents, merging adjacent runs. The "data stream" is those
// bytes numbered 0, 1, ...; a cursor covers a window [skip, skip + limit) of
// it. Memory is O(1) (the type is shared, not copied); finding the run that
// holds a stream position costs O(depth * log(list length)), so a skip is
// as cheap as one step. Not thread safe; the type is kept alive by the cursor.
class TypeCursor {
 public:
  static constexpr uint64_t kToEnd = ~uint64_t{0};

  // Fails (kInvalid) when the data bytes or the last offset would pass
  // kMaxTypeBytes.
  static Result<TypeCursor> Make(TypePtr type, uint64_t disp, uint64_t count, uint64_t skip = 0,
                                 uint64_t limit = kToEnd);
  // A file view (MPI_File_set_view with etype = byte): `filetype` tiled from
  // `disp` without end; the view's bytes [view_offset, view_offset + length)
  // map to the extents the cursor yields. A filetype without data is refused
  // (the view would never advance).
  static Result<TypeCursor> View(TypePtr filetype, uint64_t disp, uint64_t view_offset,
                                 uint64_t length);

  // The next extent (length > 0); false once the window is done. With
  // stream_pos, also the stream position of the extent's first byte.
  bool Next(Extent* out, uint64_t* stream_pos = nullptr);
  // Stream position of the next byte to yield, and the window's end.
  uint64_t position() const { return has_peek_ ? peek_pos_ : pos_; }
  uint64_t end() const { return end_; }

 private:
  struct Block {                  // one block of a strided or list node
    const Datatype* c = nullptr;  // its type
    uint64_t copies = 0;          // copies of c in it
    uint64_t bytes = 0;           // its data bytes
    uint64_t r = 0;               // the wanted byte's position in it
  };

  TypeCursor() = default;
  Extent Raw();  // the run holding pos_, unmerged and clipped; advances pos_
  static Block Pick(const Datatype& t, uint64_t p, uint64_t* d);
  static Extent Locate(const Datatype* t, uint64_t d, uint64_t p);

  TypePtr type_;
  uint64_t disp_ = 0, ext_ = 0;
  uint64_t pos_ = 0, end_ = 0;
  bool has_peek_ = false;  // a run Raw() returned that did not merge
  Extent peek_;
  uint64_t peek_pos_ = 0;
};

// The part of a cursor's extents one server stores: each extent cut at stripe
// unit boundaries (common/layout.h: unit u is on the stripe's server u mod
// stripe_count), keeping the units on `server`, with their local offsets in
// its object. For a server handed a datatype (paper 002) to find its own
// pieces. Pieces come in stream order; adjacent ones merge when contiguous in
// both the file and the object. A server without units of the layout, or a
// layout ValidateLayout refuses for n servers, gets none. `server` is a data
// server (slot 0); a replica holder asks for the primary whose copy it keeps
// (PrimaryOfSlot): copies share local offsets. Not thread safe.
class ServerPieces {
 public:
  ServerPieces(TypeCursor cursor, const Layout& layout, uint32_t n, ServerId server);
  // The next piece (server, local_offset, length, logical_offset = file
  // offset); stream_pos: the data stream position of its first byte.
  bool Next(Piece* out, uint64_t* stream_pos = nullptr);

 private:
  bool Cut(Piece* out, uint64_t* stream_pos);  // the next unit's part, unmerged

  TypeCursor cursor_;
  Layout layout_;
  uint32_t n_;
  ServerId server_;
  int index_;    // StripeIndex of server_, -1 when it holds no units
  Extent rest_;  // what is left of the cursor's current extent
  uint64_t rest_pos_ = 0;
  bool has_peek_ = false;
  Piece peek_;
  uint64_t peek_pos_ = 0;
};

}  // namespace clf
