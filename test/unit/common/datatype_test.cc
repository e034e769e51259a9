// Datatypes: bounds against hand-worked MPI definitions (MPI-3.1 ch. 4),
// flattening against hand-written (offset, length) lists and a byte-wise
// reference, the wire encoding, and hostile inputs.
#include "common/datatype.h"

#include <random>
#include <string>
#include <vector>

#include "test/support/test_util.h"

namespace clf {
namespace {

using Pieces = std::vector<Extent>;

TypePtr Ok(Result<TypePtr> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Datatype::Byte();
}

Pieces Drain(TypeCursor c) {
  Pieces out;
  Extent e;
  while (c.Next(&e)) out.push_back(e);
  return out;
}

Pieces Flatten(const TypePtr& t, uint64_t disp = 0, uint64_t count = 1, uint64_t skip = 0,
               uint64_t limit = TypeCursor::kToEnd) {
  Result<TypeCursor> c = TypeCursor::Make(t, disp, count, skip, limit);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? Drain(*c) : Pieces{};
}

struct Bounds {
  uint64_t size;
  int64_t lb, ub, true_lb, true_ub;
};
void ExpectBounds(const TypePtr& t, Bounds b) {
  EXPECT_EQ(t->size(), b.size);
  EXPECT_EQ(t->lb(), b.lb);
  EXPECT_EQ(t->ub(), b.ub);
  EXPECT_EQ(t->extent(), b.ub - b.lb);
  EXPECT_EQ(t->true_lb(), b.true_lb);
  EXPECT_EQ(t->true_extent(), b.true_ub - b.true_lb);
}

TEST(DatatypeTest, BaseTypes) {
  ExpectBounds(Datatype::Byte(), {1, 0, 1, 0, 1});
  ExpectBounds(Datatype::Int32(), {4, 0, 4, 0, 4});
  ExpectBounds(Datatype::Int64(), {8, 0, 8, 0, 8});
  ExpectBounds(Datatype::Double(), {8, 0, 8, 0, 8});
  EXPECT_EQ(Datatype::Byte()->depth(), 0);
}

// Hand-worked from the MPI definitions: typemap entries (type, displacement),
// lb = min displacement, ub = max (displacement + size), no padding.
TEST(DatatypeTest, Contiguous) {
  TypePtr t = Ok(Datatype::Contiguous(3, Datatype::Int32()));  // ints at 0, 4, 8
  ExpectBounds(t, {12, 0, 12, 0, 12});
  EXPECT_TRUE(t->dense());
  EXPECT_EQ(Flatten(t), (Pieces{{0, 12}}));
  ExpectBounds(Ok(Datatype::Contiguous(0, Datatype::Int32())), {0, 0, 0, 0, 0});
}

TEST(DatatypeTest, Vector) {
  // Blocks of 2 ints at 0, 4*4, 8*4 bytes: data [0,8) [16,24) [32,40).
  TypePtr t = Ok(Datatype::Vector(3, 2, 4, Datatype::Int32()));
  ExpectBounds(t, {24, 0, 40, 0, 40});
  EXPECT_EQ(t->pieces(), 3u);
  EXPECT_EQ(Flatten(t), (Pieces{{0, 8}, {16, 8}, {32, 8}}));
}

TEST(DatatypeTest, Hvector) {
  TypePtr t = Ok(Datatype::Hvector(2, 3, 20, Datatype::Byte()));  // [0,3) [20,23)
  ExpectBounds(t, {6, 0, 23, 0, 23});
  EXPECT_EQ(Flatten(t), (Pieces{{0, 3}, {20, 3}}));
}

TEST(DatatypeTest, IndexedKeepsTypemapOrder) {
  // Block 0: 2 ints at 3*4 = 12; block 1: 1 int at 0. lb 0, ub 20.
  const uint64_t lens[] = {2, 1};
  const int64_t disps[] = {3, 0};
  TypePtr t = Ok(Datatype::Indexed(lens, disps, Datatype::Int32()));
  ExpectBounds(t, {12, 0, 20, 0, 20});
  EXPECT_EQ(Flatten(t), (Pieces{{12, 8}, {0, 4}}));
}

TEST(DatatypeTest, Hindexed) {
  const uint64_t lens[] = {1, 2};
  const int64_t disps[] = {10, 2};  // [10,11) then [2,4): lb 2, ub 11
  TypePtr t = Ok(Datatype::Hindexed(lens, disps, Datatype::Byte()));
  ExpectBounds(t, {3, 2, 11, 2, 11});
  EXPECT_EQ(Flatten(t), (Pieces{{10, 1}, {2, 2}}));
}

TEST(DatatypeTest, IndexedBlockAndHindexedBlock) {
  const int64_t disps[] = {1, 5};  // 2 ints at 4 and at 20: lb 4, ub 28
  TypePtr t = Ok(Datatype::IndexedBlock(2, disps, Datatype::Int32()));
  ExpectBounds(t, {16, 4, 28, 4, 28});
  EXPECT_EQ(Flatten(t), (Pieces{{4, 8}, {20, 8}}));
  const int64_t bdisps[] = {0, 10};
  TypePtr h = Ok(Datatype::HindexedBlock(3, bdisps, Datatype::Byte()));
  ExpectBounds(h, {6, 0, 13, 0, 13});
  EXPECT_EQ(Flatten(h), (Pieces{{0, 3}, {10, 3}}));
}

TEST(DatatypeTest, Struct) {
  // int at 0, double at 8, 2 bytes at 20: ub 22 (no alignment padding).
  const uint64_t lens[] = {1, 1, 2};
  const int64_t disps[] = {0, 8, 20};
  const TypePtr types[] = {Datatype::Int32(), Datatype::Double(), Datatype::Byte()};
  TypePtr t = Ok(Datatype::Struct(lens, disps, types));
  ExpectBounds(t, {14, 0, 22, 0, 22});
  EXPECT_EQ(Flatten(t), (Pieces{{0, 4}, {8, 8}, {20, 2}}));
}

TEST(DatatypeTest, SubarrayCOrder) {
  // 4x5 bytes, rows 1..2, columns 2..4; element (i,j) at 5i + j:
  // 7,8,9 and 12,13,14. lb 0, extent 20 (the full array).
  const uint64_t sizes[] = {4, 5}, subsizes[] = {2, 3}, starts[] = {1, 2};
  TypePtr t = Ok(Datatype::Subarray(sizes, subsizes, starts, ArrayOrder::kC, Datatype::Byte()));
  ExpectBounds(t, {6, 0, 20, 7, 15});
  EXPECT_EQ(Flatten(t), (Pieces{{7, 3}, {12, 3}}));
  // The second instance is the next full array.
  EXPECT_EQ(Flatten(t, 0, 2), (Pieces{{7, 3}, {12, 3}, {27, 3}, {32, 3}}));
}

TEST(DatatypeTest, SubarrayFortranOrder) {
  // Same parameters, first index fastest: (i,j) at i + 4j, j = 2..4, i = 1..2:
  // 9,10 13,14 17,18.
  const uint64_t sizes[] = {4, 5}, subsizes[] = {2, 3}, starts[] = {1, 2};
  TypePtr t =
      Ok(Datatype::Subarray(sizes, subsizes, starts, ArrayOrder::kFortran, Datatype::Byte()));
  ExpectBounds(t, {6, 0, 20, 9, 19});
  EXPECT_EQ(Flatten(t), (Pieces{{9, 2}, {13, 2}, {17, 2}}));
}

TEST(DatatypeTest, Subarray3dOfInts) {
  // 2x3x4 ints, C order, [1,2) x [0,2) x [1,3): element (i,j,k) at
  // 4*(12i + 4j + k): (1,0,1) = 52, (1,1,1) = 68; each run 2 ints.
  const uint64_t sizes[] = {2, 3, 4}, subsizes[] = {1, 2, 2}, starts[] = {1, 0, 1};
  TypePtr t = Ok(Datatype::Subarray(sizes, subsizes, starts, ArrayOrder::kC, Datatype::Int32()));
  ExpectBounds(t, {16, 0, 96, 52, 76});
  EXPECT_EQ(Flatten(t), (Pieces{{52, 8}, {68, 8}}));
}

TEST(DatatypeTest, ResizedWithNegativeLb) {
  TypePtr r = Ok(Datatype::Resized(Datatype::Int32(), -4, 12));
  ExpectBounds(r, {4, -4, 8, 0, 4});
  // Copies one extent (12) apart: ints at 0 and 12; lb -4, ub 12 + 8 = 20.
  TypePtr c = Ok(Datatype::Contiguous(2, r));
  ExpectBounds(c, {8, -4, 20, 0, 16});
  // Two instances at 100: the second starts 24 later.
  EXPECT_EQ(Flatten(c, 100, 2), (Pieces{{100, 4}, {112, 4}, {124, 4}, {136, 4}}));
}

TEST(DatatypeTest, ResizedBoundsAreSticky) {
  // A marked byte (lb 2, ub 6) at 0 and a plain byte at 16: MPI takes lb/ub
  // from the markers only, so ub stays 6 while the data reaches 17.
  TypePtr marked = Ok(Datatype::Resized(Datatype::Byte(), 2, 4));
  const uint64_t lens[] = {1, 1};
  const int64_t disps[] = {0, 16};
  const TypePtr types[] = {marked, Datatype::Byte()};
  TypePtr t = Ok(Datatype::Struct(lens, disps, types));
  ExpectBounds(t, {2, 2, 6, 0, 17});
}

TEST(DatatypeTest, VectorOfStructCoalesces) {
  // S: int at 0, 2 bytes at 6; extent 8. Vector of 2 blocks of 2 S, stride
  // 3 S (24 bytes): S copies at 0, 8, 24, 32. Runs [6,8) and [8,12) merge.
  const uint64_t lens[] = {1, 2};
  const int64_t disps[] = {0, 6};
  const TypePtr types[] = {Datatype::Int32(), Datatype::Byte()};
  TypePtr s = Ok(Datatype::Struct(lens, disps, types));
  ExpectBounds(s, {6, 0, 8, 0, 8});
  TypePtr v = Ok(Datatype::Vector(2, 2, 3, s));
  ExpectBounds(v, {24, 0, 40, 0, 40});
  EXPECT_EQ(v->pieces(), 8u);
  EXPECT_EQ(Flatten(v), (Pieces{{0, 4}, {6, 6}, {14, 2}, {24, 4}, {30, 6}, {38, 2}}));
}

TEST(DatatypeTest, AdjacentBlocksMakeOneRun) {
  const uint64_t lens[] = {2, 3};
  const int64_t abut[] = {0, 2}, gap[] = {0, 4};
  TypePtr a = Ok(Datatype::Hindexed(lens, abut, Datatype::Byte()));
  EXPECT_TRUE(a->dense());
  EXPECT_EQ(Flatten(a), (Pieces{{0, 5}}));
  EXPECT_EQ(Flatten(Ok(Datatype::Hindexed(lens, gap, Datatype::Byte()))), (Pieces{{0, 2}, {4, 3}}));
  // A vector whose stride equals its block is one run, and so are copies of it.
  TypePtr v = Ok(Datatype::Vector(2, 1, 1, Datatype::Int32()));
  EXPECT_EQ(Flatten(Ok(Datatype::Contiguous(4, v)), 8, 1000), (Pieces{{8, 32000}}));
  // Instances whose last and first runs meet merge across the boundary.
  TypePtr w = Ok(Datatype::Vector(3, 2, 4, Datatype::Int32()));
  EXPECT_EQ(Flatten(w, 0, 2), (Pieces{{0, 8}, {16, 8}, {32, 16}, {56, 8}, {72, 8}}));
}

TEST(DatatypeTest, SkipAndLimit) {
  TypePtr w = Ok(Datatype::Vector(3, 2, 4, Datatype::Int32()));
  // Stream bytes [5, 35) of two instances (runs above).
  Result<TypeCursor> c = TypeCursor::Make(w, 0, 2, 5, 30);
  ASSERT_OK(c);
  Pieces got;
  std::vector<uint64_t> pos;
  Extent e;
  uint64_t p;
  while (c->Next(&e, &p)) got.push_back(e), pos.push_back(p);
  EXPECT_EQ(got, (Pieces{{5, 3}, {16, 8}, {32, 16}, {56, 3}}));
  EXPECT_EQ(pos, (std::vector<uint64_t>{5, 8, 16, 32}));
  EXPECT_EQ(Flatten(w, 0, 2, 48), Pieces{});    // skip to the end
  EXPECT_EQ(Flatten(w, 0, 2, 100), Pieces{});   // past it
  EXPECT_EQ(Flatten(w, 0, 2, 3, 0), Pieces{});  // empty window
}

TEST(DatatypeTest, SkipJumpsOverWholeBlocks) {
  // 2^40 one-byte runs at even offsets: the last two are reached at once.
  const uint64_t n = uint64_t{1} << 40;
  TypePtr t = Ok(Datatype::Vector(n, 1, 2, Datatype::Byte()));
  EXPECT_EQ(Flatten(t, 0, 1, n - 2), (Pieces{{2 * n - 4, 1}, {2 * n - 2, 1}}));
}

TEST(DatatypeTest, MillionPiecesStream) {
  TypePtr t = Ok(Datatype::Vector(1000000, 1, 2, Datatype::Byte()));
  Result<TypeCursor> c = TypeCursor::Make(t, 0, 1);
  ASSERT_OK(c);
  uint64_t count = 0, bytes = 0;
  Extent e, last;
  while (c->Next(&e)) ++count, bytes += e.length, last = e;
  EXPECT_EQ(count, 1000000u);
  EXPECT_EQ(bytes, 1000000u);
  EXPECT_EQ(last, (Extent{1999998, 1}));
}

TEST(DatatypeTest, ViewMapsViewOffsetsToFileOffsets) {
  // Filetype: 4 bytes at 0 and 4 at 8, extent 16; view from file offset 1000.
  TypePtr h = Ok(Datatype::Hvector(2, 4, 8, Datatype::Byte()));
  TypePtr f = Ok(Datatype::Resized(h, 0, 16));
  Result<TypeCursor> c = TypeCursor::View(f, 1000, 6, 12);
  ASSERT_OK(c);
  EXPECT_EQ(Drain(*c), (Pieces{{1010, 2}, {1016, 4}, {1024, 4}, {1032, 2}}));
  EXPECT_STATUS(Code::kInvalid,
                TypeCursor::View(Ok(Datatype::Contiguous(0, Datatype::Byte())), 0, 0, 10));
}

// Byte-wise reference: the file offset of every data byte, in order, from
// the constructor definitions directly.
struct Ref {
  TypePtr t;
  std::vector<int64_t> bytes;
};

Ref Repeat(const Ref& c, TypePtr t, const std::vector<std::pair<int64_t, uint64_t>>& blocks) {
  Ref out{std::move(t), {}};
  for (auto [disp, len] : blocks)
    for (uint64_t j = 0; j < len; ++j)
      for (int64_t b : c.bytes) out.bytes.push_back(disp + int64_t(j) * c.t->extent() + b);
  return out;
}

Ref RandomType(std::mt19937_64& rng, int depth) {
  if (depth == 0 || rng() % 4 == 0) {
    TypePtr base = rng() % 2 ? Datatype::Byte() : Datatype::Int32();
    std::vector<int64_t> b;
    for (uint64_t i = 0; i < base->size(); ++i) b.push_back(int64_t(i));
    return Ref{base, b};
  }
  Ref c = RandomType(rng, depth - 1);
  const int64_t ext = c.t->extent();
  switch (rng() % 5) {
    case 0: {
      uint64_t n = 1 + rng() % 3;
      return Repeat(c, Ok(Datatype::Contiguous(n, c.t)), {{0, n}});
    }
    case 1: {
      uint64_t count = 1 + rng() % 3, len = 1 + rng() % 2;
      int64_t stride = int64_t(rng() % 4);
      std::vector<std::pair<int64_t, uint64_t>> blocks;
      for (uint64_t i = 0; i < count; ++i) blocks.push_back({int64_t(i) * stride * ext, len});
      return Repeat(c, Ok(Datatype::Vector(count, len, stride, c.t)), blocks);
    }
    case 2: {
      std::vector<uint64_t> lens;
      std::vector<int64_t> disps;
      std::vector<std::pair<int64_t, uint64_t>> blocks;
      for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i) {
        lens.push_back(i == 0 ? 1 + rng() % 2 : rng() % 3);  // never all empty
        disps.push_back(int64_t(rng() % 40));
        blocks.push_back({disps.back(), lens.back()});
      }
      return Repeat(c, Ok(Datatype::Hindexed(lens, disps, c.t)), blocks);
    }
    case 3: {
      int64_t lb = int64_t(rng() % 9) - 4, extent = int64_t(rng() % 30);
      return Ref{Ok(Datatype::Resized(c.t, lb, extent)), c.bytes};
    }
    default: {
      const uint64_t sizes[] = {3, 4}, subsizes[] = {1 + rng() % 3, 1 + rng() % 4};
      const uint64_t starts[] = {rng() % (4 - subsizes[0]), rng() % (5 - subsizes[1])};
      const ArrayOrder order = rng() % 2 ? ArrayOrder::kC : ArrayOrder::kFortran;
      // Typemap order: the fastest index inner (j in C order, i in Fortran).
      std::vector<std::pair<int64_t, uint64_t>> blocks;
      const bool c_order = order == ArrayOrder::kC;
      const uint64_t outer = c_order ? 0 : 1, inner = 1 - outer;
      for (uint64_t a = starts[outer]; a < starts[outer] + subsizes[outer]; ++a)
        for (uint64_t b = starts[inner]; b < starts[inner] + subsizes[inner]; ++b) {
          const uint64_t i = c_order ? a : b, j = c_order ? b : a;
          blocks.push_back({int64_t(c_order ? 4 * i + j : i + 3 * j) * ext, 1});
        }
      return Repeat(c, Ok(Datatype::Subarray(sizes, subsizes, starts, order, c.t)), blocks);
    }
  }
}

TEST(DatatypeTest, RandomNestedTypesMatchByteReference) {
  std::mt19937_64 rng(28);
  for (int iter = 0; iter < 400; ++iter) {
    Ref r = RandomType(rng, 4);
    ASSERT_EQ(r.t->size(), r.bytes.size());
    const uint64_t count = 1 + rng() % 3, disp = rng() % 50;
    const uint64_t total = count * r.t->size();
    const uint64_t skip = total ? rng() % (total + 1) : 0, limit = rng() % (total + 2);
    std::vector<int64_t> want;
    for (uint64_t s = skip; s < std::min(total, skip + limit); ++s) {
      const uint64_t k = s / r.t->size();
      want.push_back(int64_t(disp) + int64_t(k) * r.t->extent() + r.bytes[s % r.t->size()]);
    }
    std::vector<int64_t> got;
    Extent prev{0, 0};
    for (const Extent& e : Flatten(r.t, disp, count, skip, limit)) {
      ASSERT_GT(e.length, 0u);
      ASSERT_FALSE(prev.length > 0 && prev.end() == e.offset) << "adjacent runs left unmerged";
      for (uint64_t i = 0; i < e.length; ++i) got.push_back(int64_t(e.offset + i));
      prev = e;
    }
    ASSERT_EQ(got, want) << "iteration " << iter;
    ASSERT_LE(r.t->pieces(), r.t->size());
  }
}

TEST(DatatypeTest, ServerPiecesCutAtStripes) {
  // Runs [0,6000) [10000,16000) [20000,26000); 4 KiB units on 2 servers:
  // even units on server 0, odd ones on server 1.
  TypePtr t = Ok(Datatype::Hvector(3, 6000, 10000, Datatype::Byte()));
  const Layout l{4096, 2, 0, 1};
  auto pieces_of = [&](ServerId s) {
    Result<TypeCursor> c = TypeCursor::Make(t, 0, 1);
    EXPECT_TRUE(c.ok());
    ServerPieces sp(*c, l, 2, s);
    std::vector<std::pair<Piece, uint64_t>> out;
    Piece p;
    uint64_t pos;
    while (sp.Next(&p, &pos)) out.push_back({p, pos});
    return out;
  };
  auto s0 = pieces_of(0), s1 = pieces_of(1);
  // (local offset, length, file offset, stream position)
  using Row = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;
  auto rows = [](const std::vector<std::pair<Piece, uint64_t>>& v) {
    std::vector<Row> r;
    for (auto& [p, pos] : v) r.push_back({p.local_offset, p.length, p.logical_offset, pos});
    return r;
  };
  EXPECT_EQ(rows(s0), (std::vector<Row>{{0, 4096, 0, 0},
                                        {5904, 2288, 10000, 6000},
                                        {11808, 480, 20000, 12000},
                                        {12288, 1424, 24576, 16576}}));
  EXPECT_EQ(rows(s1),
            (std::vector<Row>{
                {0, 1904, 4096, 4096}, {4096, 3712, 12288, 8288}, {8192, 4096, 20480, 12480}}));
  for (auto& [p, pos] : s1) EXPECT_EQ(p.server, 1u);
  EXPECT_TRUE(pieces_of(2).empty());  // not a server of this 2-server cluster
}

TEST(DatatypeTest, ServerPiecesPartitionTheStream) {
  std::mt19937_64 rng(5);
  for (int iter = 0; iter < 200; ++iter) {
    const uint32_t n = 1 + rng() % 5;
    const Layout l{4096, 1 + uint32_t(rng() % n), uint32_t(rng() % n), 1};
    TypePtr t = Ok(Datatype::Hvector(1 + rng() % 20, 1 + rng() % 9000, int64_t(rng() % 20000),
                                     Datatype::Byte()));
    const uint64_t total = t->size() * 2, disp = rng() % 10000;
    uint64_t covered = 0;
    for (ServerId s = 0; s < n; ++s) {
      Result<TypeCursor> c = TypeCursor::Make(t, disp, 2);
      ASSERT_OK(c);
      ServerPieces sp(*c, l, n, s);
      Piece p;
      uint64_t pos, prev_end = 0;
      while (sp.Next(&p, &pos)) {
        ASSERT_EQ(p.server, s);
        ASSERT_GE(pos, prev_end);  // stream order
        const std::vector<Piece> ref = MapRange(l, n, p.logical_offset, p.length);
        for (const Piece& r : ref) ASSERT_EQ(r.server, s);
        ASSERT_EQ(ref.front().local_offset, p.local_offset);
        covered += p.length, prev_end = pos + p.length;
      }
    }
    ASSERT_EQ(covered, total) << "iteration " << iter;
  }
}

// ---------------------------------------------------------------------------
// Wire encoding.

std::vector<TypePtr> SampleTypes() {
  const uint64_t lens[] = {2, 0, 1};
  const int64_t disps[] = {3, 9, 0};
  const TypePtr types[] = {Datatype::Int64(), Datatype::Double(),
                           Ok(Datatype::Resized(Datatype::Int32(), -4, 12))};
  const uint64_t sizes[] = {4, 5}, subsizes[] = {2, 3}, starts[] = {1, 2};
  TypePtr s = Ok(Datatype::Struct(lens, disps, types));
  return {
      Datatype::Byte(),
      Ok(Datatype::Contiguous(3, Datatype::Int32())),
      Ok(Datatype::Vector(3, 2, 4, s)),
      Ok(Datatype::Hvector(2, 3, 20, Datatype::Double())),
      Ok(Datatype::Indexed(lens, disps, Datatype::Int32())),
      Ok(Datatype::Hindexed(lens, disps, s)),
      Ok(Datatype::IndexedBlock(2, disps, Datatype::Int32())),
      Ok(Datatype::HindexedBlock(2, disps, Datatype::Byte())),
      s,
      Ok(Datatype::Subarray(sizes, subsizes, starts, ArrayOrder::kFortran, s)),
      Ok(Datatype::Resized(Ok(Datatype::Vector(2, 1, 3, Datatype::Int32())), -8, 40)),
  };
}

TEST(DatatypeWireTest, RoundTrips) {
  for (const TypePtr& t : SampleTypes()) {
    const std::string wire = Encode(*t);
    ASSERT_EQ(wire[0], char(kTypeWireVersion));
    ASSERT_EQ(wire[1], char(t->kind()));  // version, then the root's tag
    Result<TypePtr> back = Decode(wire);
    ASSERT_OK(back);
    EXPECT_EQ(Encode(**back), wire);
    EXPECT_EQ((*back)->kind(), t->kind());
    ExpectBounds(*back, {t->size(), t->lb(), t->ub(), t->true_lb(), t->true_ub()});
    EXPECT_EQ(Flatten(*back, 7, 3), Flatten(t, 7, 3));
  }
}

TEST(DatatypeWireTest, ExactBytes) {
  // version 1, contiguous (5), count 3, byte (1).
  EXPECT_EQ(Encode(*Ok(Datatype::Contiguous(3, Datatype::Byte()))),
            std::string("\x01\x05\x03\x01"));
  // resized (14), lb -1 -> zigzag 1, extent 200 -> zigzag 400 = 0x90 0x03, int32 (2).
  EXPECT_EQ(Encode(*Ok(Datatype::Resized(Datatype::Int32(), -1, 200))),
            std::string("\x01\x0e\x01\x90\x03\x02"));
}

std::string Wire(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(char(b));
  return s;
}

TEST(DatatypeWireTest, RefusesTruncatedAndTrailingInput) {
  for (const TypePtr& t : SampleTypes()) {
    const std::string wire = Encode(*t);
    for (size_t n = 0; n < wire.size(); ++n)
      ASSERT_EQ(Decode(wire.substr(0, n)).status().code(), Code::kInvalid) << "prefix " << n;
    EXPECT_STATUS(Code::kInvalid, Decode(wire + '\x01'));
  }
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({2, 1})));   // unknown version
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({1, 0})));   // unknown tag
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({1, 15})));  // unknown tag
  EXPECT_STATUS(Code::kInvalid, Decode(std::string(kMaxEncodedTypeBytes + 1, '\x01')));
}

