#include "common/sched_settings.h"

#include <string>

namespace clf {

std::string_view OrderPolicyName(OrderPolicy policy) {
  switch (policy) {
    case OrderPolicy::kFirstIos:
      return "first-ios";
    case OrderPolicy::kRandomIos:
      return "random-ios";
    case OrderPolicy::kHashIos:
      return "hash-ios";
  }
  return "unknown";
}

Result<OrderPolicy> ParseOrderPolicy(std::string_view name) {
  for (OrderPolicy p : {OrderPolicy::kFirstIos, OrderPolicy::kRandomIos, OrderPolicy::kHashIos}) {
    const std::string_view full = OrderPolicyName(p);
    if (name == full || name == full.substr(0, full.find('-'))) return p;
  }
  return Invalid("unknown order policy '" + std::string(name) +
                 "' (want first-ios, random-ios or hash-ios)");
}

std::string_view ReadSchedName(ReadSched s) {
  switch (s) {
    case ReadSched::kEatf: return "eatf";
    case ReadSched::kSjf: return "sjf";
    case ReadSched::kLcdf: return "lcdf";
    case ReadSched::kLddf: return "lddf";
    case ReadSched::kLdsdf: return "ldsdf";
    case ReadSched::kRandom: return "random";
    case ReadSched::kPrimary: return "primary";
  }
  return "unknown";
}

Result<ReadSched> ParseReadSched(std::string_view name) {
  for (uint32_t code = 1; code <= kMaxReadSchedCode; ++code) {
    if (name == ReadSchedName(ReadSchedFromCode(code))) return ReadSchedFromCode(code);
  }
  return Invalid("unknown read_sched '" + std::string(name) +
                 "' (want eatf, sjf, lcdf, lddf, ldsdf, random or primary)");
}

Status ValidateSchedBlock(uint64_t bytes) {
  if (bytes < kMinSchedBlock || bytes > kMaxSchedBlock || bytes % kMinSchedBlock != 0) {
    return Invalid("schedule block must be a multiple of 4096 between 4 KiB and 32 MiB, got " +
                   std::to_string(bytes));
  }
  return Status::Ok();
}

Result<uint64_t> ParseByteSize(std::string_view s) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (v > (UINT64_MAX - 9) / 10) return Invalid("size too large: " + std::string(s));
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    ++i;
  }
  if (i == 0) return Invalid("not a size: '" + std::string(s) + "'");
  std::string_view unit = s.substr(i);
  int shift = 0;
  if (!unit.empty()) {
    switch (unit[0]) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 'b':
      case 'B':
        break;
      default:
        return Invalid("not a size: '" + std::string(s) + "'");
    }
    std::string_view rest = unit.substr(1);
    if (shift == 0) {
      if (!rest.empty()) return Invalid("not a size: '" + std::string(s) + "'");
    } else if (!(rest.empty() || rest == "B" || rest == "iB" || rest == "b")) {
      return Invalid("not a size: '" + std::string(s) + "'");
    }
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return Invalid("size too large: " + std::string(s));
  return v << shift;
}

}  // namespace clf
