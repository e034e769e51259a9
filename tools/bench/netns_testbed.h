// Simulated hosts for the benches that need a network between processes
// (clf bench sched; others may use it): each node is a network namespace
// joined by a veth pair to a bridge in a namespace of its own, every veth end
// shaped by tc TBF to a fixed rate (both directions of the node's "NIC").
// Everything a Testbed made is removed by its destructor (processes it
// tracks are stopped by PID first), also after an error.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace clf::tools {

// Runs a command; an error names it and carries its output.
Status Cmd(const std::vector<std::string>& argv);

// Parses a tc rate ("100mbit", "1gbit", "500kbit") into MB/s (10^6 bytes).
Result<double> RateMBs(const std::string& rate);

class Testbed {
 public:
  // Namespace names start with `prefix` (callers use "<tag><pid>").
  explicit Testbed(std::string prefix) : prefix_(std::move(prefix)) {}
  ~Testbed() { Teardown(); }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  const std::string& prefix() const { return prefix_; }
  std::string Bridge() const { return prefix_ + "-br"; }
  // The namespace of node `name`.
  std::string Namespace(const std::string& name) const { return prefix_ + "-" + name; }

  // The bridge namespace and its bridge; first.
  Status Start();
  Status AddNamespace(const std::string& ns);
  // A node: its namespace, a veth to the bridge, address `ip`/24, TBF both ways
  // (`burst`: the TBF bucket, tc units; bytes up to it pass at line rate).
  Status AddNode(const std::string& name, const std::string& ip, const std::string& rate,
                 const std::string& burst = "256kb");

  void Track(pid_t pid) { pids_.push_back(pid); }
  void Forget(pid_t pid);
  // Stops the tracked processes, deletes the namespaces (and with them the veths).
  void Teardown();

 private:
  const std::string prefix_;
  std::vector<std::string> namespaces_;
  std::vector<pid_t> pids_;
};

// Deletes namespaces named `tag`<pid>-* whose owning `clf` process is gone
// (left by a bench killed with SIGKILL); prints how many. Returns an exit code.
int CleanupStale(const std::string& tag);

}  // namespace clf::tools
