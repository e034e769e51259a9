// ReadWindows: the mount's read-ahead for small reads the kernel does not
// cache (O_DIRECT, or any read the page cache passes through as it is).
//
// A small read that continues where an earlier read of the same file ended
// (a sequential stream; up to kStreams per file, for several readers at
// different offsets) is served by fetching a window that starts at the read
// and grows with the stream (64 KiB, doubling to 1 MiB); the stream's next
// reads come from it without a server call. A read that continues nothing
// fetches exactly what it asked for (random 4 KiB reads cost no extra bytes).
//
// Coherence: windows hold bytes as they were on the servers when fetched.
// They are dropped at every open of the file (close-to-open: an open after
// another mount's close sees its bytes), by every write and truncate of the
// file through this mount, and when this mount is granted a lock on it (data
// under locks). A fetch that raced with a drop is not kept (generation).
// Memory: at most kWindows windows per file and kFiles files (least recently
// used dropped first), so at most kWindows * kFiles MiB.
//
// Thread safety: every method is thread safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace clf::fuse {

class ReadWindows {
 public:
  static constexpr uint64_t kSmallRead = 128 * 1024;  // larger reads bypass the windows
  static constexpr uint64_t kFirstWindow = 64 * 1024;
  static constexpr uint64_t kMaxWindow = 1024 * 1024;
  static constexpr size_t kStreams = 8;
  static constexpr size_t kWindows = 4;
  static constexpr size_t kFiles = 16;

  // Copies [off, off+size) into *out and returns true when a window holds all of it.
  bool Serve(uint64_t ino, uint64_t off, uint64_t size, std::string* out);

  struct Plan {
    uint64_t length = 0;      // bytes to fetch from off (>= the read's size, unless past eof)
    uint64_t generation = 0;  // for Fill
    bool window = false;      // fetched as a window (Fill keeps it)
  };
  // What a read of [off, off+size) that Serve could not answer fetches, given
  // the file's known size `eof` (the fetch never goes past it). Records the
  // read as the end of a stream.
  Plan Fetch(uint64_t ino, uint64_t off, uint64_t size, uint64_t eof);
  // Keeps a window fetched for plan `p` (unless the file was dropped since).
  void Fill(uint64_t ino, const Plan& p, uint64_t off, std::string data);
  // Forgets the file's windows and streams.
  void Drop(uint64_t ino);

  // Counters (tests).
  uint64_t served() const;
  uint64_t fetched() const;

 private:
  struct Window {
    uint64_t off = 0;
    std::string data;
  };
  struct Stream {
    uint64_t end = 0;      // where the stream's next read is expected
    uint64_t next = 0;     // the size of its next window
  };
  struct File {
    uint64_t generation = 0;
    std::vector<Window> windows;  // oldest first
    std::vector<Stream> streams;  // oldest first
    std::list<uint64_t>::iterator lru;
  };
  File& Touch(uint64_t ino);  // under mu_

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, File> files_;
  std::list<uint64_t> lru_;  // most recent first
  uint64_t next_generation_ = 1;
  uint64_t served_ = 0, fetched_ = 0;
};

}  // namespace clf::fuse