TEST(DatatypeWireTest, RefusesOverlongVarint) {
  std::string w = Wire({1, 5});
  w += std::string(10, '\xff') + '\x01';  // 11-byte count
  w += '\x01';
  EXPECT_STATUS(Code::kInvalid, Decode(w));
  std::string w2 = Wire({1, 5});
  w2 += std::string(9, '\xff') + '\x02';  // tenth byte carries bit 64
  w2 += '\x01';
  EXPECT_STATUS(Code::kInvalid, Decode(w2));
  // contiguous(3, byte) with the count padded to two bytes.
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({1, 5, 0x83, 0x00, 1})));
}

TEST(DatatypeWireTest, RefusesDepthBombs) {
  auto nest = [](int depth) {
    std::string w(1, '\x01');
    for (int i = 0; i < depth; ++i) w += Wire({5, 1});  // contiguous(1, ...)
    return w + '\x01';
  };
  EXPECT_OK(Decode(nest(kMaxTypeDepth)));
  EXPECT_STATUS(Code::kInvalid, Decode(nest(kMaxTypeDepth + 1)));
  EXPECT_STATUS(Code::kInvalid, Decode(nest(1000000)));  // no stack overflow
  // The constructors apply the same cap.
  TypePtr t = Datatype::Byte();
  for (int i = 0; i < kMaxTypeDepth; ++i) t = Ok(Datatype::Contiguous(1, t));
  EXPECT_EQ(t->depth(), kMaxTypeDepth);
  EXPECT_STATUS(Code::kInvalid, Datatype::Contiguous(1, t));
}

