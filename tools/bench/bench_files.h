// What the netns benches (clf bench sched, replicas, collectives, transport,
// locks --cluster) share to time runs and to hand-shake with their worker
// processes through files in a sync folder: a monotonic clock, a file
// written whole (a reader never sees half of it), a wait for a file, and a
// file of numbers read back.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace clf::tools {

// CLOCK_MONOTONIC in nanoseconds.
int64_t MonoNs();

bool FileExists(const std::string& path);

// Writes `content` under a temporary name, then renames it to `path`.
Status TouchFile(const std::string& path, const std::string& content = "");

// Waits until `path` exists (polling every millisecond); kCancelled once
// `stop` is set, kTimedOut after timeout_ms.
Status WaitForFile(const std::string& path, int timeout_ms, const std::atomic<bool>& stop);

// The whitespace-separated integers of a file (none if it cannot be read).
std::vector<int64_t> ReadNumbers(const std::string& path);

}  // namespace clf::tools
