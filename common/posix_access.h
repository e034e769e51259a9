// POSIX permission bits, one rule for the servers (server/ops/permissions.h,
// which check every request) and the mount (fuse/ops_util.h), which checks
// what it answers itself when it runs without the kernel's
// default_permissions.
#pragma once

#include <cstdint>

namespace clf {

// Access bits of a permission mask (as in access(2): R_OK, W_OK, X_OK).
inline constexpr uint32_t kMayRead = 4, kMayWrite = 2, kMayExec = 1;

// `gid` is the caller's primary group or one of `groups` (any range of ids).
template <typename Groups>
bool InGroups(uint32_t gid, uint32_t primary, const Groups& groups) {
  if (primary == gid) return true;
  for (auto g : groups) {
    if (static_cast<uint32_t>(g) == gid) return true;
  }
  return false;
}

// Whether a caller (uid, primary gid, supplementary groups) may access a file
// of `mode` (permission bits) owned by owner:group with `mask`: the owner's,
// else the group's, else the others' bits. Root may do anything except
// execute a non-directory that has no x bit at all.
template <typename Groups>
bool MayAccess(uint32_t mode, uint32_t owner, uint32_t group, bool is_dir, uint32_t uid,
               uint32_t gid, const Groups& groups, uint32_t mask) {
  mask &= 7;
  if (uid == 0) return (mask & kMayExec) == 0 || is_dir || (mode & 0111) != 0;
  uint32_t bits;
  if (uid == owner) {
    bits = (mode >> 6) & 7;
  } else if (InGroups(group, gid, groups)) {
    bits = (mode >> 3) & 7;
  } else {
    bits = mode & 7;
  }
  return (bits & mask) == mask;
}

// The permission bits left once a write, truncate or chown of a caller
// without CAP_FSETID cleared the privilege bits (the kernel's
// file_remove_privs and setattr_should_drop_sgid): setuid always; setgid
// when the file is group-executable, or when the caller is neither root nor
// in the file's group. One rule for the servers (MetaOps::SetAttr) and the
// mount (the setattrs it answers itself, AsyncNs).
inline uint32_t ModeAfterKillPriv(uint32_t mode, bool caller_root, bool caller_in_group) {
  constexpr uint32_t kSetuid = 04000, kSetgid = 02000, kGroupExec = 010;
  mode &= ~kSetuid;
  if ((mode & kSetgid) != 0 && ((mode & kGroupExec) != 0 || (!caller_root && !caller_in_group))) {
    mode &= ~kSetgid;
  }
  return mode;
}

}  // namespace clf