TEST(DatatypeWireTest, RefusesCountBombs) {
  // hindexed claiming 2^21 entries with 2 bytes of them.
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({1, 9, 0x80, 0x80, 0x80, 0x01, 1, 0, 1})));
  // struct claiming 2^62 entries.
  std::string w = Wire({1, 12});
  w += std::string(8, '\xff') + '\x3f';
  EXPECT_STATUS(Code::kInvalid, Decode(w + Wire({1, 0, 1})));
  // A list one entry over the cap, built for real.
  std::vector<uint64_t> lens(kMaxTypeListEntries + 1, 1);
  std::vector<int64_t> disps(kMaxTypeListEntries + 1, 0);
  EXPECT_STATUS(Code::kInvalid, Datatype::Hindexed(lens, disps, Datatype::Byte()));
  // 70,000 constructors under one struct pass the node cap.
  TypePtr one = Ok(Datatype::Contiguous(1, Datatype::Byte()));
  std::vector<TypePtr> many(70000, one);
  std::vector<uint64_t> l2(many.size(), 1);
  std::vector<int64_t> d2(many.size(), 0);
  EXPECT_STATUS(Code::kInvalid, Datatype::Struct(l2, d2, many));
  std::string bomb = Wire({1, 12, 0xf0, 0xa2, 0x04});  // 70,000 blocks
  for (int i = 0; i < 70000; ++i) bomb += Wire({1, 0, 5, 1, 1});
  EXPECT_STATUS(Code::kInvalid, Decode(bomb));
}

