// The file differential: seeded sequences of operations on one file (and a
// second name and a copy source beside it), applied to a directory on the
// mount and to the same directory on a local file system (tmpfs), every
// result, errno, size and byte compared after each step.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "test/torture/outcome.h"

namespace clf::torture {

constexpr int kSlots = 3;  // file descriptors a sequence keeps open at most

enum class FileOpKind {
  kOpen,
  kClose,
  kPwrite,
  kWrite,
  kLseek,
  kPread,
  kRead,
  kFtruncate,
  kTruncate,
  kFallocate,
  kMmapWrite,
  kMmapRead,
  kCopyRange,
  kFsync,
  kRename,
  kLink,
  kUnlinkLink,
  kUnlink,
  kChmod,
  kChown,
  kUtimens,
  kSetXattr,
  kGetXattr,
  kRemoveXattr,
  kListXattr,
};

// One step with every parameter drawn up front, so a recorded sequence
// replays (and shrinks) without the generator.
struct FileOp {
  FileOpKind kind = FileOpKind::kOpen;
  int slot = 0;
  int flags = 0;    // open flags; fallocate mode; xattr flags
  uint64_t off = 0;  // file offset; truncate size; mode; uid
  uint64_t len = 0;  // bytes; gid
  uint64_t tag = 0;  // data pattern; source offset; times; xattr value
  int name = 0;      // which name a path call uses (0: the file, 1: the other name)
};

std::string Describe(const FileOp& op);

// What a run may use; `fallocate` and `mmap` off where the mount lacks them.
struct FileRunOptions {
  uint64_t seed = 1;
  uint64_t ops = 1000;
  bool mmap = true;
  bool fallocate = true;
  // Two-mount mode: the mount's directory as another mount shows it. After
  // every close that leaves the file closed, an open there must see exactly
  // the reference's bytes and size (close-to-open).
  std::string reader;
  bool verbose = false;
  int shrink_seconds = 120;  // time to look for the shortest failing sequence
};

// One side: its directory and the state its calls leave.
struct FileSide {
  std::string dir;
  int fds[kSlots] = {-1, -1, -1};
  int flags[kSlots] = {0, 0, 0};
  std::string name;  // the file's current name (renames move it)
};

// Draws the next operation from `rng`, shaped by the reference side's state
// (which slots are open, the file's size).
FileOp NextFileOp(Rng& rng, const FileSide& ref, const FileRunOptions& o);
Outcome ApplyFileOp(const FileOp& op, FileSide& side);
// The state both sides must agree on after a step: the file's stat fields and
// bytes (`full`: all of them; else its size and a window).
Outcome ObserveFile(FileSide& side, uint64_t step, bool full);
void CloseAll(FileSide& side);

struct Mismatch {
  uint64_t step = 0;
  std::string what;  // the step and both outcomes
};

// Where a run's operations come from: the generator (reading the reference
// side's state) or a recorded list; nullopt ends the run.
using NextOp = std::function<std::optional<FileOp>(uint64_t step, const FileSide& ref)>;

// Runs operations from `next` on fresh directories `a_dir` and `b_dir` (made
// here; `reader_dir`: a_dir seen through the second mount, or empty), each one
// appended to `ran`. The first mismatch, if any.
std::optional<Mismatch> RunFileOps(const NextOp& next, const std::string& a_dir,
                                   const std::string& b_dir, const std::string& reader_dir,
                                   bool verbose, std::vector<FileOp>* ran);

// Generates options.ops operations from options.seed and runs them below
// `a_root`/`b_root`; on a mismatch, prints the seed, the failing step and the
// shortest failing sequence it can find (shrunk by replaying subsets), and
// returns false.
bool FileDifferential(const std::string& a_root, const std::string& b_root,
                      const FileRunOptions& options);

}  // namespace clf::torture
