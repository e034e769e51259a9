#include "common/transport/rdma_protocol.h"

#include <bit>
#include <cstring>

namespace clf::transport::rdma {

static_assert(std::endian::native == std::endian::little,
              "the RDMA wire format is the host's little-endian layout");
static_assert(sizeof(RemoteBuf) == kBufferBytes);

namespace {

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

}  // namespace

size_t MessageBytes(size_t extents, size_t buffers, size_t payload) {
  return kHeaderBytes + extents * kExtentBytes + buffers * kBufferBytes + payload;
}

size_t Encode(const Message& m, uint8_t* out, size_t cap) {
  const size_t len = MessageBytes(m.extents.size(), m.buffers.size(), m.payload.size());
  if (len > cap) return 0;
  uint8_t* p = out;
  Put(p, m.h.magic);
  Put(p, m.h.version);
  Put(p, m.h.op);
  Put(p, m.h.status);
  Put(p, m.h.flags);
  Put(p, m.h.request_id);
  Put(p, m.h.handle);
  Put(p, static_cast<uint32_t>(m.extents.size()));
  Put(p, static_cast<uint32_t>(m.buffers.size()));
  Put(p, static_cast<uint64_t>(m.payload.size()));
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
  Get(p, &h.magic);
  Get(p, &h.version);
  Get(p, &h.op);
  Get(p, &h.status);
  Get(p, &h.flags);
  Get(p, &h.request_id);
  Get(p, &h.handle);
  Get(p, &h.extent_count);
  Get(p, &h.buffer_count);
  Get(p, &h.payload_len);
  if (h.magic != kMagic) return Invalid("rdma: bad message magic");
  if (h.version != kVersion) {
    return Invalid("rdma: protocol version " + std::to_string(h.version) + " (this side speaks " +
                   std::to_string(kVersion) + ")");
  }
  // Counts are u32 and payload_len is bounded first, so the sum cannot overflow.
  if (h.payload_len > kMaxMessageBytes ||
      MessageBytes(h.extent_count, h.buffer_count, h.payload_len) != len) {
    return Invalid("rdma: message length does not match its counts");
  }
  m->extents.resize(h.extent_count);
  if (h.extent_count) std::memcpy(m->extents.data(), p, h.extent_count * kExtentBytes);
  p += h.extent_count * kExtentBytes;
  m->buffers.resize(h.buffer_count);
  if (h.buffer_count) std::memcpy(m->buffers.data(), p, h.buffer_count * kBufferBytes);
  p += h.buffer_count * kBufferBytes;
  m->payload.assign(reinterpret_cast<const char*>(p), h.payload_len);
  return Status::Ok();
}

}  // namespace clf::transport::rdma