TEST(DatatypeWireTest, RefusesOverflow) {
  const int64_t big = int64_t{1} << 40;
  // extent = (2^40 - 1) * 2^40 bytes.
  EXPECT_STATUS(Code::kInvalid, Datatype::Hvector(uint64_t(big), 1, big, Datatype::Byte()));
  // stride * extent(int64) = 2^62 * 8.
  EXPECT_STATUS(Code::kInvalid, Datatype::Vector(2, 1, int64_t{1} << 62, Datatype::Int64()));
  // count * blocklen overflows 64 bits.
  EXPECT_STATUS(Code::kInvalid,
                Datatype::Vector(uint64_t{1} << 40, uint64_t{1} << 40, 1, Datatype::Byte()));
  // size 2^62 bytes.
  EXPECT_STATUS(Code::kInvalid, Datatype::Contiguous(uint64_t{1} << 59, Datatype::Int64()));
  // The same through the wire: hvector count 2^40, blocklen 1, stride 2^40.
  std::string w = Wire({1, 7, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 1,  //
                        0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 1});
  EXPECT_STATUS(Code::kInvalid, Decode(w));
  // A cursor whose last offset would pass 2^60.
  TypePtr t = Ok(Datatype::Hvector(2, 1, big, Datatype::Byte()));
  EXPECT_STATUS(Code::kInvalid, TypeCursor::Make(t, 0, uint64_t{1} << 21));
  EXPECT_STATUS(Code::kInvalid, TypeCursor::Make(t, ~uint64_t{0} - 4, 1));
}

