#include "fuse/startup.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/config.h"
#include "common/sched_settings.h"

namespace clf::fuse {
namespace {

enum Key { kKeyForeground, kKeyDebug, kKeyHelp, kKeyVersion, kKeyIgnore };

#define CLF_OPT(templ, field, value) \
  fuse_opt { templ, offsetof(CliOptions, field), value }

const fuse_opt kOptions[] = {
    CLF_OPT("log=%s", log_path, 0),
    CLF_OPT("loglevel=%s", log_level, 0),
    CLF_OPT("transport=%s", transport, 0),
    CLF_OPT("tls_cert=%s", tls_cert, 0),
    CLF_OPT("tls_key=%s", tls_key, 0),
    CLF_OPT("sched=%s", sched, 0),
    CLF_OPT("sched_block=%s", sched_block, 0),
    CLF_OPT("read_sched=%s", read_sched, 0),
    CLF_OPT("direct_read_min=%s", direct_read_min, 0),
    CLF_OPT("sched_window=%u", sched_window, 0),
    CLF_OPT("max_pages=%u", max_pages, 0),
    CLF_OPT("attr_timeout=%lf", attr_timeout, 0),
    CLF_OPT("entry_timeout=%lf", entry_timeout, 0),
    CLF_OPT("negative_timeout=%lf", negative_timeout, 0),
    CLF_OPT("default_permissions", kernel_permissions, 1),
    CLF_OPT("nodefault_permissions", kernel_permissions, 0),
    CLF_OPT("writeback", writeback, 1),
    CLF_OPT("nowriteback", writeback, 0),
    CLF_OPT("writebehind", writebehind, 1),
    CLF_OPT("nowritebehind", writebehind, 0),
    CLF_OPT("parallel_writes", parallel_writes, 1),
    CLF_OPT("noparallel_writes", parallel_writes, 0),
    CLF_OPT("async", async_ns, 1),
    CLF_OPT("noasync", async_ns, 0),
    CLF_OPT("splice_reads", splice_reads, 1),
    CLF_OPT("nosplice_reads", splice_reads, 0),
    CLF_OPT("lock_lease_ms=%u", lock_lease_ms, 0),
    FUSE_OPT_KEY("-f", kKeyForeground),
    FUSE_OPT_KEY("-d", kKeyDebug),
    FUSE_OPT_KEY("debug", kKeyDebug),
    FUSE_OPT_KEY("-h", kKeyHelp),
    FUSE_OPT_KEY("--help", kKeyHelp),
    FUSE_OPT_KEY("-V", kKeyVersion),
    FUSE_OPT_KEY("--version", kKeyVersion),
    FUSE_OPT_KEY("-n", kKeyIgnore),  // mount(8) passes these to helpers
    FUSE_OPT_KEY("-v", kKeyIgnore),
    FUSE_OPT_END,
};

#undef CLF_OPT

int ProcessArg(void* data, const char* arg, int key, fuse_args* /*outargs*/) {
  auto* o = static_cast<CliOptions*>(data);
  switch (key) {
    case FUSE_OPT_KEY_NONOPT:
      if (o->cluster_file == nullptr) {
        o->cluster_file = strdup(arg);
      } else if (o->mountpoint == nullptr) {
        o->mountpoint = strdup(arg);
      } else {
        std::fprintf(stderr, "clfmount: unexpected argument '%s'\n", arg);
        o->bad = 1;
      }
      return 0;
    case kKeyForeground: o->foreground = 1; return 0;
    case kKeyDebug:
      o->foreground = 1;
      o->debug = 1;
      return 1;  // libfuse prints its request trace too
    case kKeyHelp: o->help = 1; return 0;
    case kKeyVersion: o->version = 1; return 0;
    case kKeyIgnore: return 0;
    default: return 1;  // an option for libfuse (allow_other, ro, max_read=...)
  }
}

// Options for libclf from the -o options (credentials, transport, the data
// path's scheduling); the error names the option.
Status ClientOptionsFrom(const CliOptions& o, client::ClientOptions* copts) {
  if (o.tls_cert != nullptr) copts->tls_cert = o.tls_cert;
  if (o.tls_key != nullptr) copts->tls_key = o.tls_key;
  if (o.transport != nullptr) {
    Result<TransportKind> t = ParseTransport(o.transport);
    Status ts = t.ok() ? CheckTransport(*t) : t.status();
    if (!ts.ok()) return Invalid("-o transport: " + ts.ToString());
    copts->transport = o.transport;
  }
  // Data-path scheduling options (paper 000).
  if (o.sched != nullptr) {
    if (Result<OrderPolicy> p = ParseOrderPolicy(o.sched); !p.ok()) {
      return Invalid("-o sched: " + p.status().ToString());
    }
    copts->sched = o.sched;
  }
  if (o.sched_block != nullptr) {
    Result<uint64_t> b = ParseByteSize(o.sched_block);
    Status bs = b.ok() ? ValidateSchedBlock(*b) : b.status();
    if (!bs.ok()) return Invalid("-o sched_block: " + bs.ToString());
    copts->sched_block = *b;
  }
  if (o.read_sched != nullptr) {
    if (Result<ReadSched> r = ParseReadSched(o.read_sched); !r.ok()) {
      return Invalid("-o read_sched: " + r.status().ToString());
    }
    copts->read_sched = o.read_sched;
  }
  if (o.sched_window > kMaxSchedWindow) {
    return Invalid("-o sched_window: at most " + std::to_string(kMaxSchedWindow));
  }
  copts->sched_window = o.sched_window;
  return Status::Ok();
}

// The mount's own options (timeouts, caching, write-behind, request sizes).
Status MountOptionsFrom(const CliOptions& o, const std::function<bool()>& pipes_usable,
                        MountOptions* mopts) {
  mopts->attr_timeout = o.attr_timeout;
  mopts->entry_timeout = o.entry_timeout;
  mopts->negative_timeout = o.negative_timeout;
  mopts->writeback = o.writeback != 0;
  mopts->kernel_permissions = o.kernel_permissions != 0;
  mopts->writebehind = o.writebehind != 0;
  mopts->parallel_writes = o.parallel_writes != 0;
  mopts->lock_lease_ms = o.lock_lease_ms;
  mopts->async_ns = o.async_ns != 0;
  mopts->splice_reads = o.splice_reads != 0 && pipes_usable();
  if (o.max_pages > UINT16_MAX) {
    return Invalid("-o max_pages: at most " + std::to_string(unsigned{UINT16_MAX}));
  }
  mopts->max_pages = o.max_pages;
  if (o.direct_read_min != nullptr) {
    Result<uint64_t> b = ParseByteSize(o.direct_read_min);
    if (!b.ok()) return Invalid("-o direct_read_min: " + b.status().ToString());
    mopts->direct_read_min = *b;
  }
  return Status::Ok();
}

}  // namespace

bool ParseCommandLine(fuse_args* args, CliOptions* o) {
  return fuse_opt_parse(args, o, kOptions, ProcessArg) == 0 && o->bad == 0;
}

void FreeStrings(CliOptions* o) {
  for (char* s : {o->cluster_file, o->mountpoint, o->log_path, o->log_level, o->transport,
                  o->tls_cert, o->tls_key, o->sched, o->sched_block, o->read_sched,
                  o->direct_read_min}) {
    std::free(s);
  }
}

Status CheckTimeouts(const CliOptions& o) {
  if (o.attr_timeout < 0 || o.entry_timeout < 0 || o.negative_timeout < 0) {
    return Invalid("timeouts must not be negative");
  }
  return Status::Ok();
}

Result<ResolvedOptions> ResolveOptions(const CliOptions& o,
                                       const std::function<bool()>& pipes_usable) {
  CLF_RETURN_IF_ERROR(CheckTimeouts(o));
  ResolvedOptions r;
  r.log_level = o.log_level != nullptr ? o.log_level : (o.debug ? "debug" : "info");
  Status opts = ClientOptionsFrom(o, &r.copts);
  if (opts.ok()) opts = MountOptionsFrom(o, pipes_usable, &r.mopts);
  if (!opts.ok()) return Invalid(opts.message());
  return r;
}

std::string AbsoluteLogPath(const char* path, const std::string& cwd) {
  if (path == nullptr || path[0] == '\0') return "";
  std::string log_path = path;
  if (log_path[0] != '/' && !cwd.empty()) log_path = cwd + "/" + log_path;
  return log_path;
}

std::string DefaultFuseOptions(const CliOptions& o, const std::string& cluster_name, bool root) {
  std::string defaults = "-ofsname=clf:" + cluster_name + ",subtype=clf";
  if (o.kernel_permissions != 0) defaults += ",default_permissions";
  if (root) defaults += ",allow_other";
  return defaults;
}

}  // namespace clf::fuse
