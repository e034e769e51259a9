// The data channel server's zero-copy write on a plaintext TCP connection
// (TLS connections go through a buffer: the bytes are encrypted).
//
// The payload goes socket -> pipe -> object file with splice(2). The first
// splice hands the socket's pages to the pipe without copying them; the
// second copies them into the object's page cache: one copy of every byte
// less than recv into a buffer and pwrite. Reads stay pread + sendmsg:
// sendfile measured slower through a mount (docs/ARCHITECTURE.md "Copies per
// byte").
//
// Thread safety: a SplicePipe belongs to one connection's thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/transport/tcp_protocol.h"
#include "common/transport/transport.h"

namespace clf::transport {

// A connection's pipe for splice, made on first use (`want` bytes, 1 MiB by
// default, when the system allows it), closed with the connection.
class SplicePipe {
 public:
  SplicePipe() = default;
  SplicePipe(const SplicePipe&) = delete;
  SplicePipe& operator=(const SplicePipe&) = delete;
  ~SplicePipe();
  Status Open(size_t want = 1u << 20);
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  size_t capacity() const { return capacity_; }

 private:
  int fds_[2] = {-1, -1};
  size_t capacity_ = 0;
};

// A write frame's payload (`len` bytes, the extents' total) from socket
// `sock` into `fd` at each extent's offset, all or nothing: the whole payload
// is first taken into the pipe (no copy), and only then spliced into the file
// (one copy), so a peer that stops or closes mid-payload changes nothing, as
// on the buffered path. Outcomes:
//  - kDone: written (or *status holds the object file's error; the frame was
//    read whole, so the connection stays usable);
//  - kBuffered: the payload did not fit in the pipe; the bytes taken so far
//    and the rest of the payload are in *buf (len bytes), for a buffered write;
//  - kClosed / kTimedOut: the peer closed or stalled mid-payload; nothing
//    was written (*status says which).
// The pipe is empty again whatever the outcome.
enum class SpliceOutcome { kDone, kBuffered, kClosed, kTimedOut };

// Step 1 of the above, on its own: `len` bytes from socket `sock` into the
// pipe (`pipe_w`, `pipe_r` its ends), all or nothing. kDone: the pipe holds
// them all (and held nothing before); kBuffered: it could not hold them, and
// *buf has all len bytes instead (the pipe is empty); kClosed / kTimedOut:
// the peer closed or stalled (*status says which; the pipe is empty). The
// client's spliced reads (TcpTransport::ReadToPipe) use it too.
SpliceOutcome SpliceSocketToPipe(int sock, int pipe_w, int pipe_r, uint64_t len,
                                 tcp::Clock::time_point deadline, int stop_fd, std::string* buf,
                                 Status* status);

// Reads and drops `n` bytes the pipe holds (read end `pipe_r`), or copies
// them to `to` when it is not null. False when fewer came (a non-blocking
// pipe that held fewer, or a read error).
bool EmptyPipe(int pipe_r, size_t n, char* to);

SpliceOutcome SpliceFrameToFile(int sock, SplicePipe& pipe, int fd, const std::vector<Extent>& extents,
                                uint64_t len, tcp::Clock::time_point deadline, int stop_fd,
                                std::string* buf, Status* status);

}  // namespace clf::transport
