// The cluster the netns benches (clf bench sched, replicas, collectives,
// locks --cluster) run: clfd k in the testbed's namespace "s<k>" at
// SUBNET.(10+k), gRPC on :7000 and the TCP data channel on :8000, with a
// client secret and a peer secret of its own. Each bench sets the rest of
// the cluster file (layout, timeouts, scheduling) itself.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "tools/bench/netns_testbed.h"

namespace clf::tools {

// "SUBNET.HOST", e.g. BenchIp("10.77.0", 10).
std::string BenchIp(const std::string& subnet, int host);

// Writes DIR/secret and DIR/peer_secret (fresh random, mode 0600) and names
// them in *cfg.
Status WriteBenchSecrets(const std::string& dir, ClusterConfig* cfg);

// Appends servers 0..n-1 to cfg->servers: SUBNET.(10+k):7000 and :8000,
// data in data_dir(k).
void AddBenchServers(ClusterConfig* cfg, const std::string& subnet, int n,
                     const std::function<std::string(int)>& data_dir);

// Starts clfd k (0..n-1) in namespace "s<k>" of `tb` with `cluster_file`,
// its output in log_path(k); each is tracked by `tb`. The pids, in order;
// if one fails to start, those started before it are stopped.
Result<std::vector<pid_t>> StartBenchServers(Testbed& tb, const std::string& clfd,
                                             const std::string& cluster_file, int n,
                                             const std::function<std::string(int)>& log_path);

}  // namespace clf::tools
