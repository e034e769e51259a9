// Layout <-> its wire message (common.proto's v1::Layout), for the parts that
// link the protobuf types (client/ and server/).
#pragma once

#include "clf/v1/common.pb.h"
#include "common/layout.h"

namespace clf {

inline Layout FromProto(const v1::Layout& l) {
  return Layout{l.stripe_size(), l.stripe_count(), l.first_server(),
                l.replicas(),    l.sched_policy(), l.sched_block(), l.read_sched()};
}

inline v1::Layout ToProto(const Layout& l) {
  v1::Layout p;
  p.set_stripe_size(l.stripe_size);
  p.set_stripe_count(l.stripe_count);
  p.set_first_server(l.first_server);
  p.set_replicas(l.replicas);
  p.set_sched_policy(l.sched_policy);
  p.set_sched_block(l.sched_block);
  p.set_read_sched(l.read_sched);
  return p;
}

}  // namespace clf
