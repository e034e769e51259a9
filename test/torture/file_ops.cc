#include "test/torture/file_ops.h"

#include "test/torture/shrink.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace clf::torture {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kSourceBytes = 300 * 1024;  // the copy_file_range source "g"
constexpr uint64_t kFullCompareMax = 256 * 1024;
constexpr uint64_t kWindow = 64 * 1024;
const char* const kOtherName = "l";  // the extra link

std::string Path(const FileSide& s, const std::string& name) { return s.dir + "/" + name; }
std::string OtherName(const std::string& cur) { return cur == "f" ? "h" : "f"; }

// A SIGBUS while touching a mapping (a page past the file's end on one side)
// is an outcome, not a crash.
sigjmp_buf* g_bus_jump = nullptr;
void OnBus(int) {
  if (g_bus_jump != nullptr) siglongjmp(*g_bus_jump, 1);
  std::abort();
}

Outcome MmapOp(const FileOp& op, FileSide& side, int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Sys(-1);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return Outcome{0, 0, "empty"};
  const uint64_t start = (op.off % size) / kPage * kPage;
  const uint64_t n = std::min<uint64_t>(std::max<uint64_t>(op.len, 1), size - start);
  const bool write = op.kind == FileOpKind::kMmapWrite;
  void* p = ::mmap(nullptr, n, write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
                   static_cast<off_t>(start));
  if (p == MAP_FAILED) return Sys(-1);
  Outcome o{static_cast<long>(n), 0, ""};
  sigjmp_buf jump;
  g_bus_jump = &jump;
  if (sigsetjmp(jump, 1) == 0) {
    if (write) {
      const std::string data = Pattern(op.tag, n);
      std::memcpy(p, data.data(), n);
    } else {
      o.info.assign(static_cast<const char*>(p), n);
    }
  } else {
    o = Outcome{-1, 0, "SIGBUS"};
  }
  g_bus_jump = nullptr;
  ::munmap(p, n);
  (void)side;
  return o;
}

Outcome ReadInto(long n, const std::string& buf) {
  Outcome o = Sys(n);
  if (n > 0) o.info = buf.substr(0, static_cast<size_t>(n));
  return o;
}

Outcome FdOp(const FileOp& op, FileSide& side, int fd) {
  const off_t off = static_cast<off_t>(op.off);
  switch (op.kind) {
    case FileOpKind::kClose: {
      side.fds[op.slot] = -1;
      return Sys(::close(fd));
    }
    case FileOpKind::kPwrite:
    case FileOpKind::kWrite: {
      const std::string data = Pattern(op.tag, op.len);
      return Sys(op.kind == FileOpKind::kPwrite ? ::pwrite(fd, data.data(), data.size(), off)
                                                : ::write(fd, data.data(), data.size()));
    }
    case FileOpKind::kLseek:
      return Sys(::lseek(fd, off, op.flags == 1 ? SEEK_END : SEEK_SET));
    case FileOpKind::kPread:
    case FileOpKind::kRead: {
      std::string buf(op.len, '\0');
      return ReadInto(op.kind == FileOpKind::kPread ? ::pread(fd, buf.data(), op.len, off)
                                                    : ::read(fd, buf.data(), op.len),
                      buf);
    }
    case FileOpKind::kFtruncate:
      return Sys(::ftruncate(fd, off));
    case FileOpKind::kFallocate:
      return Sys(::fallocate(fd, op.flags, off, static_cast<off_t>(op.len)));
    case FileOpKind::kMmapWrite:
    case FileOpKind::kMmapRead:
      return MmapOp(op, side, fd);
    case FileOpKind::kFsync:
      return Sys(op.flags == 1 ? ::fdatasync(fd) : ::fsync(fd));
    default:
      return Outcome{-1, EINVAL, "not an fd op"};
  }
}

