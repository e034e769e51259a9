// The health summary of `clf status` from per-server replies.
#include "tools/health.h"

#include <gtest/gtest.h>

namespace clf::tools {
namespace {

std::vector<client::ServerStatus> Healthy(int n) {
  std::vector<client::ServerStatus> v;
  for (int k = 0; k < n; ++k) {
    client::ServerStatus s;
    s.id = static_cast<ServerId>(k);
    s.up = true;
    s.bytes_total = 1000;
    s.bytes_free = 500;
    v.push_back(s);
  }
  return v;
}

TEST(HealthTest, AllUpAndRoomyIsOk) {
  Health h = EvaluateHealth(Healthy(3));
  EXPECT_EQ(h.level, HealthLevel::kOk);
  EXPECT_TRUE(h.checks.empty());
  EXPECT_EQ(h.Summary(), "HEALTH_OK");
}

TEST(HealthTest, EachProblemWarnsAndNamesTheServer) {
  std::vector<client::ServerStatus> v = Healthy(4);
  v[1].up = false;
  v[2].bytes_free = 50;  // 95% used
  v[3].garbage = 20000;
  v[0].clock_skew_ms = -5000;
  v[0].clock_skew_error_ms = 3;
  Health h = EvaluateHealth(v);
  EXPECT_EQ(h.level, HealthLevel::kWarn);
  ASSERT_EQ(h.checks.size(), 4u);
  EXPECT_EQ(h.checks[0].code, "SERVER_DOWN");
  EXPECT_EQ(h.checks[0].message, "1 of 4 servers down (clfd 1)");
  EXPECT_EQ(h.checks[1].code, "DISK_FULL");
  EXPECT_NE(h.checks[1].message.find("clfd 2 95%"), std::string::npos) << h.checks[1].message;
  EXPECT_EQ(h.checks[2].code, "GARBAGE_BACKLOG");
  EXPECT_NE(h.checks[2].message.find("clfd 3 20000 files"), std::string::npos);
  EXPECT_EQ(h.checks[3].code, "CLOCK_SKEW");
  EXPECT_NE(h.checks[3].message.find("clfd 0 -5000 ms"), std::string::npos);
  EXPECT_EQ(h.Summary().rfind("HEALTH_WARN: 1 of 4 servers down (clfd 1); ", 0), 0u) << h.Summary();
}

TEST(HealthTest, SkewWithinTheMeasurementErrorIsNotReported) {
  std::vector<client::ServerStatus> v = Healthy(1);
  v[0].clock_skew_ms = 1800;
  v[0].clock_skew_error_ms = 900;  // a slow round: 1.8 s is within 1 s + error
  EXPECT_EQ(EvaluateHealth(v).level, HealthLevel::kOk);
}

TEST(HealthTest, EveryServerDownIsAnError) {
  std::vector<client::ServerStatus> v = Healthy(2);
  v[0].up = v[1].up = false;
  Health h = EvaluateHealth(v);
  EXPECT_EQ(h.level, HealthLevel::kErr);
  EXPECT_EQ(h.Summary(), "HEALTH_ERR: 2 of 2 servers down (clfd 0, clfd 1)");
}

}  // namespace
}  // namespace clf::tools
