// Test-only fault points. A test starts a process (clfd, clfmount) with
// CLF_TEST_FAULT=<name> in its environment; TestFault(name) is then true in
// that process, and the code at that point misbehaves as the test needs
// (dies as from kill -9, or is slow). Nothing sets the variable otherwise.
#pragma once

#include <cstdlib>
#include <cstring>

namespace clf {

inline bool TestFault(const char* name) {
  static const char* const fault = std::getenv("CLF_TEST_FAULT");  // read once
  return fault != nullptr && std::strcmp(fault, name) == 0;
}

}  // namespace clf