Outcome CopyRange(const FileOp& op, FileSide& side, int fd) {
  const int src = ::open(Path(side, "g").c_str(), O_RDONLY | O_CLOEXEC);
  if (src < 0) return Outcome{-1, errno, "source"};
  loff_t in = static_cast<loff_t>(op.tag % kSourceBytes);
  loff_t out = static_cast<loff_t>(op.off);
  Outcome o = Sys(::copy_file_range(src, &in, fd, &out, op.len, 0));
  ::close(src);
  return o;
}

std::string StatInfo(const struct stat& st, bool times) {
  std::ostringstream os;
  os << "mode=" << std::oct << st.st_mode << std::dec << " uid=" << st.st_uid
     << " gid=" << st.st_gid << " nlink=" << st.st_nlink << " size=" << st.st_size;
  if (times) {
    os << " atime=" << st.st_atim.tv_sec << "." << st.st_atim.tv_nsec
       << " mtime=" << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
  }
  return os.str();
}

Outcome PathOp(const FileOp& op, FileSide& side) {
  const std::string cur = Path(side, side.name);
  const std::string x = "user.x" + std::to_string(op.name);
  switch (op.kind) {
    case FileOpKind::kTruncate:
      return Sys(::truncate(cur.c_str(), static_cast<off_t>(op.off)));
    case FileOpKind::kRename: {
      Outcome o = Sys(::rename(cur.c_str(), Path(side, OtherName(side.name)).c_str()));
      if (o.err == 0) side.name = OtherName(side.name);
      return o;
    }
    case FileOpKind::kLink:
      return Sys(::link(cur.c_str(), Path(side, kOtherName).c_str()));
    case FileOpKind::kUnlinkLink:
      return Sys(::unlink(Path(side, kOtherName).c_str()));
    case FileOpKind::kUnlink:
      return Sys(::unlink(cur.c_str()));
    case FileOpKind::kChmod:
      return Sys(::chmod(cur.c_str(), static_cast<mode_t>(op.off)));
    case FileOpKind::kChown:
      return Sys(::chown(cur.c_str(), static_cast<uid_t>(op.off), static_cast<gid_t>(op.len)));
    case FileOpKind::kUtimens: {
      struct timespec ts[2] = {{static_cast<time_t>(op.tag % 2000000000), static_cast<long>(op.off % 1000000000)},
                               {static_cast<time_t>(op.len % 2000000000), static_cast<long>(op.tag % 1000000000)}};
      Outcome o = Sys(::utimensat(AT_FDCWD, cur.c_str(), ts, 0));
      struct stat st;
      if (o.err == 0 && ::stat(cur.c_str(), &st) == 0) o.info = StatInfo(st, true);
      return o;
    }
    case FileOpKind::kSetXattr: {
      const std::string v = Pattern(op.tag, op.len);
      return Sys(::setxattr(cur.c_str(), x.c_str(), v.data(), v.size(), op.flags));
    }
    case FileOpKind::kGetXattr: {
      std::string buf(4096, '\0');
      return ReadInto(::getxattr(cur.c_str(), x.c_str(), buf.data(), buf.size()), buf);
    }
    case FileOpKind::kRemoveXattr:
      return Sys(::removexattr(cur.c_str(), x.c_str()));
    case FileOpKind::kListXattr: {
      std::string buf(4096, '\0');
      ssize_t n = ::listxattr(cur.c_str(), buf.data(), buf.size());
      Outcome o = Sys(n);
      if (n <= 0) return o;
      std::vector<std::string> names;
      for (size_t i = 0; i < static_cast<size_t>(n);) {
        std::string one(buf.data() + i);
        i += one.size() + 1;
        // Security and system attributes are the file system's own (SELinux
        // labels, ACLs): only the user namespace is the sequence's.
        if (one.rfind("user.", 0) == 0) names.push_back(one);
      }
      std::sort(names.begin(), names.end());
      o.rc = static_cast<long>(names.size());
      for (const auto& s : names) o.info += s + ",";
      return o;
    }
    default:
      return Outcome{-1, EINVAL, "not a path op"};
  }
}

