#include "tools/bench/bench_files.h"

#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

namespace clf::tools {

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status TouchFile(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << content;
    if (!out) return IoError("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return FromErrno(errno, "rename " + tmp);
  return Status::Ok();
}

Status WaitForFile(const std::string& path, int timeout_ms, const std::atomic<bool>& stop) {
  const int64_t end = MonoNs() + int64_t{timeout_ms} * 1000000;
  while (!FileExists(path)) {
    if (stop.load()) return Status(Code::kCancelled, "interrupted");
    if (MonoNs() > end) return Status(Code::kTimedOut, "timed out waiting for " + path);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

std::vector<int64_t> ReadNumbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<int64_t> v;
  int64_t x;
  while (in >> x) v.push_back(x);
  return v;
}

}  // namespace clf::tools
