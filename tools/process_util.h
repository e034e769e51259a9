// Process, port and mount helpers shared by `clf up/down` and the test harness
// (test/support/cluster.*). Plain POSIX: posix_spawn, waitpid, kill.
//
// Thread safety: every function is safe to call from any thread; none keeps state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace clf::tools {

struct SpawnOptions {
  // Empty: inherit the caller's descriptor. Otherwise the file is opened with
  // O_APPEND|O_CREAT (0644). stderr_path empty with stdout_path set: stderr goes
  // to the same file.
  std::string stdout_path;
  std::string stderr_path;
  bool stdin_null = true;
  // Start a new session (setsid), so the child outlives the caller's session and
  // does not get its terminal's signals.
  bool new_session = false;
  // Extra "KEY=VALUE" entries added to (or replacing in) the caller's environment.
  std::vector<std::string> env;
};

// Starts argv[0] (a path, or a name looked up in PATH) with posix_spawn.
Result<pid_t> Spawn(const std::vector<std::string>& argv, const SpawnOptions& opts = {});

struct RunResult {
  int exit_code = -1;      // exit status, or 128 + signal if killed
  bool timed_out = false;  // killed after timeout_ms
  std::string output;      // stdout and stderr, interleaved
};

// Runs argv to completion, capturing stdout+stderr. timeout_ms 0: no limit;
// otherwise the child is killed (SIGKILL) after it. env: as SpawnOptions::env.
Result<RunResult> Run(const std::vector<std::string>& argv, int timeout_ms = 0,
                      const std::vector<std::string>& env = {});

// Waits for a child of this process to exit, at most timeout_ms (<0: forever).
// Returns true once reaped (or if it is not our child / already gone).
bool WaitChild(pid_t pid, int timeout_ms, int* status = nullptr);

// True if a process with this pid exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// Stops a process: SIGTERM, then SIGKILL if it is still there after
// grace_ms. Works for our children (reaped) and for other processes (polled
// until /proc/PID is gone or a zombie). Returns true if it was running.
bool StopProcess(pid_t pid, int grace_ms);

// The executable's command name from /proc/PID/comm ("" if gone).
std::string ProcessName(pid_t pid);

// Reads a pid file; 0 if missing or malformed.
pid_t ReadPidFile(const std::string& path);

// Finds a binary: next to this executable, in `build_subdirs` relative to the
// executable's parent folder (e.g. "server" for <build>/server/clfd), then PATH.
// Returns "" if not found.
std::string FindBinary(const std::string& name, const std::vector<std::string>& build_subdirs);

// Distinct free TCP ports on 127.0.0.1 (bound together, then released).
Result<std::vector<uint16_t>> PickFreePorts(int n);

// True if `path` is the root of a mount (its st_dev differs from its parent's).
bool IsMountRoot(const std::string& path);

// Mount points (from /proc/self/mountinfo) whose source ("fsname") starts with
// `source_prefix` ("" = all), with their sources.
struct MountEntry {
  std::string mount_point;
  std::string source;
  std::string fstype;
};
std::vector<MountEntry> ListMounts(const std::string& source_prefix = "");

// Unmounts a FUSE mount: fusermount3 -u, then umount -l as a fallback.
// OK if it was not mounted.
Status UnmountFuse(const std::string& path);

// Random hex string of `bytes` random bytes (from /dev/urandom).
Result<std::string> RandomHex(size_t bytes);

// Writes `content` to `path` with the given mode (created or truncated, then chmod).
Status WriteFileWithMode(const std::string& path, const std::string& content, uint32_t mode);

// Reads a whole (small) file.
Result<std::string> ReadFileToString(const std::string& path);

// Monotonic milliseconds.
int64_t NowMs();

// "1.5 GiB" style.
std::string HumanBytes(uint64_t bytes);

}  // namespace clf::tools