int OpenSlot(const FileSide& s, bool need_write, bool need_read) {
  for (int i = 0; i < kSlots; ++i) {
    if (s.fds[i] < 0) continue;
    const int acc = s.flags[i] & O_ACCMODE;
    if (need_write && acc == O_RDONLY) continue;
    if (need_read && acc == O_WRONLY) continue;
    return i;
  }
  return -1;
}

uint64_t SizeOf(const FileSide& s) {
  struct stat st;
  if (::stat(Path(s, s.name).c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

uint64_t DrawOffset(Rng& rng, uint64_t size) {
  if (size > 0 && rng.Chance(40)) return rng.In(0, size + size / 4);  // near what is there
  return rng.Chance(90) ? rng.In(0, 192 * 1024) : rng.In(0, 3u << 20);
}

uint64_t DrawLength(Rng& rng) {
  const int c = static_cast<int>(rng.In(0, 99));
  if (c < 60) return rng.In(1, 4096);
  if (c < 90) return rng.In(1, 64 * 1024);
  return rng.In(1, 300 * 1024);
}

// The kinds a step is drawn from, with their weights.
struct Weighted {
  FileOpKind kind;
  int weight;
};
constexpr Weighted kWeights[] = {
    {FileOpKind::kOpen, 10},       {FileOpKind::kClose, 8},       {FileOpKind::kPwrite, 18},
    {FileOpKind::kWrite, 6},       {FileOpKind::kLseek, 3},       {FileOpKind::kPread, 10},
    {FileOpKind::kRead, 4},        {FileOpKind::kFtruncate, 6},   {FileOpKind::kTruncate, 3},
    {FileOpKind::kFallocate, 3},   {FileOpKind::kMmapWrite, 5},   {FileOpKind::kMmapRead, 3},
    {FileOpKind::kCopyRange, 3},   {FileOpKind::kFsync, 2},       {FileOpKind::kRename, 1},
    {FileOpKind::kLink, 1},        {FileOpKind::kUnlinkLink, 1},  {FileOpKind::kUnlink, 1},
    {FileOpKind::kChmod, 1},       {FileOpKind::kChown, 1},       {FileOpKind::kUtimens, 1},
    {FileOpKind::kSetXattr, 2},    {FileOpKind::kGetXattr, 1},    {FileOpKind::kRemoveXattr, 1},
    {FileOpKind::kListXattr, 1},
};

FileOpKind DrawKind(Rng& rng, const FileRunOptions& o) {
  int total = 0;
  for (const Weighted& w : kWeights) total += w.weight;
  for (;;) {
    int r = static_cast<int>(rng.In(0, static_cast<uint64_t>(total - 1)));
    FileOpKind k = FileOpKind::kOpen;
    for (const Weighted& w : kWeights) {
      if (r < w.weight) {
        k = w.kind;
        break;
      }
      r -= w.weight;
    }
    if (!o.mmap && (k == FileOpKind::kMmapWrite || k == FileOpKind::kMmapRead)) continue;
    if (!o.fallocate && k == FileOpKind::kFallocate) continue;
    // Two mounts: the promise checked is close-to-open for bytes and size;
    // names changed on one mount reach the other's name cache only after
    // entry_timeout (docs/fuse.md), so the sequence keeps its one name.
    if (!o.reader.empty() && (k == FileOpKind::kRename || k == FileOpKind::kLink ||
                              k == FileOpKind::kUnlinkLink || k == FileOpKind::kUnlink)) {
      continue;
    }
    return k;
  }
}

int DrawOpenFlags(Rng& rng) {
  static const int kAccess[] = {O_RDWR, O_RDWR, O_WRONLY, O_RDONLY};
  int f = rng.Pick(kAccess) | O_CREAT;
  if (rng.Chance(15)) f |= O_TRUNC;
  if (rng.Chance(10) && (f & O_ACCMODE) != O_RDONLY) f |= O_APPEND;
  return f;
}

// An fd op's slot, or -1 when no open slot fits (the step becomes an open).
int SlotFor(FileOpKind k, Rng& rng, const FileSide& ref) {
  const bool w = k == FileOpKind::kPwrite || k == FileOpKind::kWrite ||
                 k == FileOpKind::kFtruncate || k == FileOpKind::kFallocate ||
                 k == FileOpKind::kCopyRange;
  const bool r = k == FileOpKind::kPread || k == FileOpKind::kRead || k == FileOpKind::kMmapRead;
  const bool rw = k == FileOpKind::kMmapWrite;
  std::vector<int> fit;
  for (int i = 0; i < kSlots; ++i) {
    if (ref.fds[i] < 0) continue;
    const int acc = ref.flags[i] & O_ACCMODE;
    if ((w || rw) && acc == O_RDONLY) continue;
    if ((r || rw) && acc == O_WRONLY) continue;
    if (k == FileOpKind::kCopyRange && (ref.flags[i] & O_APPEND)) continue;
    fit.push_back(i);
  }
  if (fit.empty()) return -1;
  return fit[rng.In(0, fit.size() - 1)];
}

bool IsFdOp(FileOpKind k) {
  switch (k) {
    case FileOpKind::kClose: case FileOpKind::kPwrite: case FileOpKind::kWrite:
    case FileOpKind::kLseek: case FileOpKind::kPread: case FileOpKind::kRead:
    case FileOpKind::kFtruncate: case FileOpKind::kFallocate: case FileOpKind::kMmapWrite:
    case FileOpKind::kMmapRead: case FileOpKind::kCopyRange: case FileOpKind::kFsync:
      return true;
    default:
      return false;
  }
}

void DrawParams(FileOp& op, Rng& rng, uint64_t size) {
  static const uint64_t kModes[] = {0644, 0600, 0666, 0755, 0444, 0640};
  static const uint64_t kIds[] = {0, 1, 1000, 65534};
  static const int kFalloc[] = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE};
  op.off = DrawOffset(rng, size);
  op.len = DrawLength(rng);
  op.tag = rng.In(1, UINT64_MAX);
  switch (op.kind) {
    case FileOpKind::kFtruncate:
    case FileOpKind::kTruncate:
      // Down more often than up: shrinking is what loses bytes.
      op.off = size > 0 && rng.Chance(60) ? rng.In(0, size) : DrawOffset(rng, size);
      break;
    case FileOpKind::kLseek: op.flags = rng.Chance(30) ? 1 : 0; if (op.flags) op.off = 0; break;
    case FileOpKind::kFallocate: op.flags = rng.Pick(kFalloc); break;
    case FileOpKind::kFsync: op.flags = rng.Chance(50) ? 1 : 0; break;
    case FileOpKind::kChmod: op.off = rng.Pick(kModes); break;
    case FileOpKind::kChown: op.off = rng.Pick(kIds); op.len = rng.Pick(kIds); break;
    case FileOpKind::kSetXattr:
      op.name = static_cast<int>(rng.In(0, 3));
      op.len = rng.In(0, 200);
      op.flags = rng.Chance(70) ? 0 : (rng.Chance(50) ? XATTR_CREATE : XATTR_REPLACE);
      break;
    case FileOpKind::kGetXattr:
    case FileOpKind::kRemoveXattr:
      op.name = static_cast<int>(rng.In(0, 3));
      break;
    default:
      break;
  }
}

}  // namespace

std::string Pattern(uint64_t tag, size_t len) {
  std::string s(len, '\0');
  uint64_t x = tag * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = static_cast<char>('a' + x % 26);
  }
  return s;
}

