// POSIX permission rules of the metadata operations (permissions.h).
#include "server/ops/permissions.h"

#include <sys/stat.h>
#include <time.h>

#include "common/posix_access.h"

namespace clf::server {

v1::Timespec Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  v1::Timespec t;
  t.set_sec(ts.tv_sec);
  t.set_nsec(static_cast<uint32_t>(ts.tv_nsec));
  return t;
}

bool InGroup(const v1::Caller& c, uint32_t gid) { return InGroups(gid, c.gid(), c.groups()); }

Status CheckAccess(const v1::Attr& a, const v1::Caller& c, uint32_t mask) {
  if (!MayAccess(a.mode(), a.uid(), a.gid(), a.type() == v1::FT_DIRECTORY, c.uid(), c.gid(),
                 c.groups(), mask)) {
    return Permission("permission denied");
  }
  return Status::Ok();
}

Status CheckSticky(const v1::Attr& dir, const v1::Attr& child, const v1::Caller& c) {
  if ((dir.mode() & S_ISVTX) == 0 || c.uid() == 0) return Status::Ok();
  if (c.uid() == dir.uid() || c.uid() == child.uid()) return Status::Ok();
  return Status(Code::kNotPermitted, "sticky directory");
}

}  // namespace clf::server
