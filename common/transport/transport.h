// The bulk data path: one interface for moving file bytes between a client and
// one data server, whatever carries them (the TCP data channel, inline gRPC as
// the last fallback; RDMA is not implemented yet).
//
// Client side: a DataTransport names one server. Each call moves one file's
// extent list on that server in one request; the payload is the caller's
// buffers (iovecs), read or written in place.
// Server side: a DataListener accepts connections and hands each decoded
// request to a DataHandler.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/extent.h"
#include "common/handle.h"
#include "common/object_ref.h"
#include "common/status.h"

namespace clf::transport {

// A range of one data object, in the object's local (packed) offset space.
// Its memory layout is the wire layout of the TCP channel (two little-endian u64).

// Sum of the iovecs' lengths.
uint64_t TotalBytes(const std::vector<iovec>& iov);

// A read's scheduling tag (paper 000: servers order the reads waiting for them
// with the clients' policy): the client's order policy as a layout code
// (common/sched_settings.h; 0 = none, served on arrival) in the top 8 bits and the
// client's rank in the low 24. Carried in the TCP frame header's u32 after
// extent_count.
inline constexpr uint32_t SchedTag(uint32_t policy_code, uint32_t rank) {
  return (policy_code << 24) | (rank & 0xFFFFFFu);
}
inline constexpr uint32_t SchedTagPolicy(uint32_t tag) { return tag >> 24; }
inline constexpr uint32_t SchedTagRank(uint32_t tag) { return tag & 0xFFFFFFu; }

// The client end of one server's data path.
// Thread safety: every method may be called from many threads at once. Calls
// block until the server answered or the deadline passed; the iovecs must stay
// valid until the call returns and are not retained after it.
class DataTransport {
 public:
  virtual ~DataTransport() = default;
  virtual TransportKind kind() const = 0;
  // Writes `payload` (its total equals the extents' total) to the extents of h's
  // object on this server, in order. sync: fdatasync before answering.
  virtual Status Write(const ObjectRef& obj, const std::vector<Extent>& extents,
                       const std::vector<iovec>& payload, bool sync) = 0;
  // Reads the extents into `dest` (same total). Holes and bytes past the
  // object's end read as zeros.
  virtual Status Read(const ObjectRef& obj, const std::vector<Extent>& extents,
                      const std::vector<iovec>& dest) = 0;
  // Makes h's object durable on this server.
  virtual Status Sync(const ObjectRef& obj) = 0;
  // Read with a scheduling tag (SchedTag) for the server's read queue. A
  // transport that cannot carry the tag reads untagged (the default).
  virtual Status ReadTagged(const ObjectRef& obj, const std::vector<Extent>& extents,
                            const std::vector<iovec>& dest, uint32_t sched_tag) {
    (void)sched_tag;
    return Read(obj, extents, dest);
  }
  // A read whose bytes (`length`, the extents' total) a caller hands on by
  // splice (clfmount replies to /dev/fuse from the pipe): received straight
  // into the pipe whose ends are `pipe_w`/`pipe_r` (empty, and able to hold
  // `length` bytes) when the transport can (*in_pipe true), else into *bytes
  // (*in_pipe false; the pipe stays empty): a transport that cannot splice
  // (the default), a TLS connection, or a pipe the socket's buffers overfill.
  // *bytes' memory is reused when it is large enough.
  virtual Status ReadToPipe(const ObjectRef& obj, const std::vector<Extent>& extents, uint64_t length,
                            int pipe_w, int pipe_r, uint32_t sched_tag, bool* in_pipe,
                            std::string* bytes) {
    (void)pipe_w;
    (void)pipe_r;
    *in_pipe = false;
    bytes->resize(length);
    return ReadTagged(obj, extents, {iovec{bytes->data(), length}}, sched_tag);
  }
};

// What a data server does with a decoded request. Implemented by the server
// (server/service/data_server.*) over its object store.
// Thread safety: called from the listener's connection threads, concurrently.
// Must not throw.
class DataHandler {
 public:
  virtual ~DataHandler() = default;
  // Validates an extent list (count, ranges, total); returns the total bytes.
  virtual Result<uint64_t> CheckExtents(const std::vector<Extent>& extents) = 0;
  virtual Status Write(const ObjectRef& obj, const std::vector<Extent>& extents, std::string_view payload,
                       bool sync) = 0;
  // Fills `out` (resized to the extents' total) with the extents' bytes.
  virtual Status Read(const ObjectRef& obj, const std::vector<Extent>& extents, std::string* out) = 0;
  virtual Status Sync(const ObjectRef& obj) = 0;
  // Cuts the copy obj names to `size` bytes (a resync; TCP channel only).
  virtual Status Truncate(const ObjectRef& obj, uint64_t size) {
    (void)obj, (void)size;
    return Status(Code::kNotSupported, "truncate on the data channel");
  }
  // The zero-copy write of a plaintext TCP connection: the payload is spliced
  // from the socket into the object (no copy into a buffer first). ObjectFd
  // gives the descriptor of the object the (already checked) extents address,
  // made when `for_write`; null with OK: there is no object. kNotSupported
  // (the default): this handler has no object descriptors, the listener
  // copies through a buffer with Write.
  virtual Result<std::shared_ptr<int>> ObjectFd(const ObjectRef& obj, bool for_write) {
    (void)obj, (void)for_write;
    return Status(Code::kNotSupported, "no zero-copy data path");
  }
  // After a spliced write of `bytes` into `fd`: what Write does after its
  // pwrite (fdatasync when `sync`, else early writeback) and its counting.
  virtual Status WroteSpliced(const std::shared_ptr<int>& fd, const std::vector<Extent>& extents,
                              uint64_t bytes, bool sync) {
    (void)fd, (void)extents, (void)bytes, (void)sync;
    return Status(Code::kNotSupported, "no zero-copy data path");
  }
  // True when Write takes these (already checked) extents' payload the
  // fastest if it starts on a 4096-byte boundary in memory (the server writes
  // it with O_DIRECT): the listener then receives it into aligned memory
  // instead of splicing it.
  virtual bool WantsAligned(const std::vector<Extent>& extents) {
    (void)extents;
    return false;
  }
  // A read's turn in the server's read schedule: held by the listener from
  // before the read until its reply has been sent; destroying it lets the
  // next waiting read go.
  class ReadTurn {
   public:
    virtual ~ReadTurn() = default;
  };
  // Blocks until a read tagged `sched_tag` (SchedTag; 0 = untagged) may be
  // served. The default serves at once (returns null).
  virtual std::unique_ptr<ReadTurn> AwaitReadTurn(const ObjectRef& obj, const std::vector<Extent>& extents,
                                                  uint32_t sched_tag) {
    (void)obj, (void)extents, (void)sched_tag;
    return nullptr;
  }
};

// The server end: accepts authenticated connections and dispatches requests.
class DataListener {
 public:
  virtual ~DataListener() = default;
  virtual TransportKind kind() const = 0;
  // Binds and starts serving; returns once the port accepts connections.
  virtual Status Start() = 0;
  // Stops accepting, closes every connection and joins every thread. Idempotent.
  virtual void Stop() = 0;
  virtual std::string address() const = 0;
};

}  // namespace clf::transport
