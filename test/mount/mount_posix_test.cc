// POSIX semantics through the mount, compared call by call with the same calls
// on a local directory: a "posix script" runs against two roots and every
// step's result, errno and observed state (stat fields, contents, names) must
// agree. Also the unprivileged user (runuser -u nobody) against both.
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

struct Outcome {
  long rc = 0;
  int err = 0;
  std::string info;
  bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  os << "{rc=" << o.rc << " errno=" << o.err;
  if (o.err != 0) os << " (" << std::strerror(o.err) << ")";
  if (!o.info.empty()) {
    std::string shown = o.info.size() > 200 ? o.info.substr(0, 200) + "..." : o.info;
    os << " info=\"" << shown << "\"";
  }
  return os << "}";
}

Outcome Sys(long rc) {
  Outcome o;
  o.rc = rc < 0 ? -1 : rc;
  o.err = rc < 0 ? errno : 0;
  return o;
}

const char* TypeOf(mode_t m) {
  if (S_ISREG(m)) return "reg";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "lnk";
  if (S_ISFIFO(m)) return "fifo";
  if (S_ISSOCK(m)) return "sock";
  if (S_ISCHR(m)) return "chr";
  if (S_ISBLK(m)) return "blk";
  return "?";
}

// Stat fields that must agree (directory sizes and link counts are fs-specific).
Outcome Stat(const std::string& p, bool follow = false, bool times = false) {
  struct stat st;
  Outcome o = Sys(follow ? ::stat(p.c_str(), &st) : ::lstat(p.c_str(), &st));
  if (o.err != 0) return o;
  std::ostringstream os;
  os << TypeOf(st.st_mode) << " mode=" << std::oct << (st.st_mode & 07777) << std::dec
     << " uid=" << st.st_uid << " gid=" << st.st_gid;
  if (!S_ISDIR(st.st_mode)) os << " size=" << st.st_size << " nlink=" << st.st_nlink;
  if (times) {
    os << " atime=" << st.st_atim.tv_sec << "." << st.st_atim.tv_nsec
       << " mtime=" << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
  }
  o.info = os.str();
  return o;
}

Outcome Read(const std::string& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Sys(-1);
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      Outcome o = Sys(-1);
      ::close(fd);
      return o;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  Outcome o;
  o.rc = static_cast<long>(data.size());
  o.info = data;
  return o;
}

Outcome WriteFile(const std::string& p, int flags, const std::string& data, mode_t mode = 0644) {
  int fd = ::open(p.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return Sys(-1);
  ssize_t n = ::write(fd, data.data(), data.size());
  Outcome o = Sys(n);
  if (::close(fd) != 0 && o.err == 0) o = Sys(-1);
  return o;
}

Outcome List(const std::string& p) {
  DIR* d = ::opendir(p.c_str());
  if (d == nullptr) return Sys(-1);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  Outcome o;
  o.rc = static_cast<long>(names.size());
  for (const std::string& n : names) o.info += n + "/";
  return o;
}

Outcome GetX(const std::string& p, const char* name, size_t bufsize = 4096) {
  std::string buf(bufsize, '\0');
  ssize_t n = ::lgetxattr(p.c_str(), name, bufsize ? buf.data() : nullptr, bufsize);
  Outcome o = Sys(n);
  if (n > 0 && bufsize > 0) o.info = buf.substr(0, static_cast<size_t>(n));
  return o;
}

Outcome ListX(const std::string& p) {
  char buf[4096];
  ssize_t n = ::llistxattr(p.c_str(), buf, sizeof buf);
  if (n < 0) return Sys(-1);
  std::vector<std::string> names;
  for (ssize_t i = 0; i < n;) {
    std::string s(buf + i);
    i += static_cast<ssize_t>(s.size()) + 1;
    if (s.rfind("user.", 0) == 0) names.push_back(s);  // other namespaces are fs-specific
  }
  std::sort(names.begin(), names.end());
  Outcome o;
  o.rc = static_cast<long>(names.size());
  for (const std::string& s : names) o.info += s + ",";
  return o;
}

Outcome Readlink(const std::string& p) {
  char buf[4096];
  ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
  Outcome o = Sys(n);
  if (n >= 0) o.info.assign(buf, static_cast<size_t>(n));
  return o;
}

Outcome Rename2(const std::string& a, const std::string& b, unsigned flags) {
  return Sys(::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), flags));
}

Outcome SetTimes(const std::string& p, timespec at, timespec mt) {
  timespec ts[2] = {at, mt};
  return Sys(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW));
}

