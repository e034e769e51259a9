#include "tools/size_arg.h"

namespace clf::tools {

Result<uint64_t> ParseSize(const std::string& s) {
  if (s.empty()) return Invalid("empty size");
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (...) {
    return Invalid("not a size: " + s);
  }
  std::string suf = s.substr(pos);
  if (!suf.empty() && (suf.back() == 'B' || suf.back() == 'b')) suf.pop_back();
  if (suf.size() == 2 && suf[1] == 'i') suf.pop_back();
  uint64_t mul = 1;
  if (suf.empty()) {
    mul = 1;
  } else if (suf == "K" || suf == "k") {
    mul = 1ull << 10;
  } else if (suf == "M" || suf == "m") {
    mul = 1ull << 20;
  } else if (suf == "G" || suf == "g") {
    mul = 1ull << 30;
  } else {
    return Invalid("unknown size suffix in " + s);
  }
  return static_cast<uint64_t>(v) * mul;
}

}  // namespace clf::tools
