#include "common/status.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace clf {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "NotFound";
    case Code::kExists: return "Exists";
    case Code::kNotDir: return "NotDir";
    case Code::kIsDir: return "IsDir";
    case Code::kNotEmpty: return "NotEmpty";
    case Code::kInvalid: return "Invalid";
    case Code::kNameTooLong: return "NameTooLong";
    case Code::kPermission: return "Permission";
    case Code::kNotPermitted: return "NotPermitted";
    case Code::kNoSpace: return "NoSpace";
    case Code::kIo: return "Io";
    case Code::kUnavailable: return "Unavailable";
    case Code::kStale: return "Stale";
    case Code::kFileTooBig: return "FileTooBig";
    case Code::kNoData: return "NoData";
    case Code::kRange: return "Range";
    case Code::kNotSupported: return "NotSupported";
    case Code::kCrossDevice: return "CrossDevice";
    case Code::kBusy: return "Busy";
    case Code::kDeadlock: return "Deadlock";
    case Code::kWouldBlock: return "WouldBlock";
    case Code::kLoop: return "Loop";
    case Code::kTimedOut: return "TimedOut";
    case Code::kTooBig: return "TooBig";
    case Code::kInternal: return "Internal";
    case Code::kUnauthenticated: return "Unauthenticated";
    case Code::kCancelled: return "Cancelled";
    case Code::kOverflow: return "Overflow";
    case Code::kTooManyLinks: return "TooManyLinks";
    case Code::kBadFd: return "BadFd";
    case Code::kNotCurrent: return "NotCurrent";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code_));
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
Status Exists(std::string msg) { return Status(Code::kExists, std::move(msg)); }
Status Invalid(std::string msg) { return Status(Code::kInvalid, std::move(msg)); }
Status IoError(std::string msg) { return Status(Code::kIo, std::move(msg)); }
Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
Status Permission(std::string msg) { return Status(Code::kPermission, std::move(msg)); }

int ToErrno(Code c) {
  switch (c) {
    case Code::kOk: return 0;
    case Code::kNotFound: return ENOENT;
    case Code::kExists: return EEXIST;
    case Code::kNotDir: return ENOTDIR;
    case Code::kIsDir: return EISDIR;
    case Code::kNotEmpty: return ENOTEMPTY;
    case Code::kInvalid: return EINVAL;
    case Code::kNameTooLong: return ENAMETOOLONG;
    case Code::kPermission: return EACCES;
    case Code::kNotPermitted: return EPERM;
    case Code::kNoSpace: return ENOSPC;
    case Code::kIo: return EIO;
    case Code::kUnavailable: return EIO;
    case Code::kStale: return ESTALE;
    case Code::kFileTooBig: return EFBIG;
    case Code::kNoData: return ENODATA;
    case Code::kRange: return ERANGE;
    case Code::kNotSupported: return EOPNOTSUPP;
    case Code::kCrossDevice: return EXDEV;
    case Code::kBusy: return EBUSY;
    case Code::kDeadlock: return EDEADLK;
    case Code::kWouldBlock: return EAGAIN;
    case Code::kLoop: return ELOOP;
    case Code::kTimedOut: return ETIMEDOUT;
    case Code::kTooBig: return E2BIG;
    case Code::kInternal: return EIO;
    case Code::kUnauthenticated: return EACCES;
    case Code::kCancelled: return EINTR;
    case Code::kOverflow: return EOVERFLOW;
    case Code::kTooManyLinks: return EMLINK;
    case Code::kBadFd: return EBADF;
    case Code::kNotCurrent: return EIO;
  }
  return EIO;
}

int ToErrno(const Status& s) { return ToErrno(s.code()); }

Status FromErrno(int err, std::string_view context) {
  Code c;
  switch (err) {
    case ENOENT: c = Code::kNotFound; break;
    case EEXIST: c = Code::kExists; break;
    case ENOTDIR: c = Code::kNotDir; break;
    case EISDIR: c = Code::kIsDir; break;
    case ENOTEMPTY: c = Code::kNotEmpty; break;
    case EINVAL: c = Code::kInvalid; break;
    case ENAMETOOLONG: c = Code::kNameTooLong; break;
    case EACCES: c = Code::kPermission; break;
    case EPERM: c = Code::kNotPermitted; break;
    case ENOSPC: case EDQUOT: c = Code::kNoSpace; break;
    case EFBIG: c = Code::kFileTooBig; break;
    case ENODATA: c = Code::kNoData; break;
    case ERANGE: c = Code::kRange; break;
    case EOPNOTSUPP: c = Code::kNotSupported; break;
    case EXDEV: c = Code::kCrossDevice; break;
    case EBUSY: c = Code::kBusy; break;
    case EDEADLK: c = Code::kDeadlock; break;
    case EAGAIN: c = Code::kWouldBlock; break;
    case ELOOP: c = Code::kLoop; break;
    case ETIMEDOUT: c = Code::kTimedOut; break;
    case E2BIG: c = Code::kTooBig; break;
    case EINTR: c = Code::kCancelled; break;
    case EOVERFLOW: c = Code::kOverflow; break;
    case EMLINK: c = Code::kTooManyLinks; break;
    case EBADF: c = Code::kBadFd; break;
    default: c = Code::kIo; break;
  }
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  return Status(c, std::move(msg));
}

namespace internal {
void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "CLF_CHECK failed at %s:%d: %s\n", file, line, cond);
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace clf
