// clfmount: mounts a Clusterfile namespace with FUSE.
//
//   clfmount CLUSTER_FILE MNT [-o OPTS] [-f] [-d]
//
// The positional form mount.fuse3 uses, so `mount -t fuse.clfmount CLUSTER_FILE
// MNT` and fstab lines work. Without -f the process daemonizes after the
// mount succeeded: the caller's clfmount returns once the mount exists.
//
// Order matters: the cluster file and secret are checked, the session is
// created and mounted, then the process daemonizes, and only then are the
// logger's flush thread and the client's gRPC threads started (threads do not
// survive fork). Teardown runs the stop hooks in reverse order of setup.
#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "client/include/clf/client.h"
#include "common/config.h"
#include "common/log.h"
#include "common/malloc_tuning.h"
#include "common/version.h"
#include "fuse/chunk_bytes.h"
#include "fuse/fuse_ll.h"
#include "fuse/init_patch.h"
#include "fuse/mount.h"
#include "fuse/ops_util.h"
#include "fuse/startup.h"

namespace clf::fuse {
namespace {

void Usage(const char* prog) {
  std::printf(
      "usage: %s CLUSTER_FILE MOUNTPOINT [-o OPTIONS] [-f] [-d]\n"
      "\n"
      "  -f                     stay in the foreground\n"
      "  -d, -o debug           foreground, debug logging, libfuse request trace\n"
      "  -o log=PATH            log to PATH (default: stderr; nowhere once daemonized)\n"
      "  -o loglevel=LEVEL      trace, debug, info (default), warn, error\n"
      "  -o attr_timeout=S      attribute cache timeout in seconds (default 1)\n"
      "  -o entry_timeout=S     name cache timeout in seconds (default 1)\n"
      "  -o negative_timeout=S  cache of missing names in seconds (default 1)\n"
      "  -o writeback|nowriteback  kernel writeback cache (default off: with it every\n"
      "                         unlink costs the kernel a setattr round trip more)\n"
      "  -o writebehind|nowritebehind  writes answered once the mount has the bytes,\n"
      "                         gathered and sent in the background; on the servers\n"
      "                         before close, fsync, a lock call or a read here returns\n"
      "                         (default on; O_DIRECT/O_SYNC writes never)\n"
      "  -o parallel_writes|noparallel_writes  opens for writing bypass the kernel's\n"
      "                         page cache, so writers of one file (N processes, one\n"
      "                         shared file) are not serialized by the kernel (default\n"
      "                         on; kernels with FUSE 7.39 or later, not with writeback)\n"
      "  -o default_permissions|nodefault_permissions  the kernel checks every\n"
      "                         permission, with the attributes it holds (default on;\n"
      "                         the servers check every request again). Off: the mount\n"
      "                         checks what it answers itself (one kernel round trip\n"
      "                         less per unlink), but nobody checks the kernel's own\n"
      "                         opens of FIFOs and device nodes, and a chmod of a\n"
      "                         directory reaches names the kernel cached only after\n"
      "                         entry_timeout\n"
      "  -o direct_read_min=SIZE  read-only opens of files this large or larger bypass\n"
      "                         the kernel's page cache: their reads come from the\n"
      "                         mount's read-ahead (one copy less per byte, no\n"
      "                         client caching of them; mmap still works). 0: every\n"
      "                         read-only open uses the page cache (default 16M;\n"
      "                         needs FUSE 7.39 and no writeback, as parallel_writes)\n"
      "  -o splice_reads|nosplice_reads  read-ahead chunks from the TCP data channel\n"
      "                         stay in pipes (spliced from the socket) and reads are\n"
      "                         answered from them by splice: one copy less per byte\n"
      "                         (default on)\n"
      "  -o max_pages=N         pages one FUSE request may carry (default 1024: direct\n"
      "                         reads of up to 4 MiB, from any buffer alignment, are\n"
      "                         one request; raises fs.fuse.max_pages_limit to N if\n"
      "                         lower; 0: libfuse's, 256)\n"
      "  -o async|noasync       directory leases: creates, unlinks and their setattrs\n"
      "                         answered here, committed in order (default on)\n"
      "  -o lock_lease_ms=MS    lease of this mount's lock sessions (default: the servers', 15 s)\n"
      "  -o transport=T         bulk data: auto, tcp, grpc (default: the cluster file's)\n"
      "  -o tls_cert=P,tls_key=P  this mount's client certificate and key (with [tls];\n"
      "                         default: the cluster file's client_cert/client_key)\n"
      "  -o sched=P             order of schedule blocks: first, random, hash (default: the\n"
      "                         cluster file's; a directory's setlayout --sched wins)\n"
      "  -o sched_block=SIZE    schedule block size b, e.g. 64K, 1M (default: stripe size)\n"
      "  -o sched_window=N      schedule blocks in flight per request (default: servers)\n"
      "  -o read_sched=H        replicated files: which copy serves each read block: eatf,\n"
      "                         sjf, lcdf, lddf, ldsdf, random, primary (default: the\n"
      "                         cluster file's, eatf; a directory's setlayout --read-sched wins)\n"
      "  other -o options go to libfuse/the kernel (allow_other, ro, ...)\n"
      "\n",
      prog);
  std::fflush(stdout);
  fuse_lowlevel_help();
}

// libfuse's messages into our logger.
void FuseLog(enum fuse_log_level level, const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  size_t n = std::strlen(buf);
  while (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
  spdlog::level::level_enum lvl = spdlog::level::debug;
  if (level <= FUSE_LOG_ERR) {
    lvl = spdlog::level::err;
  } else if (level == FUSE_LOG_WARNING) {
    lvl = spdlog::level::warn;
  } else if (level <= FUSE_LOG_INFO) {
    lvl = spdlog::level::info;
  }
  spdlog::default_logger_raw()->log(lvl, "libfuse: {}", buf);
}

// The absolute path, or empty with *err set.
std::string Absolute(const char* path, int* err) {
  char buf[PATH_MAX];
  if (realpath(path, buf) == nullptr) {
    *err = errno;
    return {};
  }
  return buf;
}

// Raises the mount's readahead window to 1 MiB (the kernel starts FUSE
// mounts at 128 KiB): sequential reads then arrive as 1 MiB requests, one
// stripe unit each. Best effort; reads the mount's device from mountinfo so
// it never touches the mount itself.
void RaiseReadahead(const std::string& mountpoint) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mnt;
    if (!(fields >> id >> parent >> dev >> root >> mnt)) continue;
    if (mnt != mountpoint) continue;
    std::ofstream ra("/sys/class/bdi/" + dev + "/read_ahead_kb");
    if (ra) ra << 1024 << std::endl;
  }
}

// The kernel clips the INIT reply's max_pages to fs.fuse.max_pages_limit
// (256 by default). Raises it to `pages` when lower; best effort (root only,
// kernels from 6.12; older kernels have 256 built in). Returns what to log
// once logging is set up (empty: nothing).
std::string RaiseMaxPagesLimit(uint32_t pages) {
  const char* path = "/proc/sys/fs/fuse/max_pages_limit";
  std::ifstream in(path);
  uint32_t limit = 0;
  if (!(in >> limit)) return "no fs.fuse.max_pages_limit: FUSE requests stay at the kernel's page limit";
  if (limit >= pages) return {};
  std::ofstream out(path);
  if (out) out << pages << std::endl;
  if (!out) {
    return "fs.fuse.max_pages_limit is " + std::to_string(limit) + " and could not be raised to " +
           std::to_string(pages) + " (-o max_pages): FUSE requests stay at " + std::to_string(limit) +
           " pages";
  }
  return "raised fs.fuse.max_pages_limit from " + std::to_string(limit) + " to " + std::to_string(pages) +
         " (-o max_pages)";
}

// Stop hooks run last-in first-out.
class StopStack {
 public:
  void Push(std::string name, std::function<void()> fn) {
    hooks_.emplace_back(std::move(name), std::move(fn));
  }
  void RunAll() {
    while (!hooks_.empty()) {
      auto [name, fn] = std::move(hooks_.back());
      hooks_.pop_back();
      CLF_LOG_DEBUG("stop: {}", name);
      fn();
    }
  }
  ~StopStack() { RunAll(); }

