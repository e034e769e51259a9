// POSIX permission rules of the metadata operations (permissions.h).
#include "server/ops/permissions.h"

#include <sys/stat.h>
#include <time.h>

namespace clf::server {

v1::Timespec Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  v1::Timespec t;
  t.set_sec(ts.tv_sec);
  t.set_nsec(static_cast<uint32_t>(ts.tv_nsec));
  return t;
}

bool InGroup(const v1::Caller& c, uint32_t gid) {
  if (c.gid() == gid) return true;
  for (uint32_t g : c.groups()) {
    if (g == gid) return true;
  }
  return false;
}

Status CheckAccess(const v1::Attr& a, const v1::Caller& c, uint32_t mask) {
  if (c.uid() == 0) {
    // root: everything except executing a file with no x bit at all.
    if ((mask & kX) && a.type() != v1::FT_DIRECTORY && (a.mode() & 0111) == 0) {
      return Permission("permission denied");
    }
    return Status::Ok();
  }
  uint32_t bits;
  if (c.uid() == a.uid()) {
    bits = (a.mode() >> 6) & 7;
  } else if (InGroup(c, a.gid())) {
    bits = (a.mode() >> 3) & 7;
  } else {
    bits = a.mode() & 7;
  }
  if ((bits & mask) != mask) return Permission("permission denied");
  return Status::Ok();
}

Status CheckSticky(const v1::Attr& dir, const v1::Attr& child, const v1::Caller& c) {
  if ((dir.mode() & S_ISVTX) == 0 || c.uid() == 0) return Status::Ok();
  if (c.uid() == dir.uid() || c.uid() == child.uid()) return Status::Ok();
  return Status(Code::kNotPermitted, "sticky directory");
}

}  // namespace clf::server
