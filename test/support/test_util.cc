#include "test/support/test_util.h"

#include <cstdlib>
#include <system_error>

namespace clf::testing {

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  char* made = mkdtemp(templ.data());
  CLF_CHECK(made != nullptr);
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace clf::testing
