// The application API's error reporting (clf_last_error / clf::api::LastError),
// shared by client/fs_api.cc and client/c_api.cc. Internal to libclf.
#pragma once

#include <string>

namespace clf::client {

// Records `msg` as the calling thread's last error and returns -err.
int ApiFail(int err, std::string msg);
// The calling thread's last error message ("" if none).
const char* ApiLastError();

}  // namespace clf::client
