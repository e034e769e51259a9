// The one-line health summary of `clf status` (like `ceph -s`): HEALTH_OK,
// HEALTH_WARN or HEALTH_ERR with the reasons, computed from the per-server
// status replies. Pure code: no RPC here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clf/client.h"

namespace clf::tools {

enum class HealthLevel { kOk, kWarn, kErr };

// "HEALTH_OK", "HEALTH_WARN", "HEALTH_ERR".
const char* HealthName(HealthLevel level);

struct HealthCheck {
  std::string code;     // SERVER_DOWN, DISK_FULL, GARBAGE_BACKLOG, CLOCK_SKEW, ALL_DOWN
  std::string message;  // human-readable, names the servers
};

struct Health {
  HealthLevel level = HealthLevel::kOk;
  std::vector<HealthCheck> checks;  // empty when level is kOk
  // "HEALTH_OK" or "HEALTH_WARN: 1 of 3 servers down (clfd 2); ...".
  std::string Summary() const;
};

struct HealthThresholds {
  double disk_used_fraction = 0.90;  // a data file system fuller than this warns
  uint64_t garbage_backlog = 10000;  // removed files not yet freed on one server
  int64_t clock_skew_ms = 1000;      // beyond the measurement's own error
};

// Every server down is HEALTH_ERR; any other failed check is HEALTH_WARN.
Health EvaluateHealth(const std::vector<client::ServerStatus>& servers,
                      const HealthThresholds& t = {});

}  // namespace clf::tools
