#include "locking/strided_pattern.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "test/support/test_util.h"

namespace clf::locking {
namespace {

// Reference expansion, written independently of the generator: enumerate the
// raw blocks recursively with explicit spans, then sort and merge.
uint64_t RefSpan(const std::vector<StridedLevel>& lv, size_t k) {
  uint64_t inner = k + 1 == lv.size() ? 1 : RefSpan(lv, k + 1);
  return lv[k].offset + (lv[k].count - 1) * lv[k].stride + lv[k].block_length * inner;
}

void RefBlocks(const std::vector<StridedLevel>& lv, size_t k, uint64_t base,
               std::vector<Extent>* out) {
  const StridedLevel& l = lv[k];
  for (uint64_t i = 0; i < l.count; ++i) {
    uint64_t b = base + l.offset + i * l.stride;
    if (k + 1 == lv.size()) {
      out->push_back({b, l.block_length});
    } else {
      for (uint64_t j = 0; j < l.block_length; ++j)
        RefBlocks(lv, k + 1, b + j * RefSpan(lv, k + 1), out);
    }
  }
}

std::vector<Extent> RefExpand(const std::vector<StridedLevel>& lv) {
  std::vector<Extent> raw;
  RefBlocks(lv, 0, 0, &raw);
  std::sort(raw.begin(), raw.end(),
            [](const Extent& a, const Extent& b) { return a.offset < b.offset; });
  std::vector<Extent> out;
  for (const Extent& e : raw) {
    if (!out.empty() && e.offset <= out.back().offset + out.back().length) {
      uint64_t end = std::max(out.back().offset + out.back().length, e.offset + e.length);
      out.back().length = end - out.back().offset;
    } else {
      out.push_back(e);
    }
  }
  return out;
}

TEST(ExtentListTest, SortsAndCoalesces) {
  Result<ExtentList> l =
      ExtentList::FromExtents({{20, 5}, {0, 10}, {10, 5}, {22, 10}, {40, 0}, {50, 1}});
  ASSERT_OK(l);
  EXPECT_EQ(l->extents(), (std::vector<Extent>{{0, 15}, {20, 12}, {50, 1}}));
  EXPECT_EQ(l->Bounds(), (Extent{0, 51}));
  EXPECT_EQ(l->TotalBytes(), 28u);
  EXPECT_TRUE(l->OverlapsRange(14, 16));
  EXPECT_FALSE(l->OverlapsRange(15, 20));
  ASSERT_STATUS(Code::kInvalid, ExtentList::FromExtents({{kMaxOffset - 1, 5}}));
  ASSERT_OK(ExtentList::FromExtents({{100, kToEof}}));
}

TEST(StridedPatternTest, ThreeDimensionalSubarray) {
  // Block [10,20) x [30,40) x [50,60) of a 100^3 array of 4-byte ints.
  const uint64_t n = 100;
  Result<StridedPattern> p = StridedPattern::Make(
      {{(10 * n * n + 30 * n + 50) * 4, 1, n * n * 4, 10}, {0, 1, n * 4, 10}, {0, 40, 40, 1}});
  ASSERT_OK(p);
  EXPECT_EQ(p->RawBlocks(), 100u);
  EXPECT_TRUE(p->Monotone());
  Result<ExtentList> e = p->Expand(1000);
  ASSERT_OK(e);
  ASSERT_EQ(e->size(), 100u);
  EXPECT_EQ(e->extents()[0], (Extent{(10 * n * n + 30 * n + 50) * 4, 40}));
  EXPECT_EQ(e->extents()[1], (Extent{(10 * n * n + 31 * n + 50) * 4, 40}));
  EXPECT_EQ(e->extents()[10], (Extent{(11 * n * n + 30 * n + 50) * 4, 40}));
  EXPECT_EQ(p->Bounds().offset, e->Bounds().offset);
  EXPECT_EQ(p->Bounds().end(), e->Bounds().end());
  ASSERT_STATUS(Code::kTooBig, p->Expand(99));
}

TEST(StridedPatternTest, ContiguousLevelsCoalesce) {
  // Whole rows: the x extent equals the row, so each z plane is one extent.
  Result<StridedPattern> p = StridedPattern::Make({{0, 1, 1000, 3}, {0, 1, 40, 5}, {0, 40, 40, 1}});
  ASSERT_OK(p);
  Result<ExtentList> e = p->Expand(100);
  ASSERT_OK(e);
  EXPECT_EQ(e->extents(), (std::vector<Extent>{{0, 200}, {1000, 200}, {2000, 200}}));
  size_t calls = 0;
  p->ForEachExtent([&](const Extent&) {
    ++calls;
    return true;
  });
  EXPECT_EQ(calls, 3u);  // coalesced while generated
}

TEST(StridedPatternTest, RejectsBadInput) {
  ASSERT_STATUS(Code::kInvalid, StridedPattern::Make({}));
  ASSERT_STATUS(Code::kInvalid, StridedPattern::Make({{0, 0, 1, 1}}));
  ASSERT_STATUS(Code::kInvalid, StridedPattern::Make({{0, 1, 1, 0}}));
  ASSERT_STATUS(Code::kInvalid,
                StridedPattern::Make({{0, 1, uint64_t{1} << 40, uint64_t{1} << 30}}));
}

TEST(StridedPatternTest, NestedPatternsMatchReference) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    size_t depth = 1 + rng() % 4;
    std::vector<StridedLevel> lv(depth);
    for (size_t k = 0; k < depth; ++k) {
      lv[k].offset = rng() % 4 == 0 ? rng() % 50 : 0;
      lv[k].count = 1 + rng() % 4;
      lv[k].block_length = 1 + rng() % (k + 1 == depth ? 12 : 3);
      lv[k].stride = rng() % 60;
    }
    Result<StridedPattern> p = StridedPattern::Make(lv);
    ASSERT_OK(p);
    std::vector<Extent> want = RefExpand(lv);
    Result<ExtentList> got = p->Expand(1 << 20);
    ASSERT_OK(got);
    ASSERT_EQ(got->extents(), want) << "iteration " << iter;
    ASSERT_EQ(p->Bounds().offset, want.front().offset);
    ASSERT_LE(want.back().offset + want.back().length, p->Bounds().end());
    std::vector<Extent> raw;
    RefBlocks(lv, 0, 0, &raw);
    ASSERT_EQ(p->RawBlocks(), raw.size());
    if (p->Monotone()) {
      for (size_t i = 1; i < raw.size(); ++i) {
        ASSERT_GE(raw[i].offset, raw[i - 1].offset + raw[i - 1].length);
      }
    }
  }
}

}  // namespace
}  // namespace clf::locking
