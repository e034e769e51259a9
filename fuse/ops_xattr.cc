// Extended attribute handlers with the kernel's size-probe protocol: a
// request with size 0 asks for the length (fuse_reply_xattr), a buffer too
// small for the value is ERANGE.
//
// The kernel asks for "security.capability" before every write(2) (to strip
// file capabilities); a miss is remembered per inode for attr_timeout so
// writes do not pay an RPC each. setxattr/removexattr of it through this
// mount clear the memory.
#include <sys/xattr.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "fuse/ops_util.h"

namespace clf::fuse::ops {

namespace {

constexpr std::string_view kCapability = "security.capability";

// POSIX ACLs (FUSE_CAP_POSIX_ACL is off: the kernel would not enforce them)
// and SELinux labels are not supported. Answering EOPNOTSUPP here, without an
// RPC, also lets `ls -l` stop asking: coreutils remembers ENOTSUP per device
// instead of making two getxattr calls per file.
bool Unsupported(std::string_view name) {
  return name == "system.posix_acl_access" || name == "system.posix_acl_default" ||
         name == "security.selinux";
}

void ReplySized(fuse_req_t req, size_t size, const std::string& value) {
  if (size == 0) return (void)fuse_reply_xattr(req, value.size());
  if (value.size() > size) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value.data(), value.size());
}

}  // namespace

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Mount& m = MountOf(req);
  if (Unsupported(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  const bool capability = name == kCapability;
  // A user.* name needs read permission before "no such attribute": answered
  // here only when the mount can check it (the server checks its own).
  bool may_answer = true;
  if (std::string_view(name).rfind("user.", 0) == 0 && !m.options().kernel_permissions) {
    std::optional<client::Attr> a = CheckableAttr(m, ino);
    may_answer = a && Allowed(m, CallerOf(req), *a, kMayRead);
  }
  if (may_answer && ((capability && m.inodes().CapabilityKnownAbsent(ino)) ||
                     m.inodes().NoXattrsKnown(ino, AttrTtl(m)))) {
    return (void)fuse_reply_err(req, ENODATA);
  }
  if (std::string n(name); m.ns().After({ino}, [req, ino, n, size] {
        GetXattr(req, ino, n.c_str(), size);
      })) {
    return;
  }
  CLF_LOG_DEBUG("getxattr {:#x} {} size {}", ino, name, size);
  m.client().GetXattr(
      ino, name, CallerOf(req),
      Completion<std::string>(m, req, [req, &m, ino, size, capability](Result<std::string> r) {
        if (!r.ok()) {
          if (capability && r.status().code() == Code::kNoData) {
            m.inodes().SetCapabilityAbsent(ino, CapabilityHorizon(m));
          }
          return ReplyStatus(req, r.status(), "getxattr");
        }
        ReplySized(req, size, *r);
      }));
}

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags) {
  Mount& m = MountOf(req);
  if ((flags & ~(XATTR_CREATE | XATTR_REPLACE)) != 0) return (void)fuse_reply_err(req, EINVAL);
  if (Unsupported(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  if (std::string n(name), v(value, size); m.ns().After({ino}, [req, ino, n, v, flags] {
        SetXattr(req, ino, n.c_str(), v.data(), v.size(), flags);
      })) {
    return;
  }
  m.ns().Forget(ino);
  uint32_t cflags = 0;
  if (flags & XATTR_CREATE) cflags |= 1;
  if (flags & XATTR_REPLACE) cflags |= 2;
  if (name == kCapability) m.inodes().ClearCapabilityAbsent(ino);
  m.inodes().NoteXattrSet(ino);
  CLF_LOG_DEBUG("setxattr {:#x} {} size {}", ino, name, size);
  m.client().SetXattr(ino, name, std::string(value, size), cflags, CallerOf(req),
                      StatusCompletion(m, req, [req](Status s) {
                        if (!s.ok()) return ReplyStatus(req, s, "setxattr");
                        fuse_reply_err(req, 0);
                      }));
}

void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("listxattr {:#x} size {}", ino, size);
  if (m.inodes().NoXattrsKnown(ino, AttrTtl(m))) return ReplySized(req, size, std::string());
  if (m.ns().After({ino}, [req, ino, size] { ListXattr(req, ino, size); })) return;
  m.client().ListXattr(
      ino, CallerOf(req),
      Completion<std::vector<std::string>>(m, req, [req, size](Result<std::vector<std::string>> r) {
        if (!r.ok()) return ReplyStatus(req, r.status(), "listxattr");
        std::string names;
        for (const std::string& n : *r) {
          names += n;
          names.push_back('\0');
        }
        ReplySized(req, size, names);
      }));
}

void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  Mount& m = MountOf(req);
  if (Unsupported(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  if (std::string n(name); m.ns().After({ino}, [req, ino, n] { RemoveXattr(req, ino, n.c_str()); })) {
    return;
  }
  m.ns().Forget(ino);
  if (name == kCapability) m.inodes().ClearCapabilityAbsent(ino);
  CLF_LOG_DEBUG("removexattr {:#x} {}", ino, name);
  const client::Caller caller = CallerOf(req);
  const bool capability = name == kCapability;
  m.client().RemoveXattr(
      ino, name, caller, StatusCompletion(m, req, [req, &m, ino, caller, capability](Status s) {
        // The kernel asks for a file capability's removal only for a caller
        // with CAP_SETFCAP or to clear it after a write or truncate: the
        // latter, by a writer the servers refuse it to, is a kill (kKillCaps,
        // which any writer may ask).
        if (capability && s.code() == Code::kNotPermitted) {
          client::SetAttrArgs a;
          a.valid = client::kKillCaps;
          return m.client().SetAttr(
              ino, a, caller, Completion<client::Attr>(m, req, [req](Result<client::Attr> r) {
                if (!r.ok()) return ReplyStatus(req, r.status(), "removexattr");
                fuse_reply_err(req, 0);
              }));
        }
        if (!s.ok()) return ReplyStatus(req, s, "removexattr");
        fuse_reply_err(req, 0);
      }));
}

}  // namespace clf::fuse::ops
