// A fixture for tests that drive the `clf` CLI against a real cluster: three
// clfd (64 KiB stripes, 1 s RPC deadline) and a libclf client, started fresh
// for each test and stopped after it (ClfCliTest, FsckTest).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "clf/client.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {

class CliClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 3;
    o.stripe_size = 64 * 1024;
    o.rpc_timeout_ms = 1000;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  // Runs `clf ARGS` (120 s at most).
  tools::RunResult Clf(std::vector<std::string> args) {
    return TestCluster::RunClf(std::move(args), 120000);
  }
  client::Client& c() { return cluster_->client(); }
  std::unique_ptr<TestCluster> cluster_;
};

}  // namespace clf::testing
