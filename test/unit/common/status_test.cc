#include <cerrno>

#include "common/status.h"
#include "test/support/test_util.h"

namespace clf {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Invalid("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  CLF_ASSIGN_OR_RETURN(int h, Half(x));
  CLF_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, ErrnoTableIsExact) {
  EXPECT_EQ(ToErrno(NotFound("x")), ENOENT);
  EXPECT_EQ(ToErrno(Status(Code::kNotEmpty, "")), ENOTEMPTY);
  EXPECT_EQ(ToErrno(Status(Code::kExists, "")), EEXIST);
  EXPECT_EQ(ToErrno(Status(Code::kStale, "")), ESTALE);
  EXPECT_EQ(ToErrno(Status(Code::kNameTooLong, "")), ENAMETOOLONG);
  EXPECT_EQ(ToErrno(Unavailable("down")), EIO);
  EXPECT_EQ(ToErrno(Status()), 0);
}

TEST(StatusTest, FromErrnoRoundTrips) {
  for (int e : {ENOENT, EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, EINVAL, ENAMETOOLONG, EACCES, EPERM,
                ENOSPC, EFBIG, ENODATA, ERANGE, EXDEV, ELOOP, EOVERFLOW}) {
    EXPECT_EQ(ToErrno(FromErrno(e, "op")), e) << e;
  }
  EXPECT_NE(FromErrno(ENOENT, "open /x").message().find("open /x"), std::string::npos);
}

TEST(StatusTest, AssignOrReturnPropagates) {
  ASSERT_OK(Quarter(8));
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_STATUS(Code::kInvalid, Quarter(6));
  EXPECT_STATUS(Code::kInvalid, Quarter(3));
}

TEST(StatusTest, WithContextKeepsCode) {
  Status s = NotFound("entry").WithContext("lookup /a");
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "lookup /a: entry");
  EXPECT_TRUE(Status().WithContext("x").ok());
}

}  // namespace
}  // namespace clf