 private:
  std::vector<std::pair<std::string, std::function<void()>>> hooks_;
};

// The FUSE session, created and mounted at `mountpoint` (before the process
// daemonizes); its undoing pushed on `stop`. Null: libfuse said why.
fuse_session* MountSession(fuse_args* args, Mount* mount, const std::string& mountpoint,
                           StopStack* stop) {
  static const fuse_lowlevel_ops ops = MakeOps();
  fuse_session* se = fuse_session_new(args, &ops, sizeof(ops), mount);
  if (se == nullptr) return nullptr;
  mount->set_session(se);
  stop->Push("destroy session", [se] { fuse_session_destroy(se); });
  if (fuse_set_signal_handlers(se) != 0) return nullptr;
  stop->Push("remove signal handlers", [se] { fuse_remove_signal_handlers(se); });
  if (fuse_session_mount(se, mountpoint.c_str()) != 0) return nullptr;
  stop->Push("unmount", [se] { fuse_session_unmount(se); });
  if (int rc = InstallInitPatch(se); rc != 0) {
    std::fprintf(stderr, "clfmount: custom io for the INIT reply: %s\n", std::strerror(-rc));
    return nullptr;
  }
  return se;
}

// After daemonizing: libclf, the namespace's leases and queue (AsyncNs) with
// write-behind through the client, and the lock client; their draining at
// unmount pushed on `stop`.
Status ConnectClient(Mount& mount, const ClusterConfig& cluster, client::ClientOptions copts,
                     const std::string& mountpoint, StopStack* stop) {
  const MountOptions& mopts = mount.options();
  // No directory-attribute cache in libclf: replies already on their way
  // when this mount changed a directory (a lookup's parent, a create's)
  // refilled it with the attributes from before the change, and a getattr
  // answered from it gave the kernel a stale mode for up to a second (the
  // permission differential found it). The kernel's attribute timeout and
  // the directory leases cache what is safe to cache.
  copts.dir_attr_cache_ms = 0;
  CLF_LOG_INFO("data transport: {} (each server's pick is logged at its first data call)",
               copts.transport.empty() ? std::string(TransportName(cluster.transport))
                                       : copts.transport);
  Result<std::unique_ptr<client::Client>> c = client::Client::Open(cluster, copts);
  if (!c.ok()) return c.status().WithContext("cannot open the cluster");
  mount.set_client(std::move(*c));
  // A listing may carry names only while the kernel still has the entries and
  // attributes of the last full one (half the shorter timeout).
  const auto names_window = std::chrono::duration_cast<AsyncNs::Clock::duration>(
      std::chrono::duration<double>(std::min(mopts.attr_timeout, mopts.entry_timeout) / 2));
  mount.set_ns(std::make_unique<AsyncNs>(&mount.client(), mopts.async_ns, names_window));
  // Write-behind runs go out through the client like any write; the outcome
  // is the file's (a failure reported by its next flush/fsync).
  mount.ns().SetWriteSender([&mount](Handle ino, const Layout& layout, uint64_t offset,
                                     std::string data) {
    const uint64_t n = data.size();
    mount.client().Write(ino, layout, offset, std::move(data),
                         Completion<uint64_t>(mount, nullptr, [&mount, ino, offset, n](Result<uint64_t> r) {
                           Status s = r.status();
                           if (s.ok() && *r != n) {
                             s = Status(Code::kIo, "short write: " + std::to_string(*r) + " of " +
                                                       std::to_string(n) + " bytes");
                           }
                           mount.ns().EndWrite(ino, offset, n, s);
                         }));
  });
  // fcntl/flock locks through the cluster's lock service; the sessions'
  // leases are renewed in the background and closed at unmount.
  client::LockClientOptions lopts;
  lopts.lease_ms = mopts.lock_lease_ms;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  lopts.client_name = std::string(host) + ":" + std::to_string(getpid()) + ":" + mountpoint;
  lopts.tls_cert = copts.tls_cert;
  lopts.tls_key = copts.tls_key;
  Result<std::unique_ptr<client::LockClient>> lc = client::LockClient::Open(cluster, lopts);
  if (!lc.ok()) return lc.status().WithContext("cannot open the lock client");
  mount.set_locks(std::move(*lc));
  stop->Push("drain and close the client", [&mount] {
    mount.ns().Shutdown();  // deferred changes committed, leases given back
    mount.Drain();
    CLF_LOG_INFO("client drained; {} inodes still known", mount.inodes().size());
    mount.reset_locks();
    mount.reset_client();
  });
  return Status::Ok();
}

// Serves requests until the file system is unmounted or a signal stops it:
// libfuse's return code.
int ServeRequests(fuse_session* se, StopStack* stop) {
  fuse_loop_config* loop = fuse_loop_cfg_create();
  stop->Push("free loop config", [loop] { fuse_loop_cfg_destroy(loop); });
  // Handlers never block, so a few threads reading /dev/fuse keep up. As
  // many may idle as may run: libfuse ends a worker once more than the idle
  // limit wait, and a sequential stream of requests (rm -r) otherwise
  // starts and ends threads all along.
  fuse_loop_cfg_set_max_threads(loop, 8);
  fuse_loop_cfg_set_idle_threads(loop, 8);
  fuse_loop_cfg_set_clone_fd(loop, 0);
  return fuse_session_loop_mt(se, loop);
}

// What the mount is made from, resolved from the command line before anything
// is mounted.
struct Startup {
  std::string cluster_file, mountpoint;  // absolute
  std::string log_path;                  // absolute (empty: none)
  ClusterConfig cluster;
  ResolvedOptions opts;
};

// The working directory ("" if it cannot be named).
std::string WorkingDirectory() {
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof(cwd)) != nullptr ? std::string(cwd) : std::string();
}