TEST(DatatypeWireTest, RefusesNegativeDisplacementsAndBadParameters) {
  const uint64_t lens[] = {1};
  const int64_t neg[] = {-1};
  EXPECT_STATUS(Code::kInvalid, Datatype::Hindexed(lens, neg, Datatype::Byte()));
  EXPECT_STATUS(Code::kInvalid, Datatype::Indexed(lens, neg, Datatype::Byte()));
  EXPECT_STATUS(Code::kInvalid, Datatype::Vector(2, 1, -1, Datatype::Byte()));
  EXPECT_STATUS(Code::kInvalid, Datatype::Hvector(2, 1, -8, Datatype::Byte()));
  EXPECT_STATUS(Code::kInvalid, Datatype::Resized(Datatype::Byte(), 0, -1));
  EXPECT_STATUS(Code::kInvalid, Datatype::Contiguous(1, nullptr));
  const uint64_t two[] = {1, 1};
  EXPECT_STATUS(Code::kInvalid, Datatype::Hindexed(two, neg, Datatype::Byte()));
  const uint64_t sizes[] = {4}, subsizes[] = {3}, starts[] = {2};
  EXPECT_STATUS(Code::kInvalid,
                Datatype::Subarray(sizes, subsizes, starts, ArrayOrder::kC, Datatype::Byte()));
  // hindexed, 1 entry, blocklen 1, displacement -1 (zigzag 1), byte.
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({1, 9, 1, 1, 1, 1})));
  // subarray with order 7.
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({1, 13, 1, 7, 4, 2, 0, 1})));
}

