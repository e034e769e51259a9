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

}  // namespace clf::transport::frame