// O_APPEND: every write lands at the end, even pwrite at offset 0 (Linux).
Outcome AppendWrites(const std::string& p) {
  int fd = ::open(p.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return Sys(-1);
  Outcome o;
  std::ostringstream os;
  os << ::write(fd, "abc", 3) << ",";
  os << ::pwrite(fd, "XY", 2, 0) << ",";
  os << ::write(fd, "def", 3) << ",";
  os << ::lseek(fd, 0, SEEK_CUR);
  ::close(fd);
  o.info = os.str();
  return o;
}

// Operations on an fd opened read-only.
Outcome ReadOnlyFdMisuse(const std::string& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Sys(-1);
  std::ostringstream os;
  errno = 0;
  os << ::write(fd, "x", 1) << ":" << errno << ",";
  errno = 0;
  os << ::ftruncate(fd, 0) << ":" << errno;
  ::close(fd);
  Outcome o;
  o.info = os.str();
  return o;
}

// An unlinked file stays readable and writable through an open descriptor.
Outcome UnlinkWhileOpen(const std::string& p) {
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Sys(-1);
  std::ostringstream os;
  os << ::write(fd, "still here", 10) << ",";
  os << ::unlink(p.c_str()) << ",";
  struct stat st {};
  os << ::fstat(fd, &st) << ":nlink=" << st.st_nlink << ":size=" << st.st_size << ",";
  os << ::pwrite(fd, "!", 1, 10) << ",";
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  os << n << ":" << std::string(buf, n > 0 ? static_cast<size_t>(n) : 0) << ",";
  os << ::access(p.c_str(), F_OK) << ":" << errno;
  ::close(fd);
  Outcome o;
  o.info = os.str();
  return o;
}

using Step = std::pair<std::string, std::function<Outcome(const std::string&)>>;

std::vector<Step> Script() {
  const std::string n255(255, 'n'), n256(256, 'n');
  std::vector<Step> s;
  auto add = [&s](std::string name, std::function<Outcome(const std::string&)> f) {
    s.emplace_back(std::move(name), std::move(f));
  };
  // create, exclusive create, mkdir
  add("mkdir d", [](const std::string& r) { return Sys(::mkdir((r + "/d").c_str(), 0755)); });
  add("mkdir d again", [](const std::string& r) { return Sys(::mkdir((r + "/d").c_str(), 0755)); });
  add("stat d", [](const std::string& r) { return Stat(r + "/d"); });
  add("create d/f", [](const std::string& r) {
    return WriteFile(r + "/d/f", O_CREAT | O_WRONLY | O_TRUNC, "hello world");
  });
  add("stat d/f", [](const std::string& r) { return Stat(r + "/d/f"); });
  add("O_EXCL existing", [](const std::string& r) {
    return WriteFile(r + "/d/f", O_CREAT | O_EXCL | O_WRONLY, "x");
  });
  add("mkdir d/sub", [](const std::string& r) { return Sys(::mkdir((r + "/d/sub").c_str(), 0750)); });
  add("create d/sub/x", [](const std::string& r) {
    return WriteFile(r + "/d/sub/x", O_CREAT | O_WRONLY, "x");
  });
  add("mkdir d/e", [](const std::string& r) { return Sys(::mkdir((r + "/d/e").c_str(), 0755)); });
  // rename
  add("rename f g", [](const std::string& r) { return Sys(::rename((r + "/d/f").c_str(), (r + "/d/g").c_str())); });
  add("stat old name", [](const std::string& r) { return Stat(r + "/d/f"); });
  add("read g", [](const std::string& r) { return Read(r + "/d/g"); });
  add("rename missing", [](const std::string& r) { return Sys(::rename((r + "/d/missing").c_str(), (r + "/d/y").c_str())); });
  add("rename file over dir", [](const std::string& r) { return Sys(::rename((r + "/d/g").c_str(), (r + "/d/sub").c_str())); });
  add("rename dir over file", [](const std::string& r) { return Sys(::rename((r + "/d/sub").c_str(), (r + "/d/g").c_str())); });
  add("rename dir over non-empty dir", [](const std::string& r) { return Sys(::rename((r + "/d/e").c_str(), (r + "/d/sub").c_str())); });
  add("rename dir into itself", [](const std::string& r) { return Sys(::rename((r + "/d/sub").c_str(), (r + "/d/sub/in").c_str())); });
  add("rename noreplace existing", [](const std::string& r) { return Rename2(r + "/d/g", r + "/d/sub/x", RENAME_NOREPLACE); });
  add("rename noreplace new", [](const std::string& r) { return Rename2(r + "/d/g", r + "/d/g2", RENAME_NOREPLACE); });
  add("rename back", [](const std::string& r) { return Sys(::rename((r + "/d/g2").c_str(), (r + "/d/g").c_str())); });
  add("create d/a", [](const std::string& r) { return WriteFile(r + "/d/a", O_CREAT | O_WRONLY, "A"); });
  add("rename replaces file", [](const std::string& r) { return Sys(::rename((r + "/d/a").c_str(), (r + "/d/g").c_str())); });
  add("read replaced", [](const std::string& r) { return Read(r + "/d/g"); });
  add("rename empty dir", [](const std::string& r) { return Sys(::rename((r + "/d/e").c_str(), (r + "/d/e2").c_str())); });
  add("stat renamed dir", [](const std::string& r) { return Stat(r + "/d/e2"); });
  add("rename dir over empty dir", [](const std::string& r) {
    ::mkdir((r + "/d/e3").c_str(), 0700);
    return Sys(::rename((r + "/d/e3").c_str(), (r + "/d/e2").c_str()));
  });
  add("stat after dir replace", [](const std::string& r) { return Stat(r + "/d/e2"); });
  add("rename across dirs", [](const std::string& r) { return Sys(::rename((r + "/d/sub/x").c_str(), (r + "/d/movedx").c_str())); });
  add("list d/sub after move", [](const std::string& r) { return List(r + "/d/sub"); });
  add("rename exchange", [](const std::string& r) { return Rename2(r + "/d/movedx", r + "/d/g", RENAME_EXCHANGE); });
  add("read exchanged 1", [](const std::string& r) { return Read(r + "/d/g"); });
  add("read exchanged 2", [](const std::string& r) { return Read(r + "/d/movedx"); });
  // link
  add("link g h", [](const std::string& r) { return Sys(::link((r + "/d/g").c_str(), (r + "/d/h").c_str())); });
  add("stat g nlink 2", [](const std::string& r) { return Stat(r + "/d/g"); });
  add("stat h", [](const std::string& r) { return Stat(r + "/d/h"); });
  add("link onto existing", [](const std::string& r) { return Sys(::link((r + "/d/g").c_str(), (r + "/d/h").c_str())); });
  add("link a directory", [](const std::string& r) { return Sys(::link((r + "/d/sub").c_str(), (r + "/d/sublink").c_str())); });
  add("link missing", [](const std::string& r) { return Sys(::link((r + "/d/missing").c_str(), (r + "/d/z").c_str())); });
  add("write via h", [](const std::string& r) { return WriteFile(r + "/d/h", O_WRONLY | O_TRUNC, "via h"); });
  add("read via g", [](const std::string& r) { return Read(r + "/d/g"); });
  // symlink
  add("symlink s -> g", [](const std::string& r) { return Sys(::symlink("g", (r + "/d/s").c_str())); });
  add("readlink s", [](const std::string& r) { return Readlink(r + "/d/s"); });
  add("lstat s", [](const std::string& r) {
    Outcome o = Stat(r + "/d/s");
    // A symlink's permission bits are fs-specific (0777 on most); keep type and size.
    o.info = o.info.substr(0, 3) + o.info.substr(o.info.find(" size="));
    return o;
  });
  add("stat through s", [](const std::string& r) { return Stat(r + "/d/s", true); });
  add("read through s", [](const std::string& r) { return Read(r + "/d/s"); });
  add("symlink onto existing", [](const std::string& r) { return Sys(::symlink("x", (r + "/d/g").c_str())); });
  add("readlink regular", [](const std::string& r) { return Readlink(r + "/d/g"); });
  add("dangling symlink", [](const std::string& r) { return Sys(::symlink("nowhere", (r + "/d/dang").c_str())); });
  add("open dangling", [](const std::string& r) { return Read(r + "/d/dang"); });
  add("long symlink target", [](const std::string& r) {
    return Sys(::symlink(std::string(4000, 'l').c_str(), (r + "/d/longtarget").c_str()));
  });
  add("readlink long", [](const std::string& r) { return Readlink(r + "/d/longtarget"); });
  // xattr
  add("setxattr a", [](const std::string& r) { return Sys(::lsetxattr((r + "/d/g").c_str(), "user.a", "1", 1, 0)); });
  add("getxattr a", [](const std::string& r) { return GetX(r + "/d/g", "user.a"); });
  add("getxattr missing", [](const std::string& r) { return GetX(r + "/d/g", "user.none"); });
  add("setxattr create existing", [](const std::string& r) { return Sys(::lsetxattr((r + "/d/g").c_str(), "user.a", "2", 1, XATTR_CREATE)); });
  add("setxattr replace missing", [](const std::string& r) { return Sys(::lsetxattr((r + "/d/g").c_str(), "user.b", "2", 1, XATTR_REPLACE)); });
  add("setxattr b", [](const std::string& r) { return Sys(::lsetxattr((r + "/d/g").c_str(), "user.b", "22", 2, 0)); });
  add("setxattr replace b", [](const std::string& r) { return Sys(::lsetxattr((r + "/d/g").c_str(), "user.b", "333", 3, XATTR_REPLACE)); });
  add("getxattr size query", [](const std::string& r) { return GetX(r + "/d/g", "user.b", 0); });
  add("getxattr small buffer", [](const std::string& r) { return GetX(r + "/d/g", "user.b", 1); });
  add("listxattr", [](const std::string& r) { return ListX(r + "/d/g"); });
  add("xattr via hard link", [](const std::string& r) { return GetX(r + "/d/h", "user.b"); });
  add("setxattr empty value", [](const std::string& r) { return Sys(::lsetxattr((r + "/d/g").c_str(), "user.empty", "", 0, 0)); });
  add("getxattr empty value", [](const std::string& r) { return GetX(r + "/d/g", "user.empty"); });
  add("removexattr a", [](const std::string& r) { return Sys(::lremovexattr((r + "/d/g").c_str(), "user.a")); });
  add("removexattr a again", [](const std::string& r) { return Sys(::lremovexattr((r + "/d/g").c_str(), "user.a")); });
  add("listxattr after remove", [](const std::string& r) { return ListX(r + "/d/g"); });
  add("setxattr on dir", [](const std::string& r) { return Sys(::lsetxattr((r + "/d").c_str(), "user.dir", "v", 1, 0)); });
  add("getxattr on dir", [](const std::string& r) { return GetX(r + "/d", "user.dir"); });
  // (Large values: ext4 stops at its block size, clf at 64 KiB; 2000 bytes fit both.)
  add("xattr 2000-byte value", [](const std::string& r) {
    std::string v(2000, 'v');
    return Sys(::lsetxattr((r + "/d/movedx").c_str(), "user.big", v.data(), v.size(), 0));
  });
  add("xattr 2000-byte read", [](const std::string& r) { return GetX(r + "/d/movedx", "user.big", 70000); });
  // chmod, chown
  add("chmod 0600", [](const std::string& r) { return Sys(::chmod((r + "/d/g").c_str(), 0600)); });
  add("stat after chmod", [](const std::string& r) { return Stat(r + "/d/g"); });
  add("chmod 04755", [](const std::string& r) { return Sys(::chmod((r + "/d/g").c_str(), 04755)); });
  add("stat setuid", [](const std::string& r) { return Stat(r + "/d/g"); });
  add("chmod missing", [](const std::string& r) { return Sys(::chmod((r + "/d/missing").c_str(), 0600)); });
  add("chown 1234:5678", [](const std::string& r) { return Sys(::chown((r + "/d/g").c_str(), 1234, 5678)); });
  add("stat after chown (suid cleared)", [](const std::string& r) { return Stat(r + "/d/g"); });
  add("chown gid only", [](const std::string& r) { return Sys(::chown((r + "/d/g").c_str(), static_cast<uid_t>(-1), 99)); });
  add("stat after chgrp", [](const std::string& r) { return Stat(r + "/d/g"); });
  add("chmod 06775",
      [](const std::string& r) { return Sys(::chmod((r + "/d/g").c_str(), 06775)); });
  add("write by root keeps setuid",
      [](const std::string& r) { return WriteFile(r + "/d/g", O_WRONLY, "root"); });
  add("stat after root write", [](const std::string& r) { return Stat(r + "/d/g"); });
  add("chown 0:0 kills setuid and setgid",
      [](const std::string& r) { return Sys(::chown((r + "/d/g").c_str(), 0, 0)); });
  add("stat after kill-priv chown", [](const std::string& r) { return Stat(r + "/d/g"); });
  // A file capability goes with a write, a truncate and a chown (the mount
  // clears it: FUSE_HANDLE_KILLPRIV_V2). The value: VFS_CAP_REVISION_2,
  // cap_net_raw permitted.
  auto set_caps = [](const std::string& p) {
    const unsigned char v[20] = {0, 0, 0, 2, 0, 0x20, 0, 0};
    return Sys(::lsetxattr(p.c_str(), "security.capability", v, sizeof v, 0));
  };
  add("capability file", [](const std::string& r) { return WriteFile(r + "/d/capf", O_CREAT | O_WRONLY, "cap"); });
  add("setcap", [set_caps](const std::string& r) { return set_caps(r + "/d/capf"); });
  add("getcap", [](const std::string& r) { return GetX(r + "/d/capf", "security.capability"); });
  add("write clears capability", [](const std::string& r) { return WriteFile(r + "/d/capf", O_WRONLY, "w"); });
  add("getcap after write", [](const std::string& r) { return GetX(r + "/d/capf", "security.capability"); });
  add("setcap again", [set_caps](const std::string& r) { return set_caps(r + "/d/capf"); });
  add("truncate clears capability", [](const std::string& r) { return Sys(::truncate((r + "/d/capf").c_str(), 1)); });
  add("getcap after truncate", [](const std::string& r) { return GetX(r + "/d/capf", "security.capability"); });
  add("setcap for chown", [set_caps](const std::string& r) { return set_caps(r + "/d/capf"); });
  add("chown clears capability", [](const std::string& r) { return Sys(::chown((r + "/d/capf").c_str(), 7, 7)); });
  add("getcap after chown", [](const std::string& r) { return GetX(r + "/d/capf", "security.capability"); });
  // tar's order for a setuid file of another owner: chown, then chmod.
  add("chown then chmod 04755 keeps setuid", [](const std::string& r) {
    Outcome o = WriteFile(r + "/d/tarsuid", O_CREAT | O_WRONLY, "x");
    if (::chown((r + "/d/tarsuid").c_str(), 1234, 5678) != 0) return Sys(-1);
    if (::chmod((r + "/d/tarsuid").c_str(), 06755) != 0) return Sys(-1);
    return o;
  });
  add("stat tar setuid", [](const std::string& r) { return Stat(r + "/d/tarsuid"); });
  add("lchown symlink", [](const std::string& r) { return Sys(::lchown((r + "/d/s").c_str(), 42, 43)); });
  add("lstat symlink owner", [](const std::string& r) {
    Outcome o = Stat(r + "/d/s");
    o.info = o.info.substr(o.info.find(" uid="));
    return o;
  });
  add("chmod dir 0700", [](const std::string& r) { return Sys(::chmod((r + "/d/sub").c_str(), 0700)); });
  add("mkdir sticky", [](const std::string& r) {
    Outcome o = Sys(::mkdir((r + "/d/t").c_str(), 0777));
    ::chmod((r + "/d/t").c_str(), 01777);
    return o;
  });
  add("stat sticky", [](const std::string& r) { return Stat(r + "/d/t"); });
  // utimens
  add("utimens explicit", [](const std::string& r) { return SetTimes(r + "/d/g", {1000, 5}, {2000, 7}); });
  add("stat times", [](const std::string& r) { return Stat(r + "/d/g", false, true); });
  add("utimens omit atime", [](const std::string& r) { return SetTimes(r + "/d/g", {0, UTIME_OMIT}, {3000, 123456789}); });
  add("stat times 2", [](const std::string& r) { return Stat(r + "/d/g", false, true); });
  add("utimens now", [](const std::string& r) { return Sys(::utimensat(AT_FDCWD, (r + "/d/g").c_str(), nullptr, 0)); });
  add("utimens missing", [](const std::string& r) { return SetTimes(r + "/d/missing", {1, 0}, {1, 0}); });
  add("utimens dir", [](const std::string& r) { return SetTimes(r + "/d/sub", {5000, 0}, {6000, 0}); });
  add("stat dir times", [](const std::string& r) { return Stat(r + "/d/sub", false, true); });
  // truncate
  add("truncate grow", [](const std::string& r) { return Sys(::truncate((r + "/d/g").c_str(), 10000)); });
  add("read grown", [](const std::string& r) { return Read(r + "/d/g"); });
  add("truncate shrink", [](const std::string& r) { return Sys(::truncate((r + "/d/g").c_str(), 3)); });
  add("read shrunk", [](const std::string& r) { return Read(r + "/d/g"); });
  add("truncate dir", [](const std::string& r) { return Sys(::truncate((r + "/d").c_str(), 0)); });
  add("truncate missing", [](const std::string& r) { return Sys(::truncate((r + "/d/missing").c_str(), 0)); });
  add("truncate negative", [](const std::string& r) { return Sys(::truncate((r + "/d/g").c_str(), -1)); });
  add("O_TRUNC", [](const std::string& r) { return WriteFile(r + "/d/h", O_WRONLY | O_TRUNC, ""); });
  add("stat truncated", [](const std::string& r) { return Stat(r + "/d/h"); });
  add("read-only fd misuse", [](const std::string& r) { return ReadOnlyFdMisuse(r + "/d/g"); });
  // O_APPEND and sparse writes
  add("create ap", [](const std::string& r) { return WriteFile(r + "/d/ap", O_CREAT | O_WRONLY, "start"); });
  add("append writes", [](const std::string& r) { return AppendWrites(r + "/d/ap"); });
  add("read appended", [](const std::string& r) { return Read(r + "/d/ap"); });
  add("sparse write", [](const std::string& r) {
    int fd = ::open((r + "/d/sp").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return Sys(-1);
    Outcome o = Sys(::pwrite(fd, "z", 1, 100000));
    ::close(fd);
    return o;
  });
  add("read sparse", [](const std::string& r) { return Read(r + "/d/sp"); });
  add("unlink while open", [](const std::string& r) { return UnlinkWhileOpen(r + "/d/uo"); });
  // unlink, rmdir
  add("unlink g", [](const std::string& r) { return Sys(::unlink((r + "/d/g").c_str())); });
  add("stat h nlink 1", [](const std::string& r) { return Stat(r + "/d/h"); });
  add("unlink g again", [](const std::string& r) { return Sys(::unlink((r + "/d/g").c_str())); });
  add("unlink dir", [](const std::string& r) { return Sys(::unlink((r + "/d/sub").c_str())); });
  add("rmdir non-empty", [](const std::string& r) { return Sys(::rmdir((r + "/d").c_str())); });
  add("rmdir file", [](const std::string& r) { return Sys(::rmdir((r + "/d/h").c_str())); });
  add("mkdir under file", [](const std::string& r) { return Sys(::mkdir((r + "/d/h/x").c_str(), 0755)); });
  add("open under file", [](const std::string& r) { return Read(r + "/d/h/x"); });
  add("rmdir empty", [](const std::string& r) { return Sys(::rmdir((r + "/d/e2").c_str())); });
  add("rmdir dot", [](const std::string& r) { return Sys(::rmdir((r + "/d/sub/.").c_str())); });
  add("name 255", [n255](const std::string& r) { return WriteFile(r + "/d/" + n255, O_CREAT | O_WRONLY, "ok"); });
  add("name 256", [n256](const std::string& r) { return WriteFile(r + "/d/" + n256, O_CREAT | O_WRONLY, "no"); });
  add("mkdir name 256", [n256](const std::string& r) { return Sys(::mkdir((r + "/d/" + n256).c_str(), 0755)); });
  add("mkfifo", [](const std::string& r) { return Sys(::mkfifo((r + "/d/fifo").c_str(), 0640)); });
  add("stat fifo", [](const std::string& r) { return Stat(r + "/d/fifo"); });
  add("list d", [](const std::string& r) { return List(r + "/d"); });
  add("list d/sub", [](const std::string& r) { return List(r + "/d/sub"); });
  add("access W_OK", [](const std::string& r) { return Sys(::access((r + "/d/h").c_str(), W_OK)); });
  add("access X_OK on 0644", [](const std::string& r) { return Sys(::access((r + "/d/h").c_str(), X_OK)); });
  return s;
}

std::vector<Outcome> RunScript(const std::vector<Step>& steps, const std::string& root) {
  std::vector<Outcome> out;
  for (const Step& s : steps) out.push_back(s.second(root));
  return out;
}

class MountPosixTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions o;
    o.servers = 3;
    o.stripe_size = 64 * 1024;
    o.mount = true;
    cluster_ = new TestCluster(o);
    start_ = new Status(cluster_->Start());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete start_;
    start_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_->ok()) << start_->ToString(); }

  static TestCluster* cluster_;
  static Status* start_;
};
TestCluster* MountPosixTest::cluster_ = nullptr;
Status* MountPosixTest::start_ = nullptr;

