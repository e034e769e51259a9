// clf_mount_helper: small programs the mount tests run as separate processes
// (spawned with posix_spawn, some through `runuser -u nobody`).
//
//   clf_mount_helper write PATH OFFSET LENGTH SEED
//       pwrite the deterministic pattern (test/support/pattern.h) over
//       [OFFSET, OFFSET+LENGTH) of PATH in 1 MiB calls, then fsync.
//   clf_mount_helper perm ROOT
//       the unprivileged-user script: one "step errno" line per step, run
//       against the tree the test prepared below ROOT (see mount_posix_test.cc).
//   clf_mount_helper storm ROOT WORKER MILLIS
//       the crash-storm worker (mount_crash_test.cc): for MILLIS ms creates
//       files in ROOT/d0..d3 (O_EXCL, a pattern, fsync, close), unlinks some,
//       renames some within a directory and across directories; then prints
//       "file PATH SEED LENGTH" for every file whose create, write, fsync and
//       close succeeded and that it did not remove (a failed unlink, or a
//       rename that failed or whose directories' fsync failed, leaves the
//       file's place unknown: it is not listed), and "ops N errors E".
//   clf_mount_helper locker PATH
//       a classic fcntl lock owner (this process): opens PATH and answers one
//       line per command read from stdin: "set T START LEN" (F_SETLK, T = r w
//       u) -> errno (0 = done); "get T START LEN" (F_GETLK) -> "T START LEN
//       PID" of the conflicting lock or "u 0 0 0"; "pid" -> its pid.
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "test/support/pattern.h"

namespace {

int Write(const char* path, uint64_t offset, uint64_t length, uint64_t seed) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "open %s: %s\n", path, std::strerror(errno));
    return 1;
  }
  constexpr uint64_t kChunk = 1 << 20;
  for (uint64_t done = 0; done < length;) {
    uint64_t n = std::min(kChunk, length - done);
    std::string buf = clf::testing::PatternBytes(seed, offset + done, n);
    ssize_t w = ::pwrite(fd, buf.data(), buf.size(), static_cast<off_t>(offset + done));
    if (w <= 0) {
      std::fprintf(stderr, "pwrite %s at %llu: %s\n", path,
                   static_cast<unsigned long long>(offset + done), std::strerror(errno));
      return 1;
    }
    done += static_cast<uint64_t>(w);
  }
  if (::fsync(fd) != 0) {
    std::fprintf(stderr, "fsync %s: %s\n", path, std::strerror(errno));
    return 1;
  }
  if (::close(fd) != 0) {
    std::fprintf(stderr, "close %s: %s\n", path, std::strerror(errno));
    return 1;
  }
  return 0;
}

