// Conversions between libclf's public types (clf/client.h) and their wire
// messages. Internal to client/ (protobuf types). Pure functions.
#pragma once

#include "clf/client.h"
#include "clf/v1/meta.pb.h"
#include "common/layout_proto.h"

namespace clf::client {

Timespec FromProto(const v1::Timespec& t);
v1::Timespec ToProto(const Timespec& t);
Attr FromProto(const v1::Attr& a);
void ToProto(const Caller& c, v1::Caller* p);
using clf::FromProto;  // common/layout_proto.h: Layout
using clf::ToProto;

}  // namespace clf::client
