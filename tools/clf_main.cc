// clf: the Clusterfile admin CLI.
#include <CLI/CLI.hpp>

#include "common/version.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"clf: Clusterfile admin CLI"};
  app.set_version_flag("--version", std::string("clf ") + clf::kVersion);
  app.require_subcommand(1);
  clf::tools::AddSimCommand(app);
  clf::tools::AddUpDownCommands(app);
  clf::tools::AddClusterCommands(app);
  clf::tools::AddFsckCommand(app);
  clf::tools::AddLocksCommand(app);
  clf::tools::AddInitCommand(app);
  clf::tools::AddCertsCommand(app);
  CLI::App* bench = app.add_subcommand("bench", "benchmarks (print tables; not timed tests)");
  bench->require_subcommand(1);
  clf::tools::AddBenchLocksCommand(*bench);
  clf::tools::AddBenchSchedCommand(*bench);
  clf::tools::AddBenchReplicasCommand(*bench);
  clf::tools::AddBenchCollectivesCommand(*bench);
  clf::tools::AddBenchTransportCommand(*bench);
  (void)bench;
  CLI11_PARSE(app, argc, argv);  // a subcommand's nonzero exit code too (tools::Exit)
  return 0;
}
