// The RDMA data path's wire format (messages on a libfabric FI_EP_MSG endpoint;
// the bulk bytes move by one-sided RMA). No libfabric type appears here.
//
// Every message (at most kMaxMessageBytes) is one fi_send:
//   48-byte header (frame.h, little-endian): u32 magic "CLFR" | u16 version |
//     u16 op | u32 status | u32 flags | u64 request_id | u64 handle |
//     u32 extent_count | u32 aux = buffer_count | u64 payload_len
//   extent_count extents (u64 offset, u64 length: the object's local offsets)
//   buffer_count remote buffers (u64 addr, u64 len, u64 key: the client's memory)
//   payload_len inline bytes (nonces and MACs, or an error message)
// and its length must be exactly that sum.
//
// Connection: once connected, the server sends kChallenge (payload: a 32-byte
// nonce); the client answers kAuth (its nonce and HMAC-SHA256(secret,
// "clf-rdma-v1 client" | server nonce | client nonce)); the server checks it in
// constant time and answers kAuthOk (HMAC-SHA256(secret, "clf-rdma-v1 server" |
// client nonce | server nonce)), which the client checks before it sends any
// key. Nothing else is served before kAuthOk. The secret never crosses the wire.
//
// Requests: kWrite (extents + the buffers holding the bytes, in order; flag
// kFlagSync): the server pulls them with RDMA READ. kRead (extents + the
// buffers to fill): the server pushes the bytes with RDMA WRITE, then replies.
// kSync (no extents, no buffers). Each is answered by a message with
// op | kReplyBit, the same request id, status = a clf::Code and, on failure,
// the error message as payload; kFlagClosing: the server closes after it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/transport/frame.h"
#include "common/transport/transport.h"

namespace clf::transport::rdma {

inline constexpr uint32_t kMagic = 0x52464c43;  // "CLFR" in memory order
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = frame::kHeaderBytes;
inline constexpr size_t kExtentBytes = 16;
inline constexpr size_t kBufferBytes = 24;
inline constexpr size_t kMaxMessageBytes = 64 * 1024;
inline constexpr size_t kMaxErrorBytes = 4096;
inline constexpr std::string_view kClientLabel = "clf-rdma-v1 client";
inline constexpr std::string_view kServerLabel = "clf-rdma-v1 server";

// The ops and flags of the shared frame codec (frame.h).
using Op = frame::Op;
using enum frame::Op;
using frame::kFlagClosing;
using frame::kFlagSync;

// One piece of the client's registered memory, as the server addresses it:
// addr is a virtual address or an offset into the registration, as the
// provider's mr_mode says (both ends use the same provider).
struct RemoteBuf {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint64_t key = 0;
};

// frame::Header with this path's magic and version; `aux` is the count of
// remote buffers.
struct Header : frame::Header {
  Header() {
    magic = kMagic;
    version = kVersion;
  }
};

struct Message {
  Header h;
  std::vector<Extent> extents;
  std::vector<RemoteBuf> buffers;
  std::string payload;
};

// Bytes a message with these counts takes (kMaxMessageBytes bounds it).
size_t MessageBytes(size_t extents, size_t buffers, size_t payload);
// Writes `m` into out[0, cap); returns its length, or 0 if it does not fit.
// The counts in m.h are taken from the vectors.
size_t Encode(const Message& m, uint8_t* out, size_t cap);
// Parses a received message of `len` bytes: magic, version, and that the
// counts add up to exactly `len` (kInvalid otherwise).
Status Decode(const uint8_t* in, size_t len, Message* out);

}  // namespace clf::transport::rdma
