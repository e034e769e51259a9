// The TCP data channel's wire format and the socket helpers both ends share.
//
// Every frame starts with a fixed 48-byte header (little-endian):
//   u32 magic "CLFD" | u16 version | u16 op | u32 status | u32 flags |
//   u64 request_id | u64 handle | u32 extent_count | u32 aux | u64 payload_len
// (the frame codec both data channels share, frame.h)
// followed by extent_count extents (u64 offset, u64 length) and payload_len
// payload bytes.
//
// Connection: the server sends kChallenge (payload: a 32-byte random nonce);
// the client answers kAuth (payload: its own 32-byte nonce and
// HMAC-SHA256(secret, "clf-data-v1 client" | server nonce | client nonce));
// the server checks it in constant time and answers kAuthOk (payload:
// HMAC-SHA256(secret, "clf-data-v1 server" | client nonce | server nonce)),
// which the client checks too. The secret never crosses the wire. The secret
// is the clients' (the connection is a client's) or the servers' peer secret
// (a server's: the only connections whose forwarded copies' requests, frame
// flag kFlagForwarded and kTruncate, are served; a client's gets kPermission
// and a closed connection).
//
// With TLS ([tls] in the cluster file) there is no challenge: both ends run a
// TLS handshake first (certificates from the cluster CA, verified both ways;
// the client also checks the server's name and OU "server"); the server then
// checks the client certificate's role (OU "client" or "server": a server's
// connection as above) and answers kAuthOk over TLS (status 0,
// no payload; an error reply if refused). kAuthOk with kFlagPlaintext means
// the server keeps bulk data in plaintext ([tls] encrypt_data = false): both
// ends exchange TLS close_notify and the frames that follow travel on the bare
// socket.
//
// Requests: kWrite (extents + payload; flags kFlagSync), kRead (extents),
// kSync. On a kRead the u32 after extent_count (the header's `aux`) is the read's
// scheduling tag (transport.h SchedTag; 0 = untagged); elsewhere it is 0.
// Each is answered by a frame with op | kReplyBit, the same request id,
// status = a clf::Code. On success a read reply's payload is the extents'
// bytes in order; on failure the payload is the error message. A reply with
// kFlagClosing means the server closes the connection after it.
#pragma once

#include <sys/uio.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/transport/frame.h"

struct ssl_st;

namespace clf::transport::tcp {

inline constexpr uint32_t kMagic = 0x44464c43;  // "CLFD" in memory order
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = frame::kHeaderBytes;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kMaxErrorBytes = 4096;

// The ops and flags of the shared frame codec (frame.h).
using Op = frame::Op;
using enum frame::Op;
using frame::kFlagClosing;
using frame::kFlagSync;
inline constexpr uint32_t kFlagPlaintext = 2;  // kAuthOk with TLS: frames continue without TLS

// frame::Header with this channel's magic and version; `aux` is a read's
// scheduling tag (0 elsewhere).
struct FrameHeader : frame::Header {
  FrameHeader() {
    magic = kMagic;
    version = kVersion;
  }
};

using HeaderBytes = std::array<uint8_t, kHeaderBytes>;
HeaderBytes Encode(const FrameHeader& h);
// Decodes and checks magic and version (kInvalid otherwise).
Status Decode(const uint8_t* in, FrameHeader* out);

using Mac = std::array<uint8_t, kMacBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;
Status RandomNonce(Nonce* out);
// HMAC-SHA256(secret, label | a | b).
Mac AuthMac(std::string_view secret, std::string_view label, const Nonce& a, const Nonce& b);
// Constant-time comparison.
bool MacEqual(const uint8_t* a, const uint8_t* b);
inline constexpr std::string_view kClientLabel = "clf-data-v1 client";
inline constexpr std::string_view kServerLabel = "clf-data-v1 server";

using Clock = std::chrono::steady_clock;

// One connection: a non-blocking socket, and the TLS session on it (or null:
// frames on the bare socket). Not owning.
struct Link {
  Link(int f = -1, ssl_st* s = nullptr) : fd(f), ssl(s) {}  // NOLINT: an fd is a plain link
  int fd;
  ssl_st* ssl;
};

// Full reads and writes on a connection, each bounded by `deadline`, which
// follows progress: each time bytes move it moves to at least now + the span
// it was given with, so a slow link slows a transfer down and a silent peer
// ends it. kTimedOut when it passes, kUnavailable when the peer closed or
// reset.
// `stop_fd` (or -1) is polled too: readable = give up (kCancelled).
Status ReadFull(Link l, void* buf, size_t len, Clock::time_point deadline, int stop_fd = -1);
Status ReadvFull(Link l, std::vector<iovec> iov, Clock::time_point deadline, int stop_fd = -1);
Status WritevFull(Link l, std::vector<iovec> iov, Clock::time_point deadline);
// Waits until `l` has bytes to read (true), `stop_fd` is readable or the deadline passes (false).
bool WaitReadable(Link l, int stop_fd, Clock::time_point deadline);
// Waits for poll `events` on a plain socket: kTimedOut at the deadline,
// kCancelled when `stop_fd` (or -1) is readable.
Status WaitSocket(int fd, short events, Clock::time_point deadline, int stop_fd = -1);
// The socket error of `err` (errno) as a Status: kUnavailable when the peer
// closed or reset the connection.
Status SocketStatus(int err, const char* what);

// Binds a TLS session to the socket through a socket BIO whose writes use
// MSG_NOSIGNAL: a peer that went away is an error, not SIGPIPE in whatever
// program links libclf.
Status AttachTls(ssl_st* ssl, int fd);

// The TLS handshake on l.ssl (SSL_connect or SSL_accept, by the session's
// role). kUnauthenticated when the peer's certificate (or ours, to it) fails
// verification, kUnavailable when the connection drops, kTimedOut.
Status TlsHandshake(Link l, Clock::time_point deadline, int stop_fd = -1);
// Ends TLS on the connection but keeps the socket: sends close_notify and
// waits for the peer's (the kFlagPlaintext switch). Bytes after it are plain.
Status TlsUnwrap(Link l, Clock::time_point deadline, int stop_fd = -1);

// Splits "host:port" (IPv4/IPv6/name); kInvalid if malformed.
Status SplitHostPort(const std::string& address, std::string* host, std::string* port);
// Connects a TCP socket within `timeout_ms` (TCP_NODELAY, close-on-exec).
// kUnavailable when nothing listens there or it cannot be reached.
Result<int> Dial(const std::string& address, uint32_t timeout_ms);

}  // namespace clf::transport::tcp
