// powercut_fs: a FUSE passthrough that forgets everything not fsync'd when the
// test "cuts the power" (the lazyfs approach), for the power-loss test.
//
//   powercut_fs BACKING MOUNTPOINT [fuse options, e.g. -f]
//
// Model (what survives a power cut):
// - File data is volatile until fsync. Every write and every truncate
//   (ftruncate, truncate, O_TRUNC) of a regular file goes to an in-memory copy
//   of that file (its pending state, keyed by the backing inode, so it follows
//   renames and hard links); reads and getattr see the pending state. fsync or
//   fdatasync of a descriptor of that file writes the file's whole pending
//   state (size and changed bytes) to the backing file and drops it. O_SYNC /
//   O_DSYNC descriptors apply after each write (the kernel also sends fsync).
//   Nothing else makes data durable: syncfs(2) and sync(2) do not reach a FUSE
//   daemon and sync_file_range(2) only writes back the kernel's page cache, so
//   here they are no-ops (stricter than a disk file system). close() does not
//   apply anything either.
// - Namespace and attribute operations are durable at once, like the metadata
//   journal of ext4 or xfs: create, mknod, mkdir, unlink, rmdir, rename (with
//   its flags, e.g. RENAME_NOREPLACE), link, symlink, chmod, chown, utimens.
//   A new file's name survives a cut even if neither it nor its directory was
//   fsync'd (its contents do not). fsync of a directory (fsyncdir) therefore
//   has nothing to apply. The stricter model (reverting creates and renames
//   whose parent directory was not fsync'd) is not implemented.
// - The power cut: writing "cut" to the control file MOUNTPOINT/.powercut.
//   Under the one lock every operation holds, it drops every pending state and
//   from then on every operation fails with EIO (except getattr of the root,
//   statfs and release, so the mount can be unmounted) until unmount. When
//   the write returns, the cut is complete: no later operation can make
//   anything durable. Mounting the backing directory again gives exactly what
//   a machine would find after the power came back. Reading the control file
//   gives a status line: "cut=0 pending_files=N pending_bytes=B applied=K".
// - The backing file system is taken never to lose power: applying a pending
//   state does not fsync the backing file (the test only cuts this one).
// - Files are held whole in memory while they have pending state (limit 1 GiB
//   per file: EFBIG beyond); no fallocate (EOPNOTSUPP), no xattrs, no locks
//   (the kernel handles flock/fcntl locks locally). Every request runs under
//   one mutex: simple and fast enough for a test. Test support, not product.
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr const char* kControl = "/.powercut";
constexpr uint64_t kMaxFile = 1ull << 30;
constexpr uint64_t kControlFh = ~0ull;

// A regular file's writes and truncates since its last fsync: the whole file
// as the application sees it, and the range that differs from the backing file
// (bytes [lo, hi) plus the size).
struct Pending {
  std::string data;
  uint64_t lo = ~0ull, hi = 0;
};

struct Handle {
  int fd;
  ino_t ino;
  bool sync;  // O_SYNC or O_DSYNC
};

std::mutex mu;
int backing = -1;  // O_PATH descriptor of the backing directory
bool cut = false;
std::map<ino_t, Pending> pending;
std::map<ino_t, int> opens;  // open descriptors per inode
uint64_t applied = 0;

std::string Rel(const char* path) {
  if (path == nullptr || std::strcmp(path, "/") == 0) return ".";
  return std::string(path + 1);
}

