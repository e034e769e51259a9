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
// Read-ahead for reads through an open that bypasses the page cache (O_DIRECT,
// an open for writing while parallel writes are on, or a read-only open of a
// large file: fuse/ops_file.cc; the kernel does no readahead for them). A
// large read (more than kSmallRead) at offset 0, or one continuing an earlier
// read of the file (up to kStreams streams per file: several readers at
// different offsets), has the bytes from its end to kAheadBytes past it
// fetched in the background, in chunks that end at multiples of kChunk (so
// every chunk but a stream's first is one whole stripe-sized fetch). Any
// later read that chunks cover, landed or still in flight, takes its bytes
// from them: a 1 MiB read the kernel cut in two at a page boundary of an
// unaligned buffer (1 MiB - 16 bytes, then 16) is two takes of one chunk.
// The reply points into the chunks (fuse_reply_iov: no copy); a chunk leaves
// the table once reads took all its bytes. So the servers and the network
// work on the next chunks while the kernel copies this one: w1's
// one-process 1 MiB reads overlap their stages instead of running them in
// turn. The same coherence as the windows (a chunk is bytes as they were
// when fetched; dropped at open, write, truncate, lock); a read already
// waiting for a chunk is answered with it. At most kAheadChunks chunks per
// file (kAheadChunks * kChunk * kFiles bytes in all).
//
// Thread safety: every method is thread safe.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fuse/chunk_bytes.h"

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

  // Request sizes seen through opens the page cache does not serve (there
  // they are the reader's own; through the page cache they are the kernel's
  // readahead): ReadsSmall says the file was mostly read in requests of
  // kSmallRead or less (more than twice as many as larger ones; a large read
  // the kernel cut at an unaligned buffer counts once each way), so a next
  // open had better use the page cache (fuse/ops_file.cc DirectIfLarge). Kept
  // across opens and drops; the counts halve past kSizeCount so that recent
  // reads weigh most; at most kSizeFiles files, least recently read dropped.
  static constexpr uint32_t kSizeCount = 1024;
  static constexpr size_t kSizeFiles = 4096;
  void NoteRead(uint64_t ino, uint64_t size);
  bool ReadsSmall(uint64_t ino) const;

  // Read-ahead (above).
  static constexpr uint64_t kChunk = 1024 * 1024;
  static constexpr uint64_t kAheadBytes = 2 * kChunk;
  static constexpr size_t kAheadChunks = 16;
  struct AheadPlan {
    uint64_t off = 0;
    uint64_t length = 0;
    uint64_t generation = 0;
    uint64_t id = 0;
  };
  // Bytes of a landed chunk, shared: a reply may still use a chunk that has
  // left the table.
  struct Piece {
    std::shared_ptr<const ChunkBytes> data;
    size_t off = 0;
    size_t len = 0;
  };
  using Pieces = std::vector<Piece>;
  // A waiting read's bytes, in order, or the fetch's error (ok false).
  using Landed = std::function<void(bool ok, Pieces pieces)>;
  enum class Ahead { kMiss, kReady, kWaiting };
  // A read of [off, off+size) (any size) through such an open: kReady: chunks
  // hold all of it and *out has its bytes; kWaiting: chunks cover it but some
  // are in flight, and `then` gets the bytes when the last lands (ok false: a
  // fetch failed, the caller reads it itself); kMiss: chunks do not cover it.
  Ahead TakeAhead(uint64_t ino, uint64_t off, uint64_t size, Pieces* out, Landed then);
  // Records a large read of [off, off+size) of a file of known size `eof` and
  // returns the chunks to fetch now (each marked in flight): those that cover
  // its end to kAheadBytes past it, clipped at eof, not already there, when
  // the read is at 0 or continues one of the file's streams.
  std::vector<AheadPlan> PlanAhead(uint64_t ino, uint64_t off, uint64_t size, uint64_t eof);
  // A planned fetch ended: to the reads waiting for it, and kept for the reads
  // to come (unless the file was dropped since, or the fetch failed).
  void LandAhead(uint64_t ino, const AheadPlan& p, bool ok, std::string data);
  // The same for a fetch whose bytes wait in `pipe` (fuse/chunk_bytes.h);
  // `spare` is the fetch's buffer (TakeBuffer), kept for reading them out.
  void LandAheadPiped(uint64_t ino, const AheadPlan& p, std::unique_ptr<ChunkPipe> pipe,
                      std::string spare);
  // Memory for a chunk's fetch (Client::ReadInto): the buffer of a chunk that
  // left (every reply done with it), kChunk bytes long, so the fetch neither
  // allocates nor zero-fills; an empty string when none is free. At most
  // kSpareBuffers wait.
  std::string TakeBuffer();
  static constexpr size_t kSpareBuffers = 32;

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
  struct Chunk {
    uint64_t off = 0;
    uint64_t length = 0;
    uint64_t id = 0;
    uint64_t taken = 0;  // bytes reads took from it
    std::shared_ptr<const ChunkBytes> data;  // null while in flight
  };
  // A read waiting for chunks in flight: the chunks' ranges in order and
  // their bytes as they land.
  struct Waiter {
    uint64_t off = 0;
    uint64_t size = 0;
    Landed then;
    struct Ref {
      uint64_t id = 0, off = 0, length = 0;
      std::shared_ptr<const ChunkBytes> data;
    };
    std::vector<Ref> refs;
    size_t remaining = 0;
    bool failed = false;
  };
  struct File {
    uint64_t generation = 0;
    std::vector<Window> windows;  // oldest first
    std::vector<Stream> streams;  // oldest first
    std::vector<Chunk> chunks;    // read-ahead, by offset (never overlapping)
    std::vector<uint64_t> ahead_ends;  // where recent reads of the read-ahead streams ended, oldest first
    std::list<uint64_t>::iterator lru;
  };
  File& Touch(uint64_t ino);  // under mu_
  void Land(uint64_t ino, const AheadPlan& p, bool ok, std::shared_ptr<const ChunkBytes> bytes);
  ChunkBytes::Recycle Recycler() const;  // a chunk's memory back to spares_
  // A read of [off, end) continued the stream that ended at off (under mu_).
  static void MoveStream(File& f, uint64_t off, uint64_t end);
  // The first of `chunks` (by offset, never overlapping) that ends after pos.
  static std::vector<Chunk>::iterator FirstEndingAfter(std::vector<Chunk>& chunks, uint64_t pos);

  // Buffers of chunks that left, for TakeBuffer (shared with the chunks'
  // deleters, which may run after this object is gone).
  struct Spares {
    std::mutex mu;
    std::vector<std::string> buffers;
  };
  std::shared_ptr<Spares> spares_ = std::make_shared<Spares>();

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, File> files_;
  std::list<uint64_t> lru_;  // most recent first
  uint64_t next_generation_ = 1;
  uint64_t next_chunk_ = 1;
  // Reads waiting for chunks in flight, by chunk id: answered when they land,
  // whatever happened to the file meanwhile.
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<Waiter>>> waiting_;
  struct Sizes {
    uint32_t small = 0, large = 0;
    std::list<uint64_t>::iterator lru;
  };
  std::unordered_map<uint64_t, Sizes> sizes_;
  std::list<uint64_t> sizes_lru_;  // most recent first
  uint64_t served_ = 0, fetched_ = 0, ahead_served_ = 0;
};

}  // namespace clf::fuse
