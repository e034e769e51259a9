// Data-path scheduling settings (paper 000): the order policy a sender uses
// for its schedule blocks, the block size b and the in-flight window.
// The policies themselves live in scheduler/order_policy.h (which re-exports
// OrderPolicy); this header holds only what the cluster file, a file's layout
// and the mount options need to name them.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace clf {

// first-IOS: blocks in file-offset order; random-IOS: a random peer with
// pending blocks each step (seeded); hash-IOS: at step j node i sends to peer
// (i + j) mod n.
enum class OrderPolicy { kFirstIos, kRandomIos, kHashIos };

// "first-ios", "random-ios", "hash-ios".
std::string_view OrderPolicyName(OrderPolicy policy);
// Accepts the names above and the short forms "first", "random", "hash".
Result<OrderPolicy> ParseOrderPolicy(std::string_view name);

// A layout stores the policy as a number: 0 = not set (inherit), else 1 + policy.
inline constexpr uint32_t kSchedUnset = 0;
inline uint32_t SchedCode(OrderPolicy p) { return static_cast<uint32_t>(p) + 1; }
inline OrderPolicy SchedFromCode(uint32_t code) { return static_cast<OrderPolicy>(code - 1); }
inline constexpr uint32_t kMaxSchedCode = 3;

// Schedule block sizes: multiples of 4 KiB up to 32 MiB (one data request).
inline constexpr uint64_t kMinSchedBlock = 4096;
inline constexpr uint64_t kMaxSchedBlock = 32ull << 20;
inline constexpr uint32_t kMaxSchedWindow = 1024;
Status ValidateSchedBlock(uint64_t bytes);

// Which copy of a replicated file serves each block of a read (paper 001's
// batch heuristics, scheduler/batch_heuristics.h), or always the first
// current copy (kPrimary).
enum class ReadSched { kEatf, kSjf, kLcdf, kLddf, kLdsdf, kRandom, kPrimary };

// "eatf", "sjf", "lcdf", "lddf", "ldsdf", "random", "primary".
std::string_view ReadSchedName(ReadSched s);
Result<ReadSched> ParseReadSched(std::string_view name);

// A layout stores it as a number too: 0 = not set (inherit), else 1 + ReadSched.
inline uint32_t ReadSchedCode(ReadSched s) { return static_cast<uint32_t>(s) + 1; }
inline ReadSched ReadSchedFromCode(uint32_t code) { return static_cast<ReadSched>(code - 1); }
inline constexpr uint32_t kMaxReadSchedCode = 7;

// The settings a client applies to one request. block 0 = the file's stripe
// size; window 0 = the number of data servers of the file.
struct SchedSettings {
  OrderPolicy policy = OrderPolicy::kHashIos;
  uint64_t block = 0;
  uint32_t window = 0;
  ReadSched read = ReadSched::kEatf;  // replicated files' reads
  bool operator==(const SchedSettings&) const = default;
};

// "4096", "64K", "1M", "1G" (binary units; a trailing "iB"/"B" is accepted).
Result<uint64_t> ParseByteSize(std::string_view s);

}  // namespace clf
