// Sizes given on the command line ("64K", "1M", "1MiB", "4096").
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace clf::tools {

// "64K", "1M", "1MiB", "4096" -> bytes (K, M, G: powers of 1024).
Result<uint64_t> ParseSize(const std::string& s);

}  // namespace clf::tools
