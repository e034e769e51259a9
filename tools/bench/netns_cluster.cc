#include "tools/bench/netns_cluster.h"

#include "tools/process_util.h"

namespace clf::tools {

std::string BenchIp(const std::string& subnet, int host) {
  return subnet + "." + std::to_string(host);
}

Status WriteBenchSecrets(const std::string& dir, ClusterConfig* cfg) {
  cfg->secret_file = dir + "/secret";
  cfg->peer_secret_file = dir + "/peer_secret";  // the servers among themselves
  for (const std::string* f : {&cfg->secret_file, &cfg->peer_secret_file}) {
    CLF_ASSIGN_OR_RETURN(std::string secret, RandomHex(24));
    CLF_RETURN_IF_ERROR(WriteFileWithMode(*f, secret + "\n", 0600));
  }
  return Status::Ok();
}

void AddBenchServers(ClusterConfig* cfg, const std::string& subnet, int n,
                     const std::function<std::string(int)>& data_dir) {
  for (int k = 0; k < n; ++k) {
    ServerConfig s;
    s.id = static_cast<ServerId>(k);
    s.address = BenchIp(subnet, 10 + k) + ":7000";
    s.data_address = BenchIp(subnet, 10 + k) + ":8000";
    s.data_dir = data_dir(k);
    cfg->servers.push_back(s);
  }
}

Result<std::vector<pid_t>> StartBenchServers(Testbed& tb, const std::string& clfd,
                                             const std::string& cluster_file, int n,
                                             const std::function<std::string(int)>& log_path) {
  std::vector<pid_t> pids;
  for (int k = 0; k < n; ++k) {
    SpawnOptions so;
    so.stdout_path = log_path(k);
    Result<pid_t> pid = Spawn({"ip", "netns", "exec", tb.Namespace("s" + std::to_string(k)), clfd,
                               "--cluster", cluster_file, "--id", std::to_string(k), "--log-level",
                               "warn"},
                              so);
    if (!pid.ok()) {  // the ones started go at once
      for (pid_t p : pids) {
        StopProcess(p, 5000);
        tb.Forget(p);
      }
      return pid.status();
    }
    pids.push_back(*pid);
    tb.Track(*pid);
  }
  return pids;
}

}  // namespace clf::tools
