// The RDMA data path's wire format (messages on a libfabric FI_EP_MSG endpoint;
// the bulk bytes move by one-sided RMA). No libfabric type appears here.
//
// Every message (at most kMaxMessageBytes) is one fi_send:
//   48-byte header (little-endian): u32 magic "CLFR" | u16 version | u16 op |
//     u32 status | u32 flags | u64 request_id | u64 handle | u32 extent_count |
//     u32 buffer_count | u64 payload_len
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
#include "common/transport/transport.h"

namespace clf::transport::rdma {

inline constexpr uint32_t kMagic = 0x52464c43;  // "CLFR" in memory order
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 48;
inline constexpr size_t kExtentBytes = 16;
inline constexpr size_t kBufferBytes = 24;
inline constexpr size_t kMaxMessageBytes = 64 * 1024;
inline constexpr size_t kMaxErrorBytes = 4096;
inline constexpr std::string_view kClientLabel = "clf-rdma-v1 client";
inline constexpr std::string_view kServerLabel = "clf-rdma-v1 server";

enum Op : uint16_t {
  kChallenge = 1,
  kAuth = 2,
  kAuthOk = 3,
  kWrite = 16,
  kRead = 17,
  kSync = 18,
  kReplyBit = 0x8000,
};
inline constexpr uint32_t kFlagSync = 1;     // request: fdatasync before answering
inline constexpr uint32_t kFlagClosing = 1;  // reply: the server closes the endpoint

// One piece of the client's registered memory, as the server addresses it:
// addr is a virtual address or an offset into the registration, as the
// provider's mr_mode says (both ends use the same provider).
struct RemoteBuf {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint64_t key = 0;
};

struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t op = 0;
  uint32_t status = 0;
  uint32_t flags = 0;
  uint64_t request_id = 0;
  uint64_t handle = 0;
  uint32_t extent_count = 0;
  uint32_t buffer_count = 0;
  uint64_t payload_len = 0;
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
