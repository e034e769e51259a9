#include "test/support/test_util.h"

#include <cstdlib>
#include <system_error>
#include <thread>

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

bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
               std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(poll);
  }
}

void WaitPast(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

}  // namespace clf::testing