std::string Describe(const Outcome& o) {
  std::ostringstream os;
  os << "{rc=" << o.rc << " errno=" << o.err;
  if (o.err != 0) os << " (" << std::strerror(o.err) << ")";
  if (!o.info.empty()) {
    std::string shown = o.info.size() > 160 ? o.info.substr(0, 160) + "..." : o.info;
    for (char& c : shown) {
      if (c != '\n' && (static_cast<unsigned char>(c) < 32 || c == 127)) c = '.';
    }
    os << " info[" << o.info.size() << "]=\"" << shown << "\"";
  }
  return os.str() + "}";
}

std::string Describe(const FileOp& op) {
  static const char* const kNames[] = {
      "open", "close", "pwrite", "write", "lseek", "pread", "read", "ftruncate", "truncate",
      "fallocate", "mmap_write", "mmap_read", "copy_file_range", "fsync", "rename", "link",
      "unlink_link", "unlink", "chmod", "chown", "utimens", "setxattr", "getxattr",
      "removexattr", "listxattr"};
  std::ostringstream os;
  os << kNames[static_cast<int>(op.kind)];
  if (IsFdOp(op.kind) || op.kind == FileOpKind::kOpen) os << " slot=" << op.slot;
  os << " flags=0" << std::oct << op.flags << std::dec << " off=" << op.off << " len=" << op.len
     << " tag=" << op.tag << " name=" << op.name;
  return os.str();
}

