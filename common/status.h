// clf::Status and clf::Result<T>: the one error type of the project.
// Thread safety: values; copying and moving are safe, no shared state.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <cstdlib>

namespace clf {

// Our own code space. Each code maps to exactly one errno in ToErrno().
enum class Code : int {
  kOk = 0,
  kNotFound = 1,        // ENOENT
  kExists = 2,          // EEXIST
  kNotDir = 3,          // ENOTDIR
  kIsDir = 4,           // EISDIR
  kNotEmpty = 5,        // ENOTEMPTY
  kInvalid = 6,         // EINVAL
  kNameTooLong = 7,     // ENAMETOOLONG
  kPermission = 8,      // EACCES
  kNotPermitted = 9,    // EPERM
  kNoSpace = 10,        // ENOSPC
  kIo = 11,             // EIO
  kUnavailable = 12,    // EIO (a server is down or did not answer in time)
  kStale = 13,          // ESTALE
  kFileTooBig = 14,     // EFBIG
  kNoData = 15,         // ENODATA (missing xattr)
  kRange = 16,          // ERANGE (xattr buffer too small)
  kNotSupported = 17,   // EOPNOTSUPP
  kCrossDevice = 18,    // EXDEV
  kBusy = 19,           // EBUSY
  kDeadlock = 20,       // EDEADLK
  kWouldBlock = 21,     // EAGAIN
  kLoop = 22,           // ELOOP
  kTimedOut = 23,       // ETIMEDOUT
  kTooBig = 24,         // E2BIG (xattr value or message too large)
  kInternal = 25,       // EIO, a broken invariant reported, not aborted
  kUnauthenticated = 26,  // EACCES (wrong cluster secret)
  kCancelled = 27,      // EINTR
  kOverflow = 28,       // EOVERFLOW
  kTooManyLinks = 29,   // EMLINK
  kBadFd = 30,          // EBADF
  // EIO if it reaches an application: a copy of a replicated file's object
  // that may not serve this request (stale, or not the copy that orders
  // writes); the client tries the file's next copy.
  kNotCurrent = 31,
  kLastCode = kNotCurrent,
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Returns a copy with "context: " prepended to the message. Use once where an
  // error crosses a component boundary.
  Status WithContext(std::string_view context) const;

  // Dropping an error on purpose is spelled IgnoreError().
  void IgnoreError() const {}

  bool operator==(const Status& o) const { return code_ == o.code_ && message_ == o.message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

Status NotFound(std::string msg);
Status Exists(std::string msg);
Status Invalid(std::string msg);
Status IoError(std::string msg);
Status Unavailable(std::string msg);
Status Internal(std::string msg);
Status Permission(std::string msg);

// errno for a status; the single table of the project.
int ToErrno(const Status& s);
int ToErrno(Code c);
// A status from an errno (for syscall failures), with context.
Status FromErrno(int err, std::string_view context);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {            // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) std::abort();  // an ok Status carries no value
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  void IgnoreError() const {}

 private:
  std::variant<Status, T> v_;
};

}  // namespace clf

#define CLF_CONCAT_INNER_(a, b) a##b
#define CLF_CONCAT_(a, b) CLF_CONCAT_INNER_(a, b)

#define CLF_RETURN_IF_ERROR(expr)               \
  do {                                          \
    ::clf::Status clf_status_ = (expr);         \
    if (!clf_status_.ok()) return clf_status_;  \
  } while (0)

#define CLF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#define CLF_ASSIGN_OR_RETURN(lhs, expr) \
  CLF_ASSIGN_OR_RETURN_IMPL_(CLF_CONCAT_(clf_result_, __LINE__), lhs, expr)

// A broken invariant: log and abort. Never for bad input.
#define CLF_CHECK(cond)                                                          \
  do {                                                                           \
    if (!(cond)) ::clf::internal::CheckFailed(__FILE__, __LINE__, #cond);        \
  } while (0)

namespace clf::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}
