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
// Read-ahead for large reads (more than kSmallRead) through an open that
// bypasses the page cache (O_DIRECT; the kernel does no readahead for it): a
// read at offset 0, or one continuing an earlier large read of the file (up
// to kStreams streams per file: several readers at different offsets), has
// the next kAheadDepth blocks of its size fetched in the background. The
// stream's next read takes its block as it is (no copy) or, still in flight,
// waits for it. So the servers and the network work on block k+1 while the
// kernel copies block k: w1's one-process 1 MiB O_DIRECT reads overlap their
// stages instead of running them in turn. The same coherence as the windows
// (a block is bytes as they were when fetched; dropped at open, write,
// truncate, lock); a read already waiting for a block is answered with it.
// At most kAheadBlocks blocks per file.
//
// Thread safety: every method is thread safe.
#pragma once

#include <cstdint>
#include <functional>
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

  // Read-ahead for large reads (above).
  static constexpr size_t kAheadDepth = 2;
  static constexpr size_t kAheadBlocks = 8;  // per file: several readers' streams
  struct AheadPlan {
    uint64_t off = 0;
    uint64_t length = 0;
    uint64_t generation = 0;
    uint64_t id = 0;
  };
  // The read's bytes, or the fetch's error.
  using Landed = std::function<void(bool ok, std::string data)>;
  enum class Ahead { kMiss, kReady, kWaiting };
  // A large read of [off, off+size): kReady: *out holds its bytes; kWaiting:
  // its block is in flight and `then` gets the bytes when it lands (ok false:
  // the fetch failed, the caller reads it itself); kMiss: no block for it.
  Ahead TakeAhead(uint64_t ino, uint64_t off, uint64_t size, std::string* out, Landed then);
  // Records a large read of [off, off+size) of a file of known size `eof` and
  // returns the blocks to fetch now (each marked in flight): the next
  // kAheadDepth blocks of that size, clipped at eof, not already there, when
  // the read is at 0 or continues one of the file's streams.
  std::vector<AheadPlan> PlanAhead(uint64_t ino, uint64_t off, uint64_t size, uint64_t eof);
  // A planned fetch ended: to the read waiting for it, else kept for the read
  // to come (unless the file was dropped since, or the fetch failed).
  void LandAhead(uint64_t ino, const AheadPlan& p, bool ok, std::string data);

  // Counters (tests).
  uint64_t served() const;
  uint64_t fetched() const;
  uint64_t ahead_served() const;

 private:
  struct Window {
    uint64_t off = 0;
    std::string data;
  };
  struct Stream {
    uint64_t end = 0;   // where the stream's next read is expected
    uint64_t next = 0;  // the size of its next window
  };
  struct Block {
    uint64_t off = 0;
    uint64_t length = 0;
    uint64_t id = 0;
    bool landed = false;
    std::string data;
  };
  struct File {
    uint64_t generation = 0;
    std::vector<Window> windows;  // oldest first
    std::vector<Stream> streams;  // oldest first
    std::vector<Block> blocks;    // read-ahead not yet taken, oldest first
    std::vector<uint64_t> large_ends;  // where recent large reads ended (streams), oldest first
    std::list<uint64_t>::iterator lru;
  };
  struct Waiter {
    uint64_t size = 0;
    Landed then;
  };
  File& Touch(uint64_t ino);  // under mu_

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, File> files_;
  std::list<uint64_t> lru_;  // most recent first
  uint64_t next_generation_ = 1;
  uint64_t next_block_ = 1;
  // Blocks a read took while in flight, by block id: answered when they land,
  // whatever happened to the file meanwhile.
  std::unordered_map<uint64_t, Waiter> waiting_;
  uint64_t served_ = 0, fetched_ = 0, ahead_served_ = 0;
};

}  // namespace clf::fuse
