#include "tools/health.h"

#include <algorithm>
#include <cstdlib>

namespace clf::tools {
namespace {

std::string JoinIds(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

const char* HealthName(HealthLevel level) {
  switch (level) {
    case HealthLevel::kOk: return "HEALTH_OK";
    case HealthLevel::kWarn: return "HEALTH_WARN";
    case HealthLevel::kErr: return "HEALTH_ERR";
  }
  return "HEALTH_UNKNOWN";
}

std::string Health::Summary() const {
  std::string out = HealthName(level);
  for (size_t i = 0; i < checks.size(); ++i) out += (i == 0 ? ": " : "; ") + checks[i].message;
  return out;
}

Health EvaluateHealth(const std::vector<client::ServerStatus>& servers, const HealthThresholds& t) {
  Health h;
  std::vector<std::string> down, full, garbage, skewed;
  uint64_t stale = 0;
  bool resyncing = false;
  for (const client::ServerStatus& s : servers) {
    const std::string name = "clfd " + std::to_string(s.id);
    if (!s.up) {
      down.push_back(name);
      continue;
    }
    if (s.bytes_total > 0) {
      const double used = static_cast<double>(s.bytes_total - std::min(s.bytes_free, s.bytes_total)) /
                          static_cast<double>(s.bytes_total);
      if (used > t.disk_used_fraction) {
        full.push_back(name + " " + std::to_string(static_cast<int>(used * 100)) + "%");
      }
    }
    stale += s.stale_copies;
    resyncing = resyncing || s.resync_running;
    if (s.garbage > t.garbage_backlog) {
      garbage.push_back(name + " " + std::to_string(s.garbage) + " files");
    }
    if (std::llabs(s.clock_skew_ms) > t.clock_skew_ms + s.clock_skew_error_ms) {
      skewed.push_back(name + " " + std::to_string(s.clock_skew_ms) + " ms");
    }
  }
  const size_t n = servers.size();
  if (!down.empty()) {
    const bool all = down.size() == n;
    h.checks.push_back({all ? "ALL_DOWN" : "SERVER_DOWN",
                        std::to_string(down.size()) + " of " + std::to_string(n) +
                            " servers down (" + JoinIds(down) + ")"});
    if (all) h.level = HealthLevel::kErr;
  }
  if (stale > 0) {
    h.checks.push_back({"DEGRADED", std::to_string(stale) + " stale " +
                                        (stale == 1 ? "copy" : "copies") +
                                        " of replicated files (" +
                                        (resyncing ? "resync running" : "resync waiting") + ")"});
  }
  if (!full.empty()) {
    h.checks.push_back({"DISK_FULL", "data file system above " +
                                         std::to_string(static_cast<int>(t.disk_used_fraction * 100)) +
                                         "% (" + JoinIds(full) + ")"});
  }
  if (!garbage.empty()) {
    h.checks.push_back({"GARBAGE_BACKLOG", "garbage backlog above " +
                                               std::to_string(t.garbage_backlog) + " files (" +
                                               JoinIds(garbage) + ")"});
  }
  if (!skewed.empty()) {
    h.checks.push_back({"CLOCK_SKEW", "clock skew above " + std::to_string(t.clock_skew_ms) +
                                          " ms (" + JoinIds(skewed) + ")"});
  }
  if (h.level == HealthLevel::kOk && !h.checks.empty()) h.level = HealthLevel::kWarn;
  return h;
}

}  // namespace clf::tools
