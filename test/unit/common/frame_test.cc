// The data channels' frame codec: a request's object (common/object_ref.h)
// in the header's flags, round trip and refusals.
#include "common/transport/frame.h"

#include <gtest/gtest.h>

#include "test/support/test_util.h"

namespace clf::transport::frame {
namespace {

TEST(FrameTest, ObjectRoundTripsBesideTheSyncFlag) {
  const Handle h = MakeHandle(3, 77);
  for (uint32_t r = 1; r <= kMaxReplicas; ++r) {
    for (uint32_t slot = 0; slot < r; ++slot) {
      ObjectRef o(h, slot, r);
      ObjectRef back;
      ASSERT_OK(GetObject(h, ObjectFlags(o) | kFlagSync, &back));
      EXPECT_EQ(back, o);
      for (uint32_t by = 0; by < r; ++by) {
        if (by == slot) continue;
        ObjectRef f = ObjectRef::Forwarded(h, slot, r, by);
        ASSERT_OK(GetObject(h, ObjectFlags(f), &back));
        EXPECT_EQ(back, f);
        EXPECT_TRUE(back.forwarded);
        EXPECT_EQ(back.orderer, by);
      }
    }
  }
  // An unreplicated file's object: no object bits, and flags 0 read as it.
  EXPECT_EQ(ObjectFlags(ObjectRef(h)) & ~(0xFu << 12), 0u);
  ObjectRef plain;
  ASSERT_OK(GetObject(h, 0, &plain));
  EXPECT_EQ(plain, ObjectRef(h));
}

TEST(FrameTest, RefusesObjectsOutOfRange) {
  ObjectRef o;
  EXPECT_STATUS(Code::kInvalid, GetObject(1, (4u << 12), &o));               // 4 replicas
  EXPECT_STATUS(Code::kInvalid, GetObject(1, (2u << 8) | (2u << 12), &o));   // slot 2 of 2
  EXPECT_STATUS(Code::kInvalid, GetObject(1, (1u << 8), &o));                // slot 1 of 1
  // A forwarded write ordered by itself, or by a slot past the replicas.
  EXPECT_STATUS(Code::kInvalid, GetObject(1, (1u << 8) | (2u << 12) | kFlagForwarded | (1u << 17), &o));
  EXPECT_STATUS(Code::kInvalid, GetObject(1, (2u << 12) | kFlagForwarded | (5u << 17), &o));
}

}  // namespace
}  // namespace clf::transport::frame