// Returns 0 or the errno of a failed call.
int Err(int rc) { return rc < 0 ? errno : 0; }
int OpenClose(const std::string& p, int flags, mode_t mode = 0644) {
  int fd = ::open(p.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// The permission bits of `p` (an int that is not an errno: the caller knows the step).
// Runs `p` (no arguments): its exit status, or the errno of a failed exec.
int Exec(const std::string& p) {
  pid_t pid;
  char* argv[] = {const_cast<char*>(p.c_str()), nullptr};
  char* envp[] = {nullptr};
  int rc = ::posix_spawn(&pid, p.c_str(), nullptr, nullptr, argv, envp);
  if (rc != 0) return rc;
  int st = 0;
  if (::waitpid(pid, &st, 0) < 0) return errno;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

int ModeOf(const std::string& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return -errno;
  return static_cast<int>(st.st_mode & 07777);
}

int Perm(const std::string& root) {
  const std::string p = root + "/p";
  std::vector<std::pair<std::string, std::function<int()>>> steps = {
      {"read_secret", [&] { return OpenClose(p + "/secret", O_RDONLY); }},
      {"access_secret_r", [&] { return Err(::access((p + "/secret").c_str(), R_OK)); }},
      {"write_pub", [&] { return OpenClose(p + "/pub", O_WRONLY); }},
      {"read_pub", [&] { return OpenClose(p + "/pub", O_RDONLY); }},
      {"truncate_pub", [&] { return Err(::truncate((p + "/pub").c_str(), 0)); }},
      {"create_in_p", [&] { return OpenClose(p + "/new", O_CREAT | O_WRONLY); }},
      {"mkdir_in_p", [&] { return Err(::mkdir((p + "/newdir").c_str(), 0755)); }},
      {"symlink_in_p", [&] { return Err(::symlink("pub", (p + "/sl").c_str())); }},
      {"unlink_pub", [&] { return Err(::unlink((p + "/pub").c_str())); }},
      {"rename_pub",
       [&] { return Err(::rename((p + "/pub").c_str(), (p + "/open/pub").c_str())); }},
      {"rmdir_closed", [&] { return Err(::rmdir((p + "/closed").c_str())); }},
      {"list_closed",
       [&] {
         DIR* d = ::opendir((p + "/closed").c_str());
         if (d == nullptr) return errno;
         ::closedir(d);
         return 0;
       }},
      {"stat_in_closed",
       [&] {
         struct stat st;
         return Err(::stat((p + "/closed/x").c_str(), &st));
       }},
      {"stat_missing_in_closed",
       [&] {
         struct stat st;
         return Err(::stat((p + "/closed/none").c_str(), &st));
       }},
      // Executing needs the x bit, not read: a 0711 program runs, a 0700 one does not.
      {"exec_xonly", [&] { return Exec(p + "/xonly"); }},
      {"read_xonly", [&] { return OpenClose(p + "/xonly", O_RDONLY); }},
      {"exec_xsecret", [&] { return Exec(p + "/xsecret"); }},
      {"chmod_pub", [&] { return Err(::chmod((p + "/pub").c_str(), 0666)); }},
      {"utimes_pub_explicit",
       [&] {
         struct timespec ts[2] = {{1000, 0}, {2000, 0}};
         return Err(::utimensat(AT_FDCWD, (p + "/pub").c_str(), ts, 0));
       }},
      {"utimes_pub_now",
       [&] { return Err(::utimensat(AT_FDCWD, (p + "/pub").c_str(), nullptr, 0)); }},
      {"setxattr_pub", [&] { return Err(::setxattr((p + "/pub").c_str(), "user.x", "1", 1, 0)); }},
      {"link_secret",
       [&] { return Err(::link((p + "/secret").c_str(), (p + "/open/l").c_str())); }},
      {"create_in_open", [&] { return OpenClose(p + "/open/mine", O_CREAT | O_WRONLY, 0644); }},
      {"chmod_mine", [&] { return Err(::chmod((p + "/open/mine").c_str(), 0600)); }},
      {"chown_mine_root", [&] { return Err(::chown((p + "/open/mine").c_str(), 0, 0)); }},
      {"utimes_mine_explicit",
       [&] {
         struct timespec ts[2] = {{1000, 0}, {2000, 0}};
         return Err(::utimensat(AT_FDCWD, (p + "/open/mine").c_str(), ts, 0));
       }},
      {"unlink_sticky_rootfile", [&] { return Err(::unlink((p + "/sticky/rootfile").c_str())); }},
      {"write_sticky_rootfile", [&] { return OpenClose(p + "/sticky/rootfile", O_WRONLY); }},
      {"unlink_mine", [&] { return Err(::unlink((p + "/open/mine").c_str())); }},
      {"exec_noexec", [&] { return Err(::access((p + "/pub").c_str(), X_OK)); }},
      // Kill-priv: a writer who is not the owner clears setuid/setgid (group
      // executable) by writing or truncating; the "mode_" steps print the mode.
      {"write_suid_ww",
       [&] {
         int fd = ::open((p + "/suidw").c_str(), O_WRONLY | O_CLOEXEC);
         if (fd < 0) return errno;
         int e = ::write(fd, "w", 1) == 1 ? 0 : errno;
         ::close(fd);
         return e;
       }},
      {"mode_after_write", [&] { return ModeOf(p + "/suidw"); }},
      {"truncate_suid_ww", [&] { return Err(::truncate((p + "/suidt").c_str(), 1)); }},
      {"mode_after_truncate", [&] { return ModeOf(p + "/suidt"); }},
      {"ftruncate_suid_ww",
       [&] {
         int fd = ::open((p + "/suidf").c_str(), O_WRONLY | O_CLOEXEC);
         if (fd < 0) return errno;
         int e = Err(::ftruncate(fd, 2));
         ::close(fd);
         return e;
       }},
      {"mode_after_ftruncate", [&] { return ModeOf(p + "/suidf"); }},
      // Permission granted at open holds for the descriptor: mode 0, then ftruncate and write.
      {"creat_mode0_ftruncate",
       [&] {
         int fd = ::open((p + "/open/zero").c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0);
         if (fd < 0) return errno;
         int e = Err(::ftruncate(fd, 100));
         if (e == 0 && ::pwrite(fd, "z", 1, 5) != 1) e = errno;
         ::close(fd);
         return e;
       }},
      {"mode_of_mode0", [&] { return ModeOf(p + "/open/zero"); }},
      // Times set to now by a writer who is not the owner; explicit times stay owner-only.
      {"utimes_now_ww",
       [&] { return Err(::utimensat(AT_FDCWD, (p + "/ww").c_str(), nullptr, 0)); }},
      {"utimes_now_now_ww",
       [&] {
         struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
         return Err(::utimensat(AT_FDCWD, (p + "/ww").c_str(), ts, 0));
       }},
      {"utimes_explicit_ww",
       [&] {
         struct timespec ts[2] = {{1000, 0}, {2000, 0}};
         return Err(::utimensat(AT_FDCWD, (p + "/ww").c_str(), ts, 0));
       }},
  };
  for (auto& [name, fn] : steps) std::printf("%s %d\n", name.c_str(), fn());
  return 0;
}

int Locker(const char* path) {
  int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::printf("open %d\n", errno);
    return 1;
  }
  char line[256];
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
    char cmd[16] = {0}, t = 'u';
    long long start = 0, len = 0;
    int n = std::sscanf(line, "%15s %c %lld %lld", cmd, &t, &start, &len);
    if (n >= 1 && std::strcmp(cmd, "pid") == 0) {
      std::printf("%d\n", static_cast<int>(::getpid()));
      continue;
    }
    if (n != 4) {
      std::printf("bad\n");
      continue;
    }
    struct flock fl {};
    fl.l_type = t == 'r' ? F_RDLCK : t == 'w' ? F_WRLCK : F_UNLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = len;
    if (std::strcmp(cmd, "set") == 0) {
      std::printf("%d\n", ::fcntl(fd, F_SETLK, &fl) == 0 ? 0 : errno);
    } else if (std::strcmp(cmd, "get") == 0) {
      if (::fcntl(fd, F_GETLK, &fl) != 0) {
        std::printf("e %d 0 0\n", errno);
      } else {
        std::printf("%c %lld %lld %d\n",
                    fl.l_type == F_RDLCK   ? 'r'
                    : fl.l_type == F_WRLCK ? 'w'
                                           : 'u',
                    fl.l_type == F_UNLCK ? 0LL : static_cast<long long>(fl.l_start),
                    fl.l_type == F_UNLCK ? 0LL : static_cast<long long>(fl.l_len),
                    fl.l_type == F_UNLCK ? 0 : static_cast<int>(fl.l_pid));
      }
    } else {
      std::printf("bad\n");
    }
  }
  ::close(fd);
  return 0;
}

}  // namespace