// Checks the parsed options, loads the cluster file and checks the credential,
// in that order (the timeouts before the paths): the first error is the one
// printed. The error's message is what clfmount prints after "clfmount: ".
Result<Startup> ResolveStartup(const CliOptions& o) {
  CLF_RETURN_IF_ERROR(CheckTimeouts(o));
  // Paths absolute before fuse_daemonize changes to "/".
  Startup st;
  int err = 0;
  st.cluster_file = Absolute(o.cluster_file, &err);
  if (st.cluster_file.empty()) {
    return Invalid(std::string("cluster file ") + o.cluster_file + ": " + std::strerror(err));
  }
  st.mountpoint = Absolute(o.mountpoint, &err);
  if (st.mountpoint.empty()) {
    return Invalid(std::string("mount point ") + o.mountpoint + ": " + std::strerror(err));
  }
  st.log_path = AbsoluteLogPath(o.log_path, WorkingDirectory());
  Result<ClusterConfig> cluster = LoadClusterConfig(st.cluster_file);
  if (!cluster.ok()) return Invalid(st.cluster_file + ": " + cluster.status().ToString());
  st.cluster = std::move(*cluster);
  CLF_ASSIGN_OR_RETURN(st.opts, ResolveOptions(o, PipesUsable));
  // The credential (secret or certificate) is checked before mounting.
  if (Status cs = client::Client::CheckCredentials(st.cluster, st.opts.copts); !cs.ok()) {
    return Invalid(cs.ToString());
  }
  return st;
}

