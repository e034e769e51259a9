// LockOps (the Lock service's logic, no gRPC) directly: the request limits
// the integration suite checks over raw gRPC, here with small limits so a
// test needs no 12 MiB request (the TSan run skips that one).
#include "server/ops/lock_ops.h"

#include <gtest/gtest.h>

#include "common/handle.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

class LockOpsLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LockOpsOptions o;
    o.max_extents = 4;
    ops_ = std::make_unique<LockOps>(0, o);
    v1::OpenSessionRequest r;
    r.set_client_name("unit");
    Result<v1::OpenSessionReply> s = ops_->OpenSession(r, "test");
    ASSERT_OK(s);
    session_ = s->session();
  }
  Result<uint64_t> AcquireList(int extents) {
    v1::AcquireRequest r;
    *r.mutable_session() = session_;
    r.set_handle(MakeHandle(0, 42));
    r.set_kind(v1::LOCK_LIST);
    r.set_mode(v1::LOCK_EXCLUSIVE);
    for (int i = 0; i < extents; ++i) {
      v1::LockExtent* e = r.add_extents();
      e->set_offset(uint64_t(i) * 10);
      e->set_length(1);
    }
    Result<uint64_t> got = Unavailable("no answer");
    ops_->Acquire(r, [&](Result<uint64_t> id) { got = std::move(id); });
    return got;
  }
  std::unique_ptr<LockOps> ops_;
  v1::SessionRef session_;
};

TEST_F(LockOpsLimitTest, ListPastMaxExtentsIsTooBig) {
  Result<uint64_t> over = AcquireList(5);
  EXPECT_EQ(over.status().code(), Code::kTooBig) << over.status().ToString();
  EXPECT_NE(over.status().message().find("at most 4"), std::string::npos);
  // At the limit it is granted, and nothing of the refused one is held.
  EXPECT_OK(AcquireList(4));
  EXPECT_EQ(AcquireList(0).status().code(), Code::kInvalid);
}

}  // namespace
}  // namespace clf::server
