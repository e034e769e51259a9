// POSIX permission rules the metadata operations apply on the server (the
// mount applies the same ones, common/posix_access.h, to what it answers
// itself; the server checks again because it trusts no client).
#pragma once

#include <cstdint>

#include "clf/v1/common.pb.h"
#include "common/status.h"

namespace clf::server {

// Access bits of CheckAccess's mask (common/posix_access.h).
inline constexpr uint32_t kR = 4, kW = 2, kX = 1;

// The caller's primary or supplementary groups include `gid`.
bool InGroup(const v1::Caller& c, uint32_t gid);
// POSIX permission check of `mask` (kR|kW|kX) for the caller on `a`.
Status CheckAccess(const v1::Attr& a, const v1::Caller& c, uint32_t mask);
// Sticky directories: only the owner of the entry, of the directory, or root may remove it.
Status CheckSticky(const v1::Attr& dir, const v1::Attr& child, const v1::Caller& c);

// The wall clock as the servers stamp times.
v1::Timespec Now();

}  // namespace clf::server