Handle* H(fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

bool IsControl(const char* path) { return path != nullptr && std::strcmp(path, kControl) == 0; }

// Loads the backing file into a pending state if it has none yet.
int Load(ino_t ino, int fd, Pending** out) {
  auto it = pending.find(ino);
  if (it == pending.end()) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return -errno;
    if (static_cast<uint64_t>(st.st_size) > kMaxFile) return -EFBIG;
    Pending p;
    p.data.assign(static_cast<size_t>(st.st_size), '\0');
    size_t done = 0;
    while (done < p.data.size()) {
      ssize_t n = ::pread(fd, p.data.data() + done, p.data.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return -errno;
      if (n == 0) break;  // shorter than fstat said: the rest reads as zeros
      done += static_cast<size_t>(n);
    }
    it = pending.emplace(ino, std::move(p)).first;
  }
  *out = &it->second;
  return 0;
}

int PendingTruncate(ino_t ino, int fd, uint64_t size) {
  if (size > kMaxFile) return -EFBIG;
  Pending* p;
  if (int r = Load(ino, fd, &p); r != 0) return r;
  const uint64_t old = p->data.size();
  // Bytes between the new size and the old one must read as zeros if the file
  // grows again, so the backing file needs them rewritten: mark them dirty.
  p->lo = std::min(p->lo, std::min(old, size));
  p->hi = std::max(p->hi, std::max(old, size));
  p->data.resize(static_cast<size_t>(size), '\0');
  return 0;
}

// Writes ino's pending state to the backing file through fd and drops it.
int Apply(ino_t ino, int fd) {
  auto it = pending.find(ino);
  if (it == pending.end()) return 0;
  Pending& p = it->second;
  const uint64_t size = p.data.size();
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return -errno;
  const uint64_t hi = std::min(p.hi, size);
  for (uint64_t off = p.lo; off < hi;) {
    ssize_t n = ::pwrite(fd, p.data.data() + off, hi - off, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? -errno : -EIO;
    off += static_cast<uint64_t>(n);
  }
  pending.erase(it);
  ++applied;
  return 0;
}

// After `rel` lost a name (unlink, rename over it): if that was its last name
// and nothing has it open, its inode number may be reused: forget its state.
void ForgetIfGone(ino_t ino, nlink_t nlink_before) {
  if (nlink_before <= 1 && opens.count(ino) == 0) pending.erase(ino);
}

#define LOCKED_OR_EIO()              \
  std::lock_guard<std::mutex> l(mu); \
  if (cut) return -EIO

void* Init(fuse_conn_info* conn, fuse_config* cfg) {
  cfg->use_ino = 1;
  cfg->hard_remove = 1;
  cfg->nullpath_ok = 1;
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->direct_io = 0;
  cfg->kernel_cache = 0;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;  // writes must reach us at once
  return nullptr;
}

int GetAttr(const char* path, struct stat* st, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  if (IsControl(path) || (fi != nullptr && fi->fh == kControlFh)) {
    std::memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG | 0600;
    st->st_nlink = 1;
    return 0;
  }
  const bool root = path != nullptr && std::strcmp(path, "/") == 0;
  if (cut && !root) return -EIO;
  int rc = (fi != nullptr && fi->fh != 0) ? ::fstat(H(fi)->fd, st)
                                          : ::fstatat(backing, Rel(path).c_str(), st,
                                                      AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH);
  if (rc != 0) return -errno;
  auto it = pending.find(st->st_ino);
  if (S_ISREG(st->st_mode) && it != pending.end()) {
    st->st_size = static_cast<off_t>(it->second.data.size());
    st->st_blocks = static_cast<blkcnt_t>((it->second.data.size() + 511) / 512);
  }
  return 0;
}

int Access(const char* path, int mask) {
  if (IsControl(path)) return 0;
  LOCKED_OR_EIO();
  return ::faccessat(backing, Rel(path).c_str(), mask, 0) == 0 ? 0 : -errno;
}

int Readlink(const char* path, char* buf, size_t size) {
  LOCKED_OR_EIO();
  ssize_t n = ::readlinkat(backing, Rel(path).c_str(), buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}

int Mknod(const char* path, mode_t mode, dev_t rdev) {
  LOCKED_OR_EIO();
  return ::mknodat(backing, Rel(path).c_str(), mode, rdev) == 0 ? 0 : -errno;
}

int Mkdir(const char* path, mode_t mode) {
  LOCKED_OR_EIO();
  return ::mkdirat(backing, Rel(path).c_str(), mode) == 0 ? 0 : -errno;
}

int Unlink(const char* path) {
  LOCKED_OR_EIO();
  struct stat st;
  if (::fstatat(backing, Rel(path).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  if (::unlinkat(backing, Rel(path).c_str(), 0) != 0) return -errno;
  ForgetIfGone(st.st_ino, st.st_nlink);
  return 0;
}

int Rmdir(const char* path) {
  LOCKED_OR_EIO();
  return ::unlinkat(backing, Rel(path).c_str(), AT_REMOVEDIR) == 0 ? 0 : -errno;
}

int Symlink(const char* target, const char* path) {
  LOCKED_OR_EIO();
  return ::symlinkat(target, backing, Rel(path).c_str()) == 0 ? 0 : -errno;
}

int Rename(const char* from, const char* to, unsigned int flags) {
  LOCKED_OR_EIO();
  struct stat st;
  const bool replaced = (flags & RENAME_EXCHANGE) == 0 &&
                        ::fstatat(backing, Rel(to).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (::renameat2(backing, Rel(from).c_str(), backing, Rel(to).c_str(), flags) != 0) return -errno;
  if (replaced) ForgetIfGone(st.st_ino, st.st_nlink);
  return 0;
}

int Link(const char* from, const char* to) {
  LOCKED_OR_EIO();
  return ::linkat(backing, Rel(from).c_str(), backing, Rel(to).c_str(), 0) == 0 ? 0 : -errno;
}

int Chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  if (IsControl(path) || (fi != nullptr && fi->fh == kControlFh)) return 0;
  LOCKED_OR_EIO();
  int rc = fi != nullptr ? ::fchmod(H(fi)->fd, mode) : ::fchmodat(backing, Rel(path).c_str(), mode, 0);
  return rc == 0 ? 0 : -errno;
}

int Chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
  if (IsControl(path) || (fi != nullptr && fi->fh == kControlFh)) return 0;
  LOCKED_OR_EIO();
  int rc = fi != nullptr ? ::fchown(H(fi)->fd, uid, gid)
                         : ::fchownat(backing, Rel(path).c_str(), uid, gid, AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? 0 : -errno;
}

int Utimens(const char* path, const struct timespec tv[2], fuse_file_info* fi) {
  if (IsControl(path) || (fi != nullptr && fi->fh == kControlFh)) return 0;
  LOCKED_OR_EIO();
  int rc = fi != nullptr ? ::futimens(H(fi)->fd, tv)
                         : ::utimensat(backing, Rel(path).c_str(), tv, AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? 0 : -errno;
}

int Truncate(const char* path, off_t size, fuse_file_info* fi) {
  if (IsControl(path) || (fi != nullptr && fi->fh == kControlFh)) return 0;
  LOCKED_OR_EIO();
  if (size < 0) return -EINVAL;
  if (fi != nullptr) return PendingTruncate(H(fi)->ino, H(fi)->fd, static_cast<uint64_t>(size));
  int fd = ::openat(backing, Rel(path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -errno;
  struct stat st;
  int rc = ::fstat(fd, &st) != 0 ? -errno : (S_ISDIR(st.st_mode) ? -EISDIR : 0);
  if (rc == 0) rc = PendingTruncate(st.st_ino, fd, static_cast<uint64_t>(size));
  ::close(fd);
  return rc;
}

// Opens the backing file read-write whatever the caller asked (fsync through a
// read-only descriptor must be able to apply), without O_TRUNC (a pending
// truncate instead) and O_APPEND (pwrite would append: the kernel passes the
// offset). Tracks the open for ForgetIfGone.
int OpenBacking(const char* path, fuse_file_info* fi, bool create, mode_t mode) {
  int flags = fi->flags & ~(O_TRUNC | O_APPEND | O_ACCMODE | O_CREAT | O_EXCL);
  if (create) flags |= O_CREAT | (fi->flags & O_EXCL);
  int fd = ::openat(backing, Rel(path).c_str(), flags | O_RDWR | O_CLOEXEC, mode);
  if (fd < 0 && (errno == EACCES || errno == EROFS || errno == ETXTBSY)) {
    fd = ::openat(backing, Rel(path).c_str(), flags | (fi->flags & O_ACCMODE) | O_CLOEXEC, mode);
  }
  if (fd < 0) return -errno;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return -e;
  }
  if ((fi->flags & O_TRUNC) != 0 && S_ISREG(st.st_mode)) {
    auto it = pending.find(st.st_ino);
    if (st.st_size != 0 || (it != pending.end() && !it->second.data.empty())) {
      if (int r = PendingTruncate(st.st_ino, fd, 0); r != 0) {
        ::close(fd);
        return r;
      }
    }
  }
  ++opens[st.st_ino];
  fi->fh = reinterpret_cast<uint64_t>(
      new Handle{fd, st.st_ino, (fi->flags & (O_SYNC | O_DSYNC)) != 0});
  return 0;
}

int Open(const char* path, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  if (IsControl(path)) {
    fi->fh = kControlFh;
    fi->direct_io = 1;
    return 0;
  }
  if (cut) return -EIO;
  return OpenBacking(path, fi, false, 0);
}

int Create(const char* path, mode_t mode, fuse_file_info* fi) {
  LOCKED_OR_EIO();
  return OpenBacking(path, fi, true, mode);
}

int Read(const char* path, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  if (fi->fh == kControlFh) {
    uint64_t bytes = 0;
    for (const auto& [ino, p] : pending) bytes += p.data.size();
    char line[160];
    int n = std::snprintf(line, sizeof line, "cut=%d pending_files=%zu pending_bytes=%llu applied=%llu\n",
                          cut ? 1 : 0, pending.size(), static_cast<unsigned long long>(bytes),
                          static_cast<unsigned long long>(applied));
    if (off >= n) return 0;
    size_t len = std::min(size, static_cast<size_t>(n - off));
    std::memcpy(buf, line + off, len);
    return static_cast<int>(len);
  }
  (void)path;
  if (cut) return -EIO;
  Handle* h = H(fi);
  auto it = pending.find(h->ino);
  if (it != pending.end()) {
    const std::string& d = it->second.data;
    if (static_cast<uint64_t>(off) >= d.size()) return 0;
    size_t len = std::min(size, d.size() - static_cast<size_t>(off));
    std::memcpy(buf, d.data() + off, len);
    return static_cast<int>(len);
  }
  ssize_t n = ::pread(h->fd, buf, size, off);
  return n < 0 ? -errno : static_cast<int>(n);
}

int Write(const char* path, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  (void)path;
  if (fi->fh == kControlFh) {
    if (size >= 3 && std::memcmp(buf, "cut", 3) == 0) {
      cut = true;
      pending.clear();
      return static_cast<int>(size);
    }
    return -EINVAL;
  }
  if (cut) return -EIO;
  if (off < 0) return -EINVAL;
  if (static_cast<uint64_t>(off) + size > kMaxFile) return -EFBIG;
  Handle* h = H(fi);
  Pending* p;
  if (int r = Load(h->ino, h->fd, &p); r != 0) return r;
  const size_t end = static_cast<size_t>(off) + size;
  if (p->data.size() < end) p->data.resize(end, '\0');
  std::memcpy(p->data.data() + off, buf, size);
  p->lo = std::min<uint64_t>(p->lo, static_cast<uint64_t>(off));
  p->hi = std::max<uint64_t>(p->hi, end);
  if (h->sync) {
    if (int r = Apply(h->ino, h->fd); r != 0) return r;
  }
  return static_cast<int>(size);
}

int StatFs(const char* path, struct statvfs* st) {
  (void)path;
  std::lock_guard<std::mutex> l(mu);
  return ::fstatvfs(backing, st) == 0 ? 0 : -errno;
}

int Flush(const char*, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  return (cut && fi->fh != kControlFh) ? -EIO : 0;
}

int Release(const char*, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  if (fi->fh == kControlFh) return 0;
  Handle* h = H(fi);
  struct stat st;
  const bool gone = ::fstat(h->fd, &st) == 0 && st.st_nlink == 0;
  ::close(h->fd);
  if (--opens[h->ino] == 0) {
    opens.erase(h->ino);
    if (gone) pending.erase(h->ino);  // unlinked and closed: its number may be reused
  }
  delete h;
  return 0;
}

int Fsync(const char*, int /*datasync*/, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  if (fi->fh == kControlFh) return 0;
  if (cut) return -EIO;
  return Apply(H(fi)->ino, H(fi)->fd);
}

int OpenDir(const char* path, fuse_file_info* fi) {
  LOCKED_OR_EIO();
  int fd = ::openat(backing, Rel(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int e = errno;
    ::close(fd);
    return -e;
  }
  fi->fh = reinterpret_cast<uint64_t>(d);
  return 0;
}

int ReadDir(const char*, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info* fi,
            fuse_readdir_flags) {
  LOCKED_OR_EIO();
  DIR* d = reinterpret_cast<DIR*>(fi->fh);
  ::rewinddir(d);
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    struct stat st {};
    st.st_ino = e->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(e->d_type));
    if (fill(buf, e->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  return errno == 0 ? 0 : -errno;
}

int ReleaseDir(const char*, fuse_file_info* fi) {
  std::lock_guard<std::mutex> l(mu);
  ::closedir(reinterpret_cast<DIR*>(fi->fh));
  return 0;
}

// Namespace operations are durable when they return: nothing to apply.
int FsyncDir(const char*, int, fuse_file_info*) {
  LOCKED_OR_EIO();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s BACKING MOUNTPOINT [fuse options]\n", argv[0]);
    return 2;
  }
  backing = ::open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (backing < 0) {
    std::fprintf(stderr, "powercut_fs: cannot open %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  std::vector<char*> args;
  args.push_back(argv[0]);
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  fuse_operations ops{};
  ops.init = Init;
  ops.getattr = GetAttr;
  ops.access = Access;
  ops.readlink = Readlink;
  ops.mknod = Mknod;
  ops.mkdir = Mkdir;
  ops.unlink = Unlink;
  ops.rmdir = Rmdir;
  ops.symlink = Symlink;
  ops.rename = Rename;
  ops.link = Link;
  ops.chmod = Chmod;
  ops.chown = Chown;
  ops.utimens = Utimens;
  ops.truncate = Truncate;
  ops.open = Open;
  ops.create = Create;
  ops.read = Read;
  ops.write = Write;
  ops.statfs = StatFs;
  ops.flush = Flush;
  ops.release = Release;
  ops.fsync = Fsync;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.releasedir = ReleaseDir;
  ops.fsyncdir = FsyncDir;
  return fuse_main(static_cast<int>(args.size()) - 1, args.data(), &ops, nullptr);
}