TEST_F(MountPosixTest, SameResultsAsLocalDirectory) {
  TempDir local("clf-posix-local");
  const std::string mnt_root = cluster_->mount_point() + "/posix";
  ASSERT_EQ(::mkdir(mnt_root.c_str(), 0755), 0) << std::strerror(errno);
  const std::vector<Step> steps = Script();
  const std::vector<Outcome> want = RunScript(steps, local.str());
  const std::vector<Outcome> got = RunScript(steps, mnt_root);
  ASSERT_EQ(want.size(), got.size());
  int failures = 0, errors = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "step " << i << " \"" << steps[i].first << "\": clf gave "
                               << got[i] << ", local dir gave " << want[i];
    errors += want[i].err != 0 ? 1 : 0;
    if (!(got[i] == want[i])) ++failures;
  }
  // The script exercises both success and error paths.
  EXPECT_GE(errors, 25);
  EXPECT_GE(static_cast<int>(steps.size()) - errors, 60);
  EXPECT_EQ(failures, 0);
}

// Prepares the same tree below `root` (as root) for the unprivileged script.
void PreparePermTree(const std::string& root) {
  const std::string p = root + "/p";
  ASSERT_EQ(::mkdir(p.c_str(), 0755), 0) << p << ": " << std::strerror(errno);
  ASSERT_EQ(WriteFile(p + "/secret", O_CREAT | O_WRONLY, "secret", 0600).err, 0);
  ASSERT_EQ(WriteFile(p + "/pub", O_CREAT | O_WRONLY, "pub", 0644).err, 0);
  ASSERT_EQ(::mkdir((p + "/open").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((p + "/open").c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((p + "/closed").c_str(), 0700), 0);
  ASSERT_EQ(WriteFile(p + "/closed/x", O_CREAT | O_WRONLY, "x", 0644).err, 0);
  // Programs only their x bits let others run.
  for (const auto& [name, mode] : {std::pair<const char*, mode_t>{"xonly", 0711}, {"xsecret", 0700}}) {
    std::error_code ec;
    std::filesystem::copy_file("/bin/true", p + "/" + name, ec);
    ASSERT_FALSE(ec) << name << ": " << ec.message();
    ASSERT_EQ(::chmod((p + "/" + name).c_str(), mode), 0) << name;
  }
  ASSERT_EQ(::mkdir((p + "/sticky").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((p + "/sticky").c_str(), 01777), 0);
  ASSERT_EQ(WriteFile(p + "/sticky/rootfile", O_CREAT | O_WRONLY, "r", 0666).err, 0);
  ASSERT_EQ(::chmod((p + "/sticky/rootfile").c_str(), 0666), 0);
  // Root's setuid/setgid files others may write (kill-priv), one writable file.
  for (const auto& [name, mode] : {std::pair<const char*, mode_t>{"suidw", 06777},
                                   {"suidt", 06676},
                                   {"suidf", 06767},
                                   {"ww", 0666}}) {
    ASSERT_EQ(WriteFile(p + "/" + name, O_CREAT | O_WRONLY, "0123456789", 0644).err, 0);
    ASSERT_EQ(::chmod((p + "/" + name).c_str(), mode), 0) << name;
  }
}

// `helper`: a copy of clf_mount_helper that nobody can execute (the build tree
// may sit below folders other users cannot enter).
std::map<std::string, int> RunPermScript(const std::string& root, const std::string& helper) {
  std::map<std::string, int> out;
  Result<tools::RunResult> r =
      tools::Run({"runuser", "-u", "nobody", "--", helper, "perm", root}, 60000);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return out;
  EXPECT_EQ(r->exit_code, 0) << r->output;
  std::istringstream in(r->output);
  std::string name;
  int err = 0;
  while (in >> name >> err) out[name] = err;
  return out;
}

TEST_F(MountPosixTest, UnprivilegedUserGetsEaccesLikeLocal) {
  TempDir local("clf-perm-local");
  ASSERT_EQ(::chmod(local.str().c_str(), 0755), 0);
  const std::string mnt_root = cluster_->mount_point() + "/perm";
  ASSERT_EQ(::mkdir(mnt_root.c_str(), 0755), 0) << std::strerror(errno);
  PreparePermTree(local.str());
  PreparePermTree(mnt_root);
  if (HasFatalFailure()) return;
  TempDir bin("clf-perm-bin");
  ASSERT_EQ(::chmod(bin.str().c_str(), 0755), 0);
  const std::string helper = bin.str() + "/clf_mount_helper";
  std::error_code ec;
  std::filesystem::copy_file(TestCluster::Binary("CLF_MOUNT_HELPER", "clf_mount_helper"), helper,
                             ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(::chmod(helper.c_str(), 0755), 0);
  std::map<std::string, int> want = RunPermScript(local.str(), helper);
  // Root walks into the closed directory first: the kernel must not let the
  // unprivileged user reuse those cached names (it walks them without asking
  // anyone when the mount, not the kernel, checks permissions).
  struct stat pre;
  ASSERT_EQ(::stat((mnt_root + "/p/closed/x").c_str(), &pre), 0);
  std::map<std::string, int> got = RunPermScript(mnt_root, helper);
  ASSERT_GE(want.size(), 20u);
  for (const auto& [name, err] : want) {
    ASSERT_TRUE(got.count(name)) << name << " missing from the mount run";
    EXPECT_EQ(got[name], err) << name << ": clf errno " << got[name] << " ("
                              << std::strerror(got[name]) << "), local " << err << " ("
                              << std::strerror(err) << ")";
  }
  // What POSIX requires, whatever the local fs did.
  EXPECT_EQ(got["read_secret"], EACCES);
  EXPECT_EQ(got["write_pub"], EACCES);
  EXPECT_EQ(got["read_pub"], 0);
  EXPECT_EQ(got["create_in_p"], EACCES);
  EXPECT_EQ(got["mkdir_in_p"], EACCES);
  EXPECT_EQ(got["unlink_pub"], EACCES);
  EXPECT_EQ(got["list_closed"], EACCES);
  EXPECT_EQ(got["stat_in_closed"], EACCES);
  EXPECT_EQ(got["stat_missing_in_closed"], EACCES);
  EXPECT_EQ(got["exec_xonly"], 0);
  EXPECT_EQ(got["read_xonly"], EACCES);
  EXPECT_EQ(got["exec_xsecret"], EACCES);
  EXPECT_EQ(got["chmod_pub"], EPERM);
  EXPECT_EQ(got["create_in_open"], 0);
  EXPECT_EQ(got["chown_mine_root"], EPERM);
  EXPECT_EQ(got["unlink_sticky_rootfile"], EPERM);
  EXPECT_EQ(got["write_suid_ww"], 0);
  EXPECT_EQ(got["mode_after_write"], 0777);
  EXPECT_EQ(got["truncate_suid_ww"], 0);
  EXPECT_EQ(got["mode_after_truncate"], 0676);
  EXPECT_EQ(got["ftruncate_suid_ww"], 0);
  EXPECT_EQ(got["mode_after_ftruncate"], 0767);
  EXPECT_EQ(got["creat_mode0_ftruncate"], 0);
  EXPECT_EQ(got["mode_of_mode0"], 0);
  EXPECT_EQ(got["utimes_now_ww"], 0);
  EXPECT_EQ(got["utimes_now_now_ww"], 0);
  EXPECT_EQ(got["utimes_explicit_ww"], EPERM);
  // Nothing the unprivileged user was refused happened anyway.
  struct stat st;
  EXPECT_EQ(::stat((mnt_root + "/p/pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_NE(::stat((mnt_root + "/p/new").c_str(), &st), 0);
}

// root_squash = true in the cluster file: root on the client is nobody on the
// servers. The root directory belongs to root (0755), so the client's root
// may list it but not create in it, chmod it or set user xattrs on it.
TEST(MountRootSquashTest, RootIsNobodyOnTheServers) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.root_squash = true;
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  ASSERT_EQ(::geteuid(), 0u) << "the mount suite runs as root";
  const std::string m = cluster.mount_point();
  errno = 0;
  EXPECT_EQ(::mkdir((m + "/sq").c_str(), 0755), -1);
  EXPECT_EQ(errno, EACCES);
  errno = 0;
  EXPECT_EQ(::open((m + "/f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644), -1);
  EXPECT_EQ(errno, EACCES);
  errno = 0;
  EXPECT_EQ(::chmod(m.c_str(), 0777), -1);
  EXPECT_EQ(errno, EPERM);
  errno = 0;
  EXPECT_EQ(::setxattr(m.c_str(), "user.a", "1", 1, 0), -1);
  EXPECT_EQ(errno, EACCES);
  DIR* d = ::opendir(m.c_str());
  ASSERT_NE(d, nullptr) << std::strerror(errno);
  ::closedir(d);
  // Through libclf: a root caller is squashed too, a plain user is not.
  client::Caller root;
  EXPECT_STATUS(Code::kPermission, cluster.client().CreateSync(cluster.client().root(), "g",
                                                               client::CreateArgs{}, root));
  struct stat st;
  ASSERT_EQ(::stat(m.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

}  // namespace
}  // namespace clf::testing
