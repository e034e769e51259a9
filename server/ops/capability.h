// Object capabilities of metadata_mode = "client" (paper 004's client-driven
// baseline): the metadata server signs (handle, op, expiry) with a key only
// servers hold (the peer secret); a data server checks the signature before it
// creates or removes an object for a client. Pure functions; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "clf/v1/baseline.pb.h"
#include "common/handle.h"
#include "common/status.h"

namespace clf::server {

inline constexpr size_t kCapabilityMacBytes = 32;  // HMAC-SHA256

// HMAC-SHA256 over a fixed 20-byte encoding of (handle, op, expires_ms).
std::string CapabilityMac(std::string_view key, Handle h, v1::CapOp op, uint64_t expires_ms);
// OK when `cap` names `op`, has not expired at now_ms and its MAC matches
// (constant-time comparison); kPermission otherwise. An empty key refuses all.
Status CheckCapability(std::string_view key, const v1::Capability& cap, v1::CapOp op,
                       uint64_t now_ms);

}  // namespace clf::server
