#include "server/ops/lock_state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/log.h"

namespace clf::server {

PreviousLockState LockStateFile::Read() const {
  PreviousLockState prev;
  if (path_.empty()) return prev;
  // "<epoch> <idle|used>" and, from clfd versions that list them,
  // "sessions <n> <id>..." (the sessions live at the last write).
  std::ifstream in(path_);
  std::string hex, state, word;
  if (!(in >> hex >> state)) return prev;
  size_t n = 0;
  if (in >> word >> n && word == "sessions") {
    uint64_t id;
    while (prev.sessions.size() < n && in >> id) prev.sessions.insert(id);
    prev.sessions_known = prev.sessions.size() == n;
  }
  prev.epoch = std::strtoull(hex.c_str(), nullptr, 16);
  prev.used = state == "used";
  return prev;
}

void LockStateFile::WriteIdle() {
  if (path_.empty()) return;
  char line[64];
  std::snprintf(line, sizeof line, "%016" PRIx64 " idle\n", epoch_);
  std::lock_guard<std::mutex> l(mu_);
  WriteText(line);
}

void LockStateFile::WriteUsed(const std::function<std::vector<uint64_t>()>& live_sessions) {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> l(mu_);
  marked_used_.store(true);
  char head[64];
  std::snprintf(head, sizeof head, "%016" PRIx64 " used\n", epoch_);
  std::string text = head;
  const std::vector<uint64_t> ids = live_sessions();
  text += "sessions " + std::to_string(ids.size());
  for (uint64_t id : ids) text += " " + std::to_string(id);
  text += "\n";
  WriteText(text);
}

void LockStateFile::WriteText(const std::string& text) const {
  const std::string tmp = path_ + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  if (ok) ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (ok) ok = ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (ok) ok = ::rename(tmp.c_str(), path_.c_str()) == 0;
  if (!ok) CLF_LOG_WARN("cannot write the lock state file {}", path_);
}

}  // namespace clf::server
