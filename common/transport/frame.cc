#include "common/transport/frame.h"

#include <string>

namespace clf::transport::frame {

void PutHeader(uint8_t*& p, const Header& h) {
  Put(p, h.magic);
  Put(p, h.version);
  Put(p, h.op);
  Put(p, h.status);
  Put(p, h.flags);
  Put(p, h.request_id);
  Put(p, h.handle);
  Put(p, h.extent_count);
  Put(p, h.aux);
  Put(p, h.payload_len);
}

Status GetHeader(const uint8_t*& p, uint32_t magic, uint16_t version, std::string_view channel,
                 Header* h) {
  Get(p, &h->magic);
  Get(p, &h->version);
  Get(p, &h->op);
  Get(p, &h->status);
  Get(p, &h->flags);
  Get(p, &h->request_id);
  Get(p, &h->handle);
  Get(p, &h->extent_count);
  Get(p, &h->aux);
  Get(p, &h->payload_len);
  if (h->magic != magic) return Invalid(std::string(channel) + ": bad frame magic");
  if (h->version != version) {
    return Invalid(std::string(channel) + ": protocol version " + std::to_string(h->version) +
                   " (this side speaks " + std::to_string(version) + ")");
  }
  return Status::Ok();
}

uint32_t ObjectFlags(const ObjectRef& o) {
  return ((o.slot & 0xFu) << 8) | ((o.replicas & 0xFu) << 12) |
         (o.forwarded ? kFlagForwarded | ((o.orderer & 0xFu) << 17) : 0);
}

Status GetObject(uint64_t handle, uint32_t flags, ObjectRef* out) {
  ObjectRef o(handle, (flags >> 8) & 0xFu, (flags >> 12) & 0xFu);
  o.forwarded = (flags & kFlagForwarded) != 0;
  o.orderer = o.forwarded ? (flags >> 17) & 0xFu : 0;
  if (o.replicas == 0) o.replicas = 1;
  CLF_RETURN_IF_ERROR(CheckObjectRef(o));
  *out = o;
  return Status::Ok();
}

}  // namespace clf::transport::frame
