#include "test/torture/perm_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>

#include "test/torture/shrink.h"

namespace clf::torture {
namespace {

// The names a sequence plays with: three at the top, some one and two levels down.
const char* const kPool[] = {"a", "b", "c", "a/x", "a/y", "b/x", "b/y", "a/x/z", "c/w"};
constexpr int kPoolSize = sizeof(kPool) / sizeof(kPool[0]);

const char* KindName(PermOpKind k) {
  static const char* const kNames[] = {"mkdir", "rmdir",    "create", "open",    "unlink",
                                       "rename", "link",    "symlink", "chmod",  "chown",
                                       "truncate", "utimens", "mkfifo", "access", "stat",
                                       "list",  "setxattr"};
  return kNames[static_cast<int>(k)];
}

// Switches the effective ids to `u` (root: back to 0 and no groups). The
// real and saved uid stay 0, so the way back is always open.
bool Become(const User& u) {
  if (::setresuid(-1, 0, -1) != 0 || ::setresgid(-1, 0, -1) != 0) return false;
  if (u.uid == 0) return ::setgroups(0, nullptr) == 0;
  return ::setgroups(u.groups.size(), u.groups.data()) == 0 && ::setresgid(-1, u.gid, -1) == 0 &&
         ::setresuid(-1, u.uid, -1) == 0;
}

std::string StatLine(const std::string& p) {
  struct stat st;
  if (::lstat(p.c_str(), &st) != 0) return std::strerror(errno);
  std::ostringstream os;
  os << "type=" << (st.st_mode & S_IFMT) << " mode=" << std::oct << (st.st_mode & 07777)
     << std::dec << " uid=" << st.st_uid << " gid=" << st.st_gid;
  // Directory sizes and link counts are the file system's own.
  if (!S_ISDIR(st.st_mode)) os << " size=" << st.st_size << " nlink=" << st.st_nlink;
  return os.str();
}

Outcome Open(const std::string& p, int flags, uint32_t mode) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) return Sys(-1);
  Outcome o;
  // A write through a writable open (clears setuid/setgid as it must).
  if ((flags & O_ACCMODE) != O_RDONLY) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) o = Sys(::write(fd, "w", 1));
  }
  if (::close(fd) != 0 && o.err == 0) o = Sys(-1);
  return o;
}

Outcome List(const std::string& p) {
  DIR* d = ::opendir(p.c_str());
  if (d == nullptr) return Sys(-1);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  Outcome o;
  for (const auto& n : names) o.info += n + ",";
  return o;
}

Outcome Utimens(const std::string& p, uint64_t how) {
  struct timespec ts[2];
  switch (how % 3) {
    case 0:
      return Sys(::utimensat(AT_FDCWD, p.c_str(), nullptr, 0));
    case 1:
      ts[0] = {UTIME_NOW, UTIME_NOW};
      ts[1] = {0, UTIME_OMIT};
      return Sys(::utimensat(AT_FDCWD, p.c_str(), ts, 0));
    default: {
      ts[0] = {static_cast<time_t>(how % 1000000), 0};
      ts[1] = {static_cast<time_t>(how % 999999), 5};
      Outcome o = Sys(::utimensat(AT_FDCWD, p.c_str(), ts, 0));
      struct stat st;
      if (o.err == 0 && ::stat(p.c_str(), &st) == 0) {
        o.info = std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
      }
      return o;
    }
  }
}

Outcome Apply(const PermOp& op, const std::string& root) {
  const std::string p = root + "/" + kPool[op.path];
  const std::string q = root + "/" + kPool[op.path2];
  switch (op.kind) {
    case PermOpKind::kMkdir: return Sys(::mkdir(p.c_str(), op.mode));
    case PermOpKind::kRmdir: return Sys(::rmdir(p.c_str()));
    case PermOpKind::kCreate: return Open(p, op.flags | O_CREAT, op.mode);
    case PermOpKind::kOpen: return Open(p, op.flags, 0);
    case PermOpKind::kUnlink: return Sys(::unlink(p.c_str()));
    case PermOpKind::kRename: return Sys(::rename(p.c_str(), q.c_str()));
    case PermOpKind::kLink: return Sys(::link(p.c_str(), q.c_str()));
    case PermOpKind::kSymlink: return Sys(::symlink("x", p.c_str()));
    case PermOpKind::kChmod: return Sys(::chmod(p.c_str(), op.mode));
    case PermOpKind::kChown:
      return Sys(::lchown(p.c_str(), static_cast<uid_t>(op.uid), static_cast<gid_t>(op.gid)));
    case PermOpKind::kTruncate: return Sys(::truncate(p.c_str(), static_cast<off_t>(op.size)));
    case PermOpKind::kUtimens: return Utimens(p, op.size);
    case PermOpKind::kMkfifo: return Sys(::mkfifo(p.c_str(), op.mode));
    case PermOpKind::kAccess: return Sys(::access(p.c_str(), op.flags));
    case PermOpKind::kStat: return Outcome{0, 0, StatLine(p)};
    case PermOpKind::kList: return List(p);
    case PermOpKind::kSetXattr: return Sys(::setxattr(p.c_str(), "user.k", "v", 1, 0));
  }
  return Outcome{-1, EINVAL, "unknown op"};
}

