#include "common/transport/rdma_protocol.h"

#include <bit>
#include <cstring>

namespace clf::transport::rdma {

static_assert(sizeof(RemoteBuf) == kBufferBytes);

size_t MessageBytes(size_t extents, size_t buffers, size_t payload) {
  return kHeaderBytes + extents * kExtentBytes + buffers * kBufferBytes + payload;
}

size_t Encode(const Message& m, uint8_t* out, size_t cap) {
  const size_t len = MessageBytes(m.extents.size(), m.buffers.size(), m.payload.size());
  if (len > cap) return 0;
  uint8_t* p = out;
  frame::Header h = m.h;
  h.extent_count = static_cast<uint32_t>(m.extents.size());
  h.aux = static_cast<uint32_t>(m.buffers.size());
  h.payload_len = m.payload.size();
  frame::PutHeader(p, h);
  if (!m.extents.empty()) std::memcpy(p, m.extents.data(), m.extents.size() * kExtentBytes);
  p += m.extents.size() * kExtentBytes;
  if (!m.buffers.empty()) std::memcpy(p, m.buffers.data(), m.buffers.size() * kBufferBytes);
  p += m.buffers.size() * kBufferBytes;
  if (!m.payload.empty()) std::memcpy(p, m.payload.data(), m.payload.size());
  return len;
}

Status Decode(const uint8_t* in, size_t len, Message* m) {
  if (len < kHeaderBytes) return Invalid("rdma: message shorter than its header");
  const uint8_t* p = in;
  Header& h = m->h;
  CLF_RETURN_IF_ERROR(frame::GetHeader(p, kMagic, kVersion, "rdma", &h));
  // Counts are u32 and payload_len is bounded first, so the sum cannot overflow.
  if (h.payload_len > kMaxMessageBytes ||
      MessageBytes(h.extent_count, h.aux, h.payload_len) != len) {
    return Invalid("rdma: message length does not match its counts");
  }
  m->extents.resize(h.extent_count);
  if (h.extent_count) std::memcpy(m->extents.data(), p, h.extent_count * kExtentBytes);
  p += h.extent_count * kExtentBytes;
  m->buffers.resize(h.aux);
  if (h.aux) std::memcpy(m->buffers.data(), p, h.aux * kBufferBytes);
  p += h.aux * kBufferBytes;
  m->payload.assign(reinterpret_cast<const char*>(p), h.payload_len);
  return Status::Ok();
}

}  // namespace clf::transport::rdma