// The storm worker: see the header.
int Storm(const std::string& root, unsigned worker, long millis) {
  struct Tracked {
    std::string path;
    uint64_t seed;
    size_t len;
  };
  std::vector<Tracked> files;
  uint64_t rng = 0x9e3779b97f4a7c15ull * (worker + 1);
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  auto dir = [&](uint64_t r) { return root + "/d" + std::to_string(r % 4); };
  timespec t0;
  ::clock_gettime(CLOCK_MONOTONIC, &t0);
  auto elapsed_ms = [&t0] {
    timespec t;
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
  };
  uint64_t ops = 0, errors = 0, counter = 0;
  while (elapsed_ms() < millis) {
    ++ops;
    const uint64_t r = next();
    const unsigned what = files.size() < 8 ? 0 : static_cast<unsigned>(r % 10);
    if (what < 5) {  // create + write + fsync + close
      const std::string path =
          dir(r >> 8) + "/w" + std::to_string(worker) + "_" + std::to_string(counter++);
      const uint64_t seed = worker * 1000000ull + counter;
      const size_t len = 1 + (r >> 16) % 40000;
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        ++errors;
        continue;
      }
      const std::string data = clf::testing::PatternBytes(seed, 0, len);
      bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
      ok = ::fsync(fd) == 0 && ok;
      ok = ::close(fd) == 0 && ok;
      if (ok) {
        files.push_back({path, seed, len});
      } else {
        ++errors;
      }
    } else if (what < 7) {  // unlink
      const size_t i = (r >> 8) % files.size();
      if (::unlink(files[i].path.c_str()) != 0) ++errors;
      files.erase(files.begin() + static_cast<long>(i));  // removed, or its state is unknown
    } else {  // rename, within the directory or to another one
      const size_t i = (r >> 8) % files.size();
      const std::string to = (what == 7 ? files[i].path.substr(0, files[i].path.rfind('/'))
                                        : dir(r >> 20)) +
                             "/r" + std::to_string(worker) + "_" + std::to_string(counter++);
      // A rename is durable once the directories are synced (as on a local
      // file system): the mount may acknowledge it under a directory lease
      // and commit it later, and a server killed before that commit loses
      // it. Synced, or its place is unknown.
      auto sync_dir = [](const std::string& file) {
        const std::string d = file.substr(0, file.rfind('/'));
        int dfd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return false;
        const bool ok = ::fsync(dfd) == 0;
        ::close(dfd);
        return ok;
      };
      const std::string from = files[i].path;
      if (::rename(from.c_str(), to.c_str()) == 0 && sync_dir(to) && sync_dir(from)) {
        files[i].path = to;
      } else {
        ++errors;
        files.erase(files.begin() + static_cast<long>(i));
      }
    }
  }
  for (const Tracked& f : files) std::printf("file %s %llu %zu\n", f.path.c_str(),
                                             static_cast<unsigned long long>(f.seed), f.len);
  std::printf("ops %llu errors %llu\n", static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(errors));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "locker") return Locker(argv[2]);
  if (argc == 6 && std::string(argv[1]) == "write") {
    return Write(argv[2], std::strtoull(argv[3], nullptr, 10), std::strtoull(argv[4], nullptr, 10),
                 std::strtoull(argv[5], nullptr, 10));
  }
  if (argc == 3 && std::string(argv[1]) == "perm") return Perm(argv[2]);
  if (argc == 5 && std::string(argv[1]) == "storm") {
    return Storm(argv[2], static_cast<unsigned>(std::strtoul(argv[3], nullptr, 10)),
                 std::strtol(argv[4], nullptr, 10));
  }
  std::fprintf(stderr, "usage: %s write PATH OFFSET LENGTH SEED | perm ROOT\n", argv[0]);
  return 2;
}