// Every name's stat fields, as root.
std::string Tree(const std::string& root) {
  std::string out;
  for (const char* n : kPool) out += std::string(n) + ": " + StatLine(root + "/" + n) + "\n";
  return out;
}

PermOp Draw(Rng& rng, const PermRunOptions& o) {
  static const uint32_t kDirModes[] = {0755, 0700, 0777, 01777, 0711, 0750, 0770, 02775, 01770, 0555};
  static const uint32_t kFileModes[] = {0644, 0600, 0666, 0640, 0700, 0755, 04755, 02755, 06777, 0460, 0404};
  static const int kOpenFlags[] = {O_RDONLY, O_WRONLY, O_RDWR, O_RDONLY | O_TRUNC, O_WRONLY | O_TRUNC};
  static const int kCreateFlags[] = {O_WRONLY, O_RDWR | O_EXCL, O_WRONLY | O_TRUNC, O_RDONLY};
  static const int kAccess[] = {F_OK, R_OK, W_OK, X_OK, R_OK | W_OK};
  static const PermOpKind kKinds[] = {
      PermOpKind::kMkdir, PermOpKind::kMkdir, PermOpKind::kMkdir, PermOpKind::kRmdir,
      PermOpKind::kCreate, PermOpKind::kCreate, PermOpKind::kCreate, PermOpKind::kOpen,
      PermOpKind::kOpen, PermOpKind::kOpen, PermOpKind::kUnlink, PermOpKind::kRename,
      PermOpKind::kRename, PermOpKind::kLink, PermOpKind::kSymlink, PermOpKind::kChmod,
      PermOpKind::kChmod, PermOpKind::kChmod, PermOpKind::kChown, PermOpKind::kChown,
      PermOpKind::kTruncate, PermOpKind::kUtimens, PermOpKind::kMkfifo, PermOpKind::kAccess,
      PermOpKind::kAccess, PermOpKind::kStat, PermOpKind::kList, PermOpKind::kSetXattr};
  PermOp op;
  op.kind = rng.Pick(kKinds);
  op.user = static_cast<int>(rng.In(0, 2));
  op.path = static_cast<int>(rng.In(0, kPoolSize - 1));
  op.path2 = static_cast<int>(rng.In(0, kPoolSize - 1));
  const bool dir_mode = op.kind == PermOpKind::kMkdir || (op.kind == PermOpKind::kChmod && rng.Chance(50));
  op.mode = dir_mode ? rng.Pick(kDirModes) : rng.Pick(kFileModes);
  op.flags = op.kind == PermOpKind::kCreate ? rng.Pick(kCreateFlags)
             : op.kind == PermOpKind::kAccess ? rng.Pick(kAccess)
                                              : rng.Pick(kOpenFlags);
  const int64_t uids[] = {-1, 0, o.uid1, o.uid2};
  const int64_t gids[] = {-1, 0, o.gid1, o.gid2, o.shared_gid};
  op.uid = rng.Pick(uids);
  op.gid = rng.Pick(gids);
  op.size = rng.In(0, 3000000);
  return op;
}

struct Divergence {
  uint64_t step;
  std::string what;
};

