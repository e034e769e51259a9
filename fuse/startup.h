// clfmount's command line: parsing it (libfuse's fuse_opt) and resolving the
// options into the client's and the mount's settings. Nothing here looks
// outside the process (no file system, network or process state); what does
// (absolute paths, the cluster file, the credential, the pipe probe) stays in
// fuse/main.cc, which calls these in this order:
//   ParseCommandLine -> CheckTimeouts -> paths, cluster file -> ResolveOptions
//   -> credential check -> DefaultFuseOptions.
// Errors' messages are what clfmount prints after "clfmount: ".
#pragma once

#include <functional>
#include <string>

#include "client/include/clf/client.h"
#include "common/status.h"
#include "fuse/fuse_ll.h"
#include "fuse/mount_options.h"

namespace clf::fuse {

// Filled by fuse_opt_parse: standard layout, C strings owned by it (strdup;
// FreeStrings frees them). The defaults are clfmount's.
struct CliOptions {
  char* cluster_file = nullptr;
  char* mountpoint = nullptr;
  char* log_path = nullptr;
  char* log_level = nullptr;
  char* transport = nullptr;
  char* tls_cert = nullptr;
  char* tls_key = nullptr;
  char* sched = nullptr;        // order policy (paper 000)
  char* sched_block = nullptr;  // schedule block size, e.g. "1M"
  char* read_sched = nullptr;   // replicated files' reads (paper 001)
  char* direct_read_min = nullptr;  // e.g. "16M"; "0": off
  unsigned sched_window = 0;
  unsigned max_pages = 1024;  // pages per FUSE request; 0: libfuse's (max_write's)
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
  double negative_timeout = 1.0;
  int writeback = 0;
  int kernel_permissions = 1;
  int writebehind = 1;
  int parallel_writes = 1;
  int async_ns = 1;
  int splice_reads = 1;
  unsigned lock_lease_ms = 0;
  int foreground = 0;
  int debug = 0;
  int help = 0;
  int version = 0;
  int bad = 0;
};

// Parses `args` (argv) into *o: the two positional arguments (cluster file,
// mount point), clfmount's -o options, -f, -d, -h, -V; mount(8)'s -n and -v
// are dropped. What is left in *args is for libfuse (allow_other, ro, ...;
// -d adds libfuse's request trace). False on a parse error or a third
// positional argument (said on stderr).
bool ParseCommandLine(fuse_args* args, CliOptions* o);

// The strings ParseCommandLine strdup'ed into `o`.
void FreeStrings(CliOptions* o);

// No timeout may be negative.
Status CheckTimeouts(const CliOptions& o);

// What the options resolve to.
struct ResolvedOptions {
  std::string log_level;        // -o loglevel, else debug with -d, else info
  client::ClientOptions copts;  // credentials, transport, data-path scheduling
  MountOptions mopts;
};

// The options checked (timeouts, transport, sched, sched_block, read_sched,
// sched_window, max_pages, direct_read_min: the first bad one is the error,
// naming its option) and resolved. splice_reads needs pipes of the read-ahead
// chunks' size: `pipes_usable` is asked (only) when it is on, and only once
// the client's options passed.
Result<ResolvedOptions> ResolveOptions(const CliOptions& o,
                                       const std::function<bool()>& pipes_usable);

// `path` made absolute against `cwd` (empty: unknown, `path` stays as it
// is); null or empty stays empty.
std::string AbsoluteLogPath(const char* path, const std::string& cwd);

// The -o options clfmount puts before the user's (so the user's win): the
// file system's name and type, default_permissions unless
// nodefault_permissions, and allow_other when run by root.
std::string DefaultFuseOptions(const CliOptions& o, const std::string& cluster_name, bool root);

}  // namespace clf::fuse
