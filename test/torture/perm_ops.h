// The multi-user permission differential: seeded sequences of namespace and
// permission calls (mkdir, chmod, chown, rename, link, unlink, open, truncate,
// utimens, mkfifo, sticky and setgid bits...) made as root and as two
// unprivileged users (setresuid/setresgid/setgroups around each call), on a
// directory of the mount and on the same directory of a local file system;
// every outcome and, after each step, every name's stat fields compared.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "test/torture/outcome.h"

namespace clf::torture {

struct User {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

struct PermRunOptions {
  uint64_t seed = 1;
  uint64_t ops = 1000;
  // Users 1 and 2 (root is user 0): uids, their own gids, and a group both are in.
  uid_t uid1 = 61001, uid2 = 61002;
  gid_t gid1 = 61001, gid2 = 61002, shared_gid = 61010;
  bool verbose = false;
  int shrink_seconds = 120;  // time to look for the shortest failing sequence
  // Out: calls that succeeded and that were refused (EACCES, EPERM) on both
  // sides, over every seed run with these options (a run where nothing
  // succeeds or nothing is refused tests little).
  uint64_t* succeeded = nullptr;
  uint64_t* refused = nullptr;
};

enum class PermOpKind {
  kMkdir,
  kRmdir,
  kCreate,
  kOpen,
  kUnlink,
  kRename,
  kLink,
  kSymlink,
  kChmod,
  kChown,
  kTruncate,
  kUtimens,
  kMkfifo,
  kAccess,
  kStat,
  kList,
  kSetXattr,
};

struct PermOp {
  PermOpKind kind = PermOpKind::kStat;
  int user = 0;  // 0 root, 1, 2
  int path = 0;  // index into the name pool
  int path2 = 0;
  int flags = 0;
  uint32_t mode = 0;
  int64_t uid = -1, gid = -1;  // chown; -1 keeps
  uint64_t size = 0;           // truncate size; times
};

std::string Describe(const PermOp& op);

// Generates options.ops operations from options.seed and runs them as the
// three users below `a_root` (the mount) and `b_root` (local); on a mismatch,
// prints the seed, the step and the shortest failing sequence it can find, and
// returns false. Must run as root.
bool PermDifferential(const std::string& a_root, const std::string& b_root,
                      const PermRunOptions& options);

}  // namespace clf::torture