// Runs `ops` in fresh directories `a` and `b`; the first divergence.
std::optional<Divergence> Run(const std::vector<PermOp>& ops, const std::string& a,
                              const std::string& b, const User users[3], bool verbose,
                              uint64_t* succeeded = nullptr, uint64_t* refused = nullptr) {
  for (const std::string& d : {a, b}) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
    if (::mkdir(d.c_str(), 0777) != 0 || ::chmod(d.c_str(), 0777) != 0) {
      return Divergence{0, "mkdir " + d + ": " + std::strerror(errno)};
    }
  }
  for (uint64_t i = 0; i < ops.size(); ++i) {
    const PermOp& op = ops[i];
    if (verbose) std::fprintf(stderr, "step %lu: %s\n", static_cast<unsigned long>(i), Describe(op).c_str());
    if (!Become(users[op.user])) return Divergence{i, "cannot switch to user " + std::to_string(op.user)};
    const Outcome ra = Apply(op, a);
    const Outcome rb = Apply(op, b);
    if (!Become(users[0])) return Divergence{i, "cannot switch back to root"};
    if (!(ra == rb)) {
      return Divergence{i, Describe(op) + ": mount " + Describe(ra) + ", local " + Describe(rb)};
    }
    if (succeeded != nullptr && rb.err == 0 && op.kind != PermOpKind::kStat) ++*succeeded;
    if (refused != nullptr && (rb.err == EACCES || rb.err == EPERM)) ++*refused;
    const std::string ta = Tree(a), tb = Tree(b);
    if (ta != tb) {
      return Divergence{i, "names after " + Describe(op) + ":\n  mount:\n" + ta + "  local:\n" + tb};
    }
  }
  return std::nullopt;
}

void RemoveAsRoot(const std::string& d) {
  std::error_code ec;
  std::filesystem::remove_all(d, ec);
}

}  // namespace

std::string Describe(const PermOp& op) {
  std::ostringstream os;
  os << "user" << op.user << " " << KindName(op.kind) << " " << kPool[op.path];
  switch (op.kind) {
    case PermOpKind::kRename: case PermOpKind::kLink: os << " -> " << kPool[op.path2]; break;
    case PermOpKind::kMkdir: case PermOpKind::kChmod: case PermOpKind::kMkfifo:
      os << " mode=0" << std::oct << op.mode << std::dec; break;
    case PermOpKind::kCreate:
      os << " flags=0" << std::oct << op.flags << " mode=0" << op.mode << std::dec; break;
    case PermOpKind::kOpen: case PermOpKind::kAccess: os << " flags=0" << std::oct << op.flags << std::dec; break;
    case PermOpKind::kChown: os << " uid=" << op.uid << " gid=" << op.gid; break;
    case PermOpKind::kTruncate: os << " size=" << op.size; break;
    case PermOpKind::kUtimens: os << " how=" << op.size % 3 << " t=" << op.size; break;
    default: break;
  }
  return os.str();
}

bool PermDifferential(const std::string& a_root, const std::string& b_root,
                      const PermRunOptions& o) {
  const User users[3] = {User{0, 0, {}}, User{o.uid1, o.gid1, {o.gid1, o.shared_gid}},
                         User{o.uid2, o.gid2, {o.gid2, o.shared_gid}}};
  Rng rng(o.seed);
  std::vector<PermOp> ops;
  for (uint64_t i = 0; i < o.ops; ++i) ops.push_back(Draw(rng, o));
  const mode_t old_umask = ::umask(022);
  const std::string sub = "/perm-" + std::to_string(o.seed);
  std::optional<Divergence> bad =
      Run(ops, a_root + sub, b_root + sub, users, o.verbose, o.succeeded, o.refused);
  if (!bad) {
    RemoveAsRoot(a_root + sub);
    RemoveAsRoot(b_root + sub);
    ::umask(old_umask);
    return true;
  }
  std::printf("seed %lu: mismatch at step %lu: %s\n", static_cast<unsigned long>(o.seed),
              static_cast<unsigned long>(bad->step), bad->what.c_str());
  std::vector<PermOp> prefix(ops.begin(), ops.begin() + static_cast<long>(bad->step + 1));
  std::function<bool(const std::vector<PermOp>&, int)> fails = [&](const std::vector<PermOp>& t,
                                                                   int trial) {
    const std::string s = sub + "-shrink" + std::to_string(trial);
    // The same failure: the original failing step, failing as the last one.
    std::optional<Divergence> d = Run(t, a_root + s, b_root + s, users, false);
    const bool again = d && d->step + 1 == t.size() && !t.empty() &&
                       Describe(t.back()) == Describe(ops[bad->step]);
    RemoveAsRoot(a_root + s);
    RemoveAsRoot(b_root + s);
    return again;
  };
  std::vector<PermOp> shortest = Shrink(prefix, fails, o.shrink_seconds);
  std::printf("seed %lu: shortest failing sequence found (%zu of %zu steps):\n",
              static_cast<unsigned long>(o.seed), shortest.size(), prefix.size());
  for (const PermOp& op : shortest) std::printf("  %s\n", Describe(op).c_str());
  std::printf("replay: clf_torture perm MOUNT_DIR LOCAL_DIR --seed %lu --ops %lu\n",
              static_cast<unsigned long>(o.seed), static_cast<unsigned long>(bad->step + 1));
  std::fflush(stdout);
  ::umask(old_umask);
  return false;
}

}  // namespace clf::torture
