// clf_torture: differential random testing of a mount against a local file
// system. Usage:
//   clf_torture file MOUNT_DIR LOCAL_DIR [--seed N] [--seeds K] [--ops N]
//               [--reader DIR] [--no-mmap] [-v]
//   clf_torture perm MOUNT_DIR LOCAL_DIR [--seed N] [--seeds K] [--ops N] [-v]
// Seeds N .. N+K-1 each run --ops steps. `--reader DIR`: MOUNT_DIR as a second
// mount shows it (close-to-open checks). Prints one line per failing seed with
// its shortest failing sequence, then "torture MODE: N of K seeds clean, N failed"; exits 1
// if any seed failed.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "test/torture/file_ops.h"
#include "test/torture/perm_ops.h"

namespace {

using namespace clf::torture;

struct Args {
  std::string mode, a, b, reader;
  uint64_t seed = 1, seeds = 1, ops = 1000;
  bool mmap = true, verbose = false;
  int shrink_seconds = 120;
};

bool Parse(int argc, char** argv, Args* a) {
  if (argc < 4) return false;
  a->mode = argv[1];
  a->a = argv[2];
  a->b = argv[3];
  for (int i = 4; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (k == "--no-mmap") {
      a->mmap = false;
    } else if (k == "-v") {
      a->verbose = true;
    } else if (k == "--shrink-seconds") {
      const char* v = value();
      if (v == nullptr) return false;
      a->shrink_seconds = std::atoi(v);
    } else if (k == "--seed" || k == "--seeds" || k == "--ops" || k == "--reader") {
      const char* v = value();
      if (v == nullptr) return false;
      if (k == "--reader") {
        a->reader = v;
      } else {
        char* end = nullptr;
        const uint64_t n = std::strtoull(v, &end, 10);
        if (*end != '\0') return false;
        (k == "--seed" ? a->seed : k == "--seeds" ? a->seeds : a->ops) = n;
      }
    } else {
      return false;
    }
  }
  return a->mode == "file" || a->mode == "perm";
}

// Whether `dir` supports `what` on a fresh file: fallocate, or a shared
// writable mapping of a file open for reading and writing.
bool Supports(const std::string& dir, const char* what) {
  const std::string p = dir + "/.torture-probe";
  const int fd = ::open(p.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = false;
  if (std::strcmp(what, "fallocate") == 0) {
    ok = ::fallocate(fd, 0, 0, 4096) == 0;
  } else if (::ftruncate(fd, 4096) == 0) {
    void* m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ok = m != MAP_FAILED;
    if (ok) ::munmap(m, 4096);
  }
  if (!ok) std::printf("%s: not supported on %s (%s): not exercised\n", what, dir.c_str(), std::strerror(errno));
  ::close(fd);
  ::unlink(p.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: clf_torture file|perm MOUNT_DIR LOCAL_DIR [--seed N] [--seeds K] "
                 "[--ops N] [--reader DIR] [--no-mmap] [--shrink-seconds S] [-v]\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  FileRunOptions fo;
  fo.ops = args.ops;
  fo.reader = args.reader;
  fo.verbose = args.verbose;
  fo.shrink_seconds = args.shrink_seconds;
  if (args.mode == "file") {
    fo.fallocate = Supports(args.a, "fallocate") && Supports(args.b, "fallocate");
    fo.mmap = args.mmap && Supports(args.a, "mmap") && Supports(args.b, "mmap");
  }
  uint64_t passed = 0, failed = 0, succeeded = 0, refused = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t s = args.seed; s < args.seed + args.seeds; ++s) {
    bool ok = false;
    if (args.mode == "file") {
      fo.seed = s;
      ok = FileDifferential(args.a, args.b, fo);
    } else {
      PermRunOptions po;
      po.seed = s;
      po.ops = args.ops;
      po.verbose = args.verbose;
      po.shrink_seconds = args.shrink_seconds;
      po.succeeded = &succeeded;
      po.refused = &refused;
      ok = PermDifferential(args.a, args.b, po);
    }
    (ok ? passed : failed)++;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("torture %s: %lu seeds x %lu ops in %.1f s%s%s\n", args.mode.c_str(),
              static_cast<unsigned long>(args.seeds), static_cast<unsigned long>(args.ops), secs,
              args.mode != "file" ? "" : fo.mmap ? " (mmap on)" : " (mmap off)",
              args.reader.empty() ? "" : " (two mounts)");
  if (args.mode == "perm") {
    std::printf("torture perm: %lu calls succeeded, %lu refused (EACCES/EPERM) on both\n",
                static_cast<unsigned long>(succeeded), static_cast<unsigned long>(refused));
  }
  std::printf("torture %s: %lu of %lu seeds clean, %lu failed\n", args.mode.c_str(),
              static_cast<unsigned long>(passed), static_cast<unsigned long>(passed + failed),
              static_cast<unsigned long>(failed));
  return failed == 0 ? 0 : 1;
}