// Our defaults go first so the user's -o options can override them.
int InsertDefaultOptions(fuse_args* args, const CliOptions& o, const std::string& cluster_name) {
  const std::string defaults = DefaultFuseOptions(o, cluster_name, geteuid() == 0);
  return fuse_opt_insert_arg(args, 1, defaults.c_str());
}

void LogSpliceCounts() {
  CLF_LOG_INFO("read-ahead from pipes: {} replies spliced, {} copied from a pipe; {} chunks read "
               "out of their pipe, {} fetched into memory instead",
               spliced_replies(), spliced_reply_fallbacks(), ChunkBytes::drained(),
               ChunkBytes::not_in_pipe());
}

// Parse the command line -> resolve and check what it names -> mount ->
// daemonize -> connect -> serve until unmounted -> stop hooks.
int Run(int argc, char** argv) {
  fuse_args args = FUSE_ARGS_INIT(argc, argv);
  CliOptions o;
  StopStack stop;
  stop.Push("free arguments", [&] {
    fuse_opt_free_args(&args);
    FreeStrings(&o);
  });
  if (!ParseCommandLine(&args, &o)) return 1;
  if (o.help) {
    Usage(argv[0]);
    return 0;
  }
  if (o.version) {
    std::printf("clfmount %s (libfuse %s)\n", CLF_VERSION, fuse_pkgversion());
    return 0;
  }
  if (o.cluster_file == nullptr || o.mountpoint == nullptr) {
    std::fprintf(stderr, "usage: %s CLUSTER_FILE MOUNTPOINT [-o OPTIONS] [-f]\n", argv[0]);
    return 1;
  }
  Result<Startup> st = ResolveStartup(o);
  if (!st.ok()) {
    std::fprintf(stderr, "clfmount: %s\n", st.status().message().c_str());
    return 1;
  }
  if (InsertDefaultOptions(&args, o, st->cluster.name) != 0) return 1;

  Mount mount(st->opts.mopts);
  fuse_session* se = MountSession(&args, &mount, st->mountpoint, &stop);
  if (se == nullptr) return 1;
  RaiseReadahead(st->mountpoint);
  const uint32_t max_pages = st->opts.mopts.max_pages;
  const std::string pages_note = max_pages != 0 ? RaiseMaxPagesLimit(max_pages) : "";

  if (fuse_daemonize(o.foreground) != 0) return 1;  // libfuse said why

  log::Init("clfmount", st->opts.log_level, st->log_path);
  fuse_set_log_func(FuseLog);
  CLF_LOG_INFO("clfmount {} mounting cluster '{}' ({} servers) at {}", CLF_VERSION,
               st->cluster.name, st->cluster.size(), st->mountpoint);
  if (!pages_note.empty()) CLF_LOG_INFO("{}", pages_note);
  Status cs = ConnectClient(mount, st->cluster, st->opts.copts, st->mountpoint, &stop);
  if (!cs.ok()) {
    CLF_LOG_ERROR("{}: {}", st->cluster_file, cs.ToString());
    if (o.foreground) std::fprintf(stderr, "clfmount: %s\n", cs.ToString().c_str());
    return 1;
  }

  const int rc = ServeRequests(se, &stop);
  CLF_LOG_INFO("session loop ended ({}), unmounting {}", rc, st->mountpoint);
  stop.RunAll();
  if (st->opts.mopts.splice_reads) LogSpliceCounts();
  CLF_LOG_INFO("clfmount stopped");
  spdlog::default_logger_raw()->flush();
  // A stop by signal (SIGTERM, SIGINT, SIGHUP) is a clean stop.
  return rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP ? 0 : 1;
}

}  // namespace
}  // namespace clf::fuse

int main(int argc, char** argv) {
  clf::TuneMalloc();
  try {
    return clf::fuse::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clfmount: %s\n", e.what());
    return 1;
  }
}
