// Registration of the `clf` subcommands. Each Add*Command adds one subcommand
// (with its options and callback) to the app it is given; the callback runs on
// the main thread after parsing and ends the program with Exit(code).
#pragma once

#include <iostream>

#include <CLI/CLI.hpp>

#include "common/status.h"

namespace clf::tools {

// Ends a subcommand's callback with exit code `code` (0: returns): CLI11
// hands the code of a CLI::RuntimeError to main's CLI11_PARSE, which returns
// it. Nothing after a nonzero Exit runs.
inline void Exit(int code) {
  if (code != 0) throw CLI::RuntimeError(code);
}

// Ends a subcommand's callback: an error is printed ("clf: ...") and exits 1.
inline void ReportStatus(const Status& st) {
  if (st.ok()) return;
  std::cerr << "clf: " << st.ToString() << "\n";
  Exit(1);
}

// up, down: a local cluster on loopback (tools/up_down_cmds.cc).
void AddUpDownCommands(CLI::App& app);
// status, df, layout, setlayout (tools/cluster_cmds.cc).
void AddClusterCommands(CLI::App& app);
// fsck: cross-server consistency check and repair (tools/fsck_cmd.cc).
void AddFsckCommand(CLI::App& app);

// locks: holders and waiters of a file's locks (tools/locks_cmd.cc).
void AddLocksCommand(CLI::App& app);
// init: a cluster file and a secret for a multi-host install (tools/init_cmd.cc).
void AddInitCommand(CLI::App& app);

// certs: the cluster CA and server/client certificates (tools/certs_cmd.cc).
void AddCertsCommand(CLI::App& app);

// sim paper001|paper000|optimum: the scheduling simulator (tools/sim/sim_cmd.cc).
void AddSimCommand(CLI::App& app);

// bench locks: paper 003's lock experiments (tools/bench/locks/locks_cmd.cc).
void AddBenchLocksCommand(CLI::App& bench);
// bench sched: paper 000 on real processes in network namespaces (tools/bench/sched/sched_cmd.cc).
void AddBenchSchedCommand(CLI::App& bench);
// bench replicas: paper 001's read heuristics on real processes (tools/bench/replicas/).
void AddBenchReplicasCommand(CLI::App& bench);
// bench transport: one client to one server per transport vs iperf3 (tools/bench/transport/).
void AddBenchTransportCommand(CLI::App& bench);
// bench collectives: paper 004's create/stat/remove per metadata mode (tools/bench/collectives/).
void AddBenchCollectivesCommand(CLI::App& bench);

}  // namespace clf::tools
