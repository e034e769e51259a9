// Simulated hosts for the benches that need a network between processes
// (clf bench sched, locks, collectives): each node is a network namespace
// joined by a veth pair to a switch in a namespace of its own, every veth end
// shaped by tc TBF to a fixed rate (both directions of the node's "NIC").
// The switch is the kernel bridge, or, given a per-hop delay D, a HopSwitch
// (tools/bench/hop_switch.h): a userspace switch that forwards every frame D
// after it arrived, so each node-to-node hop costs one-way D on top of the
// links (this kernel has no netem). Everything a Testbed made is removed by
// its destructor (processes it tracks are stopped by PID first, then the
// switch), also after an error.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/bench/hop_switch.h"

namespace clf::tools {

// Runs a command; an error names it and carries its output.
Status Cmd(const std::vector<std::string>& argv);

// Parses a tc rate ("100mbit", "1gbit", "500kbit") into MB/s (10^6 bytes).
Result<double> RateMBs(const std::string& rate);

class Testbed {
 public:
  // Namespace names start with `prefix` (callers use "<tag><pid>").
  // `hop_delay_us` > 0: the nodes are joined by a HopSwitch holding every frame
  // that long, not by the kernel bridge.
  explicit Testbed(std::string prefix, uint32_t hop_delay_us = 0)
      : prefix_(std::move(prefix)), hop_delay_us_(hop_delay_us) {}
  ~Testbed() { Teardown(); }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  const std::string& prefix() const { return prefix_; }
  // The switch's namespace (it holds the bridge br0 or the HopSwitch's ports).
  std::string Bridge() const { return prefix_ + "-br"; }
  uint32_t hop_delay_us() const { return hop_delay_us_; }
  // The namespace of node `name`.
  std::string Namespace(const std::string& name) const { return prefix_ + "-" + name; }

  // The switch namespace and its switch (bridge or HopSwitch); first.
  Status Start();
  Status AddNamespace(const std::string& ns);
  // A node: its namespace, a veth to the bridge, address `ip`/24, TBF both ways
  // (`burst`: the TBF bucket, tc units; bytes up to it pass at line rate).
  Status AddNode(const std::string& name, const std::string& ip, const std::string& rate,
                 const std::string& burst = "256kb");

  void Track(pid_t pid) { pids_.push_back(pid); }
  void Forget(pid_t pid);
  // Stops the HopSwitch (no-op without one; the nodes are cut off from each
  // other after) and returns its final counters.
  HopSwitch::Stats StopSwitch();
  // Stops the tracked processes and the HopSwitch, deletes the namespaces (and
  // with them the veths).
  void Teardown();

 private:
  const std::string prefix_;
  const uint32_t hop_delay_us_;
  std::unique_ptr<HopSwitch> switch_;
  HopSwitch::Stats switch_stats_;
  std::vector<std::string> namespaces_;
  std::vector<pid_t> pids_;
};

// What every netns bench (clf bench sched, collectives) needs before it
// builds its testbed: root, its output folder, the clfd binary, this
// executable (run again inside client namespaces), SIGINT/SIGTERM routed to
// `on_signal`, and a work folder /tmp/clf-bench-`name`-XXXXXX that the
// destructor removes (declare the Testbed after it: torn down first).
class BenchWork {
 public:
  static Result<std::unique_ptr<BenchWork>> Start(const std::string& name, const std::string& out,
                                                  void (*on_signal)(int));
  ~BenchWork();
  BenchWork(const BenchWork&) = delete;
  BenchWork& operator=(const BenchWork&) = delete;

  const std::string& clfd() const { return clfd_; }
  const std::string& self() const { return self_; }
  const std::string& dir() const { return dir_; }

 private:
  BenchWork() = default;
  std::string clfd_, self_, dir_;
};

// Deletes namespaces named `tag`<pid>-* whose owning `clf` process is gone
// (left by a bench killed with SIGKILL); prints how many. Returns an exit code.
int CleanupStale(const std::string& tag);

}  // namespace clf::tools
