#include "client/proto_convert.h"

namespace clf::client {

// The public selectors are the wire's SetAttrBit values (meta.proto).
namespace {
constexpr bool SameBit(SetAttrMask a, v1::SetAttrBit b) {
  return static_cast<uint32_t>(a) == static_cast<uint32_t>(b);
}
}  // namespace
static_assert(SameBit(kSetMode, v1::SETATTR_MODE) && SameBit(kSetUid, v1::SETATTR_UID) &&
              SameBit(kSetGid, v1::SETATTR_GID) && SameBit(kSetSize, v1::SETATTR_SIZE) &&
              SameBit(kSetAtime, v1::SETATTR_ATIME) && SameBit(kSetMtime, v1::SETATTR_MTIME) &&
              SameBit(kSetAtimeNow, v1::SETATTR_ATIME_NOW) &&
              SameBit(kSetMtimeNow, v1::SETATTR_MTIME_NOW) &&
              SameBit(kSetLayout, v1::SETATTR_LAYOUT) &&
              SameBit(kSetViaOpenFile, v1::SETATTR_VIA_OPEN_FILE) &&
              SameBit(kKillSuidGid, v1::SETATTR_KILL_SUIDGID) &&
              SameBit(kKillCaps, v1::SETATTR_KILL_CAPS) &&
              SameBit(kChownNothing, v1::SETATTR_CHOWN_NOTHING));

Timespec FromProto(const v1::Timespec& t) { return Timespec{t.sec(), t.nsec()}; }

v1::Timespec ToProto(const Timespec& t) {
  v1::Timespec p;
  p.set_sec(t.sec);
  p.set_nsec(t.nsec);
  return p;
}

Attr FromProto(const v1::Attr& a) {
  Attr o;
  o.handle = a.handle();
  o.type = static_cast<FileType>(a.type());
  o.mode = a.mode();
  o.uid = a.uid();
  o.gid = a.gid();
  o.size = a.size();
  o.nlink = a.nlink();
  o.atime = FromProto(a.atime());
  o.mtime = FromProto(a.mtime());
  o.ctime = FromProto(a.ctime());
  o.rdev = a.rdev();
  o.blocks = a.blocks();
  o.layout = FromProto(a.layout());
  o.has_xattrs = a.has_xattrs();
  o.writers = a.writers();
  o.stale_replicas.clear();
  for (const v1::ReplicaRef& r : a.stale_replicas()) o.stale_replicas.emplace_back(r.primary(), r.slot());
  return o;
}

void ToProto(const Caller& c, v1::Caller* p) {
  p->set_uid(c.uid);
  p->set_gid(c.gid);
  for (uint32_t g : c.groups) p->add_groups(g);
}

}  // namespace clf::client
