// The frame codec both data channels share (common/transport/tcp_protocol.h,
// the TCP data channel; rdma_protocol.h, the RDMA path's messages): the op
// codes, flags and the fixed 48-byte little-endian header
//   u32 magic | u16 version | u16 op | u32 status | u32 flags |
//   u64 request_id | u64 handle | u32 extent_count | u32 aux | u64 payload_len
// whose `aux` each protocol defines (TCP: a read's scheduling tag; RDMA: the
// count of remote buffers), and little-endian field helpers.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/object_ref.h"
#include "common/status.h"

namespace clf::transport::frame {

static_assert(std::endian::native == std::endian::little,
              "the data channels' wire format is the host's little-endian layout");

inline constexpr size_t kHeaderBytes = 48;

enum Op : uint16_t {
  kChallenge = 1,
  kAuth = 2,
  kAuthOk = 3,
  kWrite = 16,
  kRead = 17,
  kSync = 18,
  kTruncate = 19,  // TCP only: a replicated file's copy cut to extents[0].offset (resync)
  kReplyBit = 0x8000,
};
inline constexpr uint32_t kFlagSync = 1;     // request: fdatasync before answering
inline constexpr uint32_t kFlagClosing = 1;  // reply: the server closes the connection
// A request's object (common/object_ref.h) beside its handle: bits 8-11 the
// slot, 12-15 the file's replicas (0 read as 1), bit 16 forwarded, 17-20
// the forwarded write's orderer slot.
inline constexpr uint32_t kFlagForwarded = 1u << 16;
uint32_t ObjectFlags(const ObjectRef& o);
// The object `handle` and `flags` name; kInvalid when a slot is not below
// the replicas or the replicas exceed kMaxReplicas.
Status GetObject(uint64_t handle, uint32_t flags, ObjectRef* out);

struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t op = 0;
  uint32_t status = 0;
  uint32_t flags = 0;
  uint64_t request_id = 0;
  uint64_t handle = 0;
  uint32_t extent_count = 0;
  uint32_t aux = 0;
  uint64_t payload_len = 0;
};

template <typename T>
void Put(uint8_t*& p, T v) {
  std::memcpy(p, &v, sizeof v);
  p += sizeof v;
}
template <typename T>
void Get(const uint8_t*& p, T* v) {
  std::memcpy(v, p, sizeof *v);
  p += sizeof *v;
}

// Writes the header's kHeaderBytes at p and advances p past them.
void PutHeader(uint8_t*& p, const Header& h);
// Reads kHeaderBytes at p into *h and advances p; then checks magic and
// version (kInvalid naming `channel` otherwise).
Status GetHeader(const uint8_t*& p, uint32_t magic, uint16_t version, std::string_view channel,
                 Header* h);

}  // namespace clf::transport::frame
