#include "tools/bench/netns_testbed.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "tools/process_util.h"

namespace clf::tools {

Status Cmd(const std::vector<std::string>& argv) {
  CLF_ASSIGN_OR_RETURN(RunResult r, Run(argv, 30000));
  if (r.exit_code != 0) {
    std::string line;
    for (const std::string& s : argv) line += s + " ";
    return IoError(line + "failed (" + std::to_string(r.exit_code) + "): " + r.output);
  }
  return Status::Ok();
}

Result<double> RateMBs(const std::string& rate) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(rate, &pos);
  } catch (...) {
    return Invalid("bad --rate " + rate);
  }
  const std::string unit = rate.substr(pos);
  if (unit == "kbit") return v * 1e3 / 8 / 1e6;
  if (unit == "mbit") return v * 1e6 / 8 / 1e6;
  if (unit == "gbit") return v * 1e9 / 8 / 1e6;
  return Invalid("--rate wants kbit, mbit or gbit (tc units), got " + rate);
}

Status Testbed::AddNamespace(const std::string& ns) {
  CLF_RETURN_IF_ERROR(Cmd({"ip", "netns", "add", ns}));
  namespaces_.push_back(ns);
  return Cmd({"ip", "-n", ns, "link", "set", "lo", "up"});
}

Status Testbed::AddNode(const std::string& name, const std::string& ip, const std::string& rate,
                        const std::string& burst) {
  const std::string ns = Namespace(name);
  CLF_RETURN_IF_ERROR(AddNamespace(ns));
  const std::string port = "v" + name;  // the bridge end, in the bridge namespace
  CLF_RETURN_IF_ERROR(Cmd({"ip", "-n", Bridge(), "link", "add", port, "type", "veth", "peer",
                           "name", "eth0", "netns", ns}));
  if (switch_ == nullptr) {
    CLF_RETURN_IF_ERROR(Cmd({"ip", "-n", Bridge(), "link", "set", port, "master", "br0", "up"}));
  } else {
    CLF_RETURN_IF_ERROR(Cmd({"ip", "-n", Bridge(), "link", "set", port, "up"}));
  }
  CLF_RETURN_IF_ERROR(Cmd({"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"}));
  CLF_RETURN_IF_ERROR(Cmd({"ip", "-n", ns, "link", "set", "eth0", "up"}));
  // TBF on both ends: node -> bridge (its upload) and bridge -> node (its download).
  for (const auto& [where, dev] : {std::pair{ns, std::string("eth0")}, std::pair{Bridge(), port}}) {
    CLF_RETURN_IF_ERROR(Cmd({"ip", "netns", "exec", where, "tc", "qdisc", "add", "dev", dev, "root",
                             "tbf", "rate", rate, "burst", burst, "latency", "50ms"}));
  }
  if (switch_ != nullptr) CLF_RETURN_IF_ERROR(switch_->AddPort(port));
  return Status::Ok();
}

Status Testbed::Start() {
  CLF_RETURN_IF_ERROR(AddNamespace(Bridge()));
  if (hop_delay_us_ > 0) {
    CLF_ASSIGN_OR_RETURN(switch_, HopSwitch::Start(Bridge(), hop_delay_us_));
    return Status::Ok();
  }
  CLF_RETURN_IF_ERROR(Cmd({"ip", "-n", Bridge(), "link", "add", "br0", "type", "bridge"}));
  return Cmd({"ip", "-n", Bridge(), "link", "set", "br0", "up"});
}

void Testbed::Forget(pid_t pid) { pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end()); }

HopSwitch::Stats Testbed::StopSwitch() {
  if (switch_ != nullptr) {
    switch_->Stop();
    switch_stats_ = switch_->stats();
    switch_.reset();
  }
  return switch_stats_;
}

void Testbed::Teardown() {
  for (pid_t p : pids_) StopProcess(p, 3000);
  pids_.clear();
  // Before the namespaces: the switch thread and its sockets keep its namespace alive.
  StopSwitch();
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    Cmd({"ip", "netns", "del", *it}).IgnoreError();
  }
  namespaces_.clear();
}

int CleanupStale(const std::string& tag) {
  Result<RunResult> r = Run({"ip", "netns", "list"}, 10000);
  if (!r.ok()) return 1;
  std::istringstream in(r->output);
  std::string line;
  int removed = 0;
  while (std::getline(in, line)) {
    const std::string ns = line.substr(0, line.find(' '));
    if (ns.rfind(tag, 0) != 0) continue;
    const std::string digits = ns.substr(tag.size(), ns.find('-') - tag.size());
    const pid_t owner = static_cast<pid_t>(std::atol(digits.c_str()));
    if (owner > 0 && ProcessAlive(owner) && ProcessName(owner) == "clf") continue;
    if (Cmd({"ip", "netns", "del", ns}).ok()) ++removed;
  }
  std::printf("removed %d stale bench namespace(s)\n", removed);
  return 0;
}

Result<std::unique_ptr<BenchWork>> BenchWork::Start(const std::string& name,
                                                    const std::string& out,
                                                    void (*on_signal)(int)) {
  if (out.empty()) return Invalid("--out DIR is required");
  if (geteuid() != 0) return Status(Code::kPermission, "needs root (ip netns, tc)");
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return IoError("cannot create " + out + ": " + ec.message());
  std::unique_ptr<BenchWork> w(new BenchWork());
  w->clfd_ = FindBinary("clfd", {"server"});
  if (w->clfd_.empty()) return Status(Code::kNotFound, "clfd not found");
  char self_buf[4096];
  const ssize_t sl = readlink("/proc/self/exe", self_buf, sizeof self_buf - 1);
  if (sl <= 0) return IoError("cannot find this executable");
  w->self_.assign(self_buf, static_cast<size_t>(sl));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::string tmpl = "/tmp/clf-bench-" + name + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return FromErrno(errno, "mkdtemp");
  w->dir_ = tmpl;
  return w;
}

BenchWork::~BenchWork() {
  if (dir_.empty()) return;
  std::error_code e;
  std::filesystem::remove_all(dir_, e);
}

}  // namespace clf::tools