TEST(DatatypeWireTest, RefusesZeroSizeLoops) {
  TypePtr empty = Ok(Datatype::Contiguous(0, Datatype::Byte()));
  EXPECT_STATUS(Code::kInvalid, Datatype::Contiguous(uint64_t{1} << 20, empty));
  EXPECT_STATUS(Code::kInvalid, Datatype::Vector(1, 2, 0, empty));
  const uint64_t lens[] = {5};
  const int64_t disps[] = {0};
  EXPECT_STATUS(Code::kInvalid, Datatype::Hindexed(lens, disps, empty));
  // contiguous(2^40, contiguous(0, byte)) on the wire.
  EXPECT_STATUS(Code::kInvalid, Decode(Wire({1, 5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 5, 0, 1})));
  // One copy of nothing, or copies of an empty type with an extent, describe
  // something and are kept.
  ExpectBounds(Ok(Datatype::Contiguous(1, empty)), {0, 0, 0, 0, 0});
  TypePtr pad = Ok(Datatype::Resized(empty, 0, 8));
  ExpectBounds(Ok(Datatype::Contiguous(5, pad)), {0, 0, 40, 0, 0});
  EXPECT_EQ(Flatten(Ok(Datatype::Contiguous(5, pad)), 0, 1000), Pieces{});
}

}  // namespace
}  // namespace clf
