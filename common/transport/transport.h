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
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/handle.h"
#include "common/status.h"

namespace clf::transport {

// A range of one data object, in the object's local (packed) offset space.
// Its memory layout is the wire layout of the TCP channel (two little-endian u64).
struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;
};
static_assert(sizeof(Extent) == 16);

// Sum of the iovecs' lengths.
uint64_t TotalBytes(const std::vector<iovec>& iov);

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
  virtual Status Write(Handle h, const std::vector<Extent>& extents,
                       const std::vector<iovec>& payload, bool sync) = 0;
  // Reads the extents into `dest` (same total). Holes and bytes past the
  // object's end read as zeros.
  virtual Status Read(Handle h, const std::vector<Extent>& extents,
                      const std::vector<iovec>& dest) = 0;
  // Makes h's object durable on this server.
  virtual Status Sync(Handle h) = 0;
};

// What a data server does with a decoded request. Implemented by the server
// (server/data/data_server.*) over its object store.
// Thread safety: called from the listener's connection threads, concurrently.
// Must not throw.
class DataHandler {
 public:
  virtual ~DataHandler() = default;
  // Validates an extent list (count, ranges, total); returns the total bytes.
  virtual Result<uint64_t> CheckExtents(const std::vector<Extent>& extents) = 0;
  virtual Status Write(Handle h, const std::vector<Extent>& extents, std::string_view payload,
                       bool sync) = 0;
  // Fills `out` (resized to the extents' total) with the extents' bytes.
  virtual Status Read(Handle h, const std::vector<Extent>& extents, std::string* out) = 0;
  virtual Status Sync(Handle h) = 0;
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