FileOp NextFileOp(Rng& rng, const FileSide& ref, const FileRunOptions& o) {
  FileOp op;
  op.kind = DrawKind(rng, o);
  if (IsFdOp(op.kind)) {
    op.slot = SlotFor(op.kind, rng, ref);
    if (op.slot < 0) op.kind = FileOpKind::kOpen;
  }
  if (op.kind == FileOpKind::kOpen) {
    op.slot = -1;
    for (int i = 0; i < kSlots; ++i) {
      if (ref.fds[i] < 0) op.slot = i;
    }
    if (op.slot < 0) {  // every slot taken: close one instead
      op.kind = FileOpKind::kClose;
      op.slot = static_cast<int>(rng.In(0, kSlots - 1));
    }
  }
  DrawParams(op, rng, SizeOf(ref));
  if (op.kind == FileOpKind::kOpen) op.flags = DrawOpenFlags(rng);
  return op;
}

Outcome ApplyFileOp(const FileOp& op, FileSide& side) {
  if (op.kind == FileOpKind::kOpen) {
    if (side.fds[op.slot] >= 0) ::close(side.fds[op.slot]);
    const int fd = ::open(Path(side, side.name).c_str(), op.flags | O_CLOEXEC, 0644);
    side.fds[op.slot] = fd;
    side.flags[op.slot] = op.flags;
    return fd < 0 ? Sys(-1) : Outcome{};
  }
  if (IsFdOp(op.kind)) {
    const int fd = side.fds[op.slot];
    if (fd < 0) return Outcome{-1, EBADF, "slot closed"};
    if (op.kind == FileOpKind::kCopyRange) return CopyRange(op, side, fd);
    return FdOp(op, side, fd);
  }
  return PathOp(op, side);
}

