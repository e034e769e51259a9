// ObjectRef: which data object of a file a data request names on the server
// that receives it. A file with `replicas` = r keeps r copies of each data
// server's object (paper 001's placement, common/layout.h ReplicaServer):
// the copy in slot 0 is the primary's own, the copy in slot i lives on the
// primary's server + i. Every copy holds the same bytes at the same local
// offsets, so one extent list addresses any of them.
#pragma once

#include <cstdint>
#include <string>

#include "common/handle.h"
#include "common/status.h"

namespace clf {

inline constexpr uint32_t kMaxReplicas = 3;

struct ObjectRef {
  Handle handle = 0;
  uint32_t slot = 0;      // which copy: 0 the primary's, i < replicas a replica
  uint32_t replicas = 1;  // the file's copies (its layout's replicas)
  // A write the acting primary ordered and forwards: apply it to this copy
  // only (never set by a client; the receiver checks it came from a server).
  bool forwarded = false;
  uint32_t orderer = 0;  // forwarded: the slot of the copy that ordered it

  ObjectRef() = default;
  // An unreplicated file's one object (every data request before replicas).
  ObjectRef(Handle h) : handle(h) {}  // NOLINT(google-explicit-constructor)
  ObjectRef(Handle h, uint32_t s, uint32_t r) : handle(h), slot(s), replicas(r) {}
  // The write the copy in slot `by` ordered, forwarded to the copy in slot s.
  static ObjectRef Forwarded(Handle h, uint32_t s, uint32_t r, uint32_t by) {
    ObjectRef o(h, s, r);
    o.forwarded = true;
    o.orderer = by;
    return o;
  }

  bool replicated() const { return replicas > 1; }
  bool operator==(const ObjectRef&) const = default;
};

// kInvalid unless 1 <= replicas <= kMaxReplicas, slot and orderer are below
// replicas, and a forwarded write's orderer is another copy. Every data
// path checks a request's object with this.
inline Status CheckObjectRef(const ObjectRef& o) {
  if (o.replicas == 0 || o.replicas > kMaxReplicas) {
    return Invalid("object with " + std::to_string(o.replicas) + " replicas (1 to " +
                   std::to_string(kMaxReplicas) + ")");
  }
  if (o.slot >= o.replicas || o.orderer >= o.replicas || (o.forwarded && o.orderer == o.slot)) {
    return Invalid("object slot " + std::to_string(o.slot) + " (orderer " +
                   std::to_string(o.orderer) + ") of " + std::to_string(o.replicas) + " replicas");
  }
  return Status::Ok();
}

}  // namespace clf