Outcome ObserveFile(FileSide& side, uint64_t step, bool full) {
  Outcome o;
  struct stat st;
  if (::lstat(Path(side, side.name).c_str(), &st) != 0) {
    o.info = "path: " + std::string(std::strerror(errno));
  } else {
    o.info = "path: " + StatInfo(st, false);
  }
  const int open_slot = OpenSlot(side, false, false);
  if (open_slot >= 0 && ::fstat(side.fds[open_slot], &st) == 0) {
    o.info += " | fd: size=" + std::to_string(st.st_size) + " nlink=" + std::to_string(st.st_nlink);
  }
  int slot = OpenSlot(side, false, true);
  int fd = slot >= 0 ? side.fds[slot] : ::open(Path(side, side.name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return o;
  if (::fstat(fd, &st) == 0) {
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    uint64_t from = 0, n = size;
    if (!full && size > kFullCompareMax) {
      from = (step * 7919 * kPage) % size;
      n = std::min(kWindow, size - from);
    }
    std::string buf(n, '\0');
    ssize_t got = ::pread(fd, buf.data(), n, static_cast<off_t>(from));
    o.rc = got;
    o.info += " | bytes@" + std::to_string(from) + ": ";
    if (got > 0) o.info.append(buf.data(), static_cast<size_t>(got));
  }
  if (slot < 0) ::close(fd);
  return o;
}

void CloseAll(FileSide& side) {
  for (int& fd : side.fds) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

namespace {

// Where two observations first differ (bytes can be long).
std::string FirstDifference(const Outcome& a, const Outcome& b) {
  std::ostringstream os;
  os << "mount " << Describe(a) << "\n    local " << Describe(b);
  const size_t n = std::min(a.info.size(), b.info.size());
  size_t i = 0;
  while (i < n && a.info[i] == b.info[i]) ++i;
  if (i < n || a.info.size() != b.info.size()) {
    os << "\n    first difference at info byte " << i << " (lengths " << a.info.size() << " / "
       << b.info.size() << "); mount \"" << a.info.substr(i > 40 ? i - 40 : 0, 100)
       << "\" local \"" << b.info.substr(i > 40 ? i - 40 : 0, 100) << "\"";
  }
  return os.str();
}

bool MakeSide(const std::string& dir, FileSide* s) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    std::fprintf(stderr, "mkdir %s: %s\n", dir.c_str(), std::strerror(errno));
    return false;
  }
  s->dir = dir;
  s->name = "f";
  const std::string src = Pattern(42, kSourceBytes);
  const int fd = ::open((dir + "/g").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  const bool ok = fd >= 0 && ::write(fd, src.data(), src.size()) == static_cast<ssize_t>(src.size());
  if (fd >= 0) ::close(fd);
  return ok;
}

// What close-to-open promises: an open that starts after the last close
// sees the file's size and bytes (stat fields other than the size, and
// names, follow the attribute and entry timeouts).
Outcome OpenView(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Sys(-1);
  Outcome o;
  struct stat st;
  if (::fstat(fd, &st) == 0) {
    std::string buf(static_cast<size_t>(st.st_size), '\0');
    const ssize_t got = ::pread(fd, buf.data(), buf.size(), 0);
    o.rc = got;
    o.info = "size=" + std::to_string(st.st_size) + " bytes: ";
    if (got > 0) o.info.append(buf.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  return o;
}

}  // namespace

std::optional<Mismatch> RunFileOps(const NextOp& next, const std::string& a_dir,
                                   const std::string& b_dir, const std::string& reader_dir,
                                   bool verbose, std::vector<FileOp>* ran) {
  struct sigaction sa {};
  sa.sa_handler = OnBus;
  ::sigaction(SIGBUS, &sa, nullptr);
  FileSide a, b;
  if (!MakeSide(a_dir, &a) || !MakeSide(b_dir, &b)) return Mismatch{0, "could not set up the directories"};
  std::optional<Mismatch> bad;
  uint64_t step = 0;
  for (;; ++step) {
    std::optional<FileOp> op = next(step, b);
    if (!op) break;
    ran->push_back(*op);
    if (verbose) std::fprintf(stderr, "step %lu: %s\n", static_cast<unsigned long>(step), Describe(*op).c_str());
    const Outcome ra = ApplyFileOp(*op, a), rb = ApplyFileOp(*op, b);
    if (!(ra == rb)) {
      bad = Mismatch{step, Describe(*op) + ": " + FirstDifference(ra, rb)};
      break;
    }
    const bool full = step % 32 == 0;
    const Outcome oa = ObserveFile(a, step, full), ob = ObserveFile(b, step, full);
    if (!(oa == ob)) {
      bad = Mismatch{step, "state after " + Describe(*op) + ": " + FirstDifference(oa, ob)};
      break;
    }
    if (!reader_dir.empty() && op->kind == FileOpKind::kClose && OpenSlot(b, false, false) < 0) {
      const Outcome rr = OpenView(reader_dir + "/" + a.name), rf = OpenView(Path(b, b.name));
      if (!(rr == rf)) {
        bad = Mismatch{step, "the other mount after " + Describe(*op) + ": " + FirstDifference(rr, rf)};
        break;
      }
    }
  }
  CloseAll(a);
  CloseAll(b);
  if (bad) return bad;
  const Outcome oa = ObserveFile(a, step, true), ob = ObserveFile(b, step, true);
  if (!(oa == ob)) return Mismatch{step, "state at the end: " + FirstDifference(oa, ob)};
  if (!reader_dir.empty()) {
    const Outcome rr = OpenView(reader_dir + "/" + a.name), rf = OpenView(Path(b, b.name));
    if (!(rr == rf)) return Mismatch{step, "the other mount at the end: " + FirstDifference(rr, rf)};
  }
  return std::nullopt;
}

namespace {

NextOp Replay(const std::vector<FileOp>& ops) {
  return [&ops](uint64_t step, const FileSide&) -> std::optional<FileOp> {
    if (step >= ops.size()) return std::nullopt;
    return ops[step];
  };
}

}  // namespace

bool FileDifferential(const std::string& a_root, const std::string& b_root,
                      const FileRunOptions& o) {
  Rng rng(o.seed);
  const std::string sub = "/file-" + std::to_string(o.seed);
  std::vector<FileOp> ran;
  NextOp gen = [&](uint64_t step, const FileSide& ref) -> std::optional<FileOp> {
    if (step >= o.ops) return std::nullopt;
    return NextFileOp(rng, ref, o);
  };
  std::optional<Mismatch> bad = RunFileOps(gen, a_root + sub, b_root + sub,
                                           o.reader.empty() ? "" : o.reader + sub, o.verbose, &ran);
  if (!bad) {
    std::error_code ec;
    std::filesystem::remove_all(a_root + sub, ec);
    std::filesystem::remove_all(b_root + sub, ec);
    return true;
  }
  std::printf("seed %lu: mismatch at step %lu: %s\n", static_cast<unsigned long>(o.seed),
              static_cast<unsigned long>(bad->step), bad->what.c_str());
  std::vector<FileOp> prefix(ran.begin(), ran.begin() + static_cast<long>(std::min<size_t>(bad->step + 1, ran.size())));
  const std::string reader_sub = o.reader.empty() ? "" : o.reader + sub;
  std::function<bool(const std::vector<FileOp>&, int)> fails = [&](const std::vector<FileOp>& ops,
                                                                   int trial) {
    const std::string t = "/shrink" + std::to_string(trial);
    std::vector<FileOp> again;
    std::optional<Mismatch> m = RunFileOps(Replay(ops), a_root + sub + t, b_root + sub + t,
                                           reader_sub.empty() ? "" : reader_sub + t, false, &again);
    // The same failure: the original failing step, failing as the last one
    // (or the end-of-run check failing where the original did).
    const bool bad_again = m && !ops.empty() && m->step + 1 >= ops.size() &&
                           Describe(ops.back()) == Describe(prefix.back());
    std::error_code ec;
    std::filesystem::remove_all(a_root + sub + t, ec);
    std::filesystem::remove_all(b_root + sub + t, ec);
    return bad_again;
  };
  std::vector<FileOp> shortest = Shrink(prefix, fails, o.shrink_seconds);
  std::printf("seed %lu: shortest failing sequence found (%zu of %zu steps):\n",
              static_cast<unsigned long>(o.seed), shortest.size(), prefix.size());
  for (const FileOp& op : shortest) std::printf("  %s\n", Describe(op).c_str());
  std::printf("replay: clf_torture file MOUNT_DIR LOCAL_DIR --seed %lu --ops %lu%s%s\n",
              static_cast<unsigned long>(o.seed), static_cast<unsigned long>(bad->step + 1),
              o.mmap ? "" : " --no-mmap", o.reader.empty() ? "" : " --reader DIR");
  std::fflush(stdout);
  return false;
}

}  // namespace clf::torture
