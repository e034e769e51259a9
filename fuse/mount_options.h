// The mount's own options (-o timeouts, caching, write-behind, request
// sizes), as clfmount's command line resolves them (fuse/startup.h).
#pragma once

#include <cstdint>

namespace clf::fuse {

struct MountOptions {
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
  double negative_timeout = 1.0;
  bool writeback = false;       // the kernel's write-back cache (-o writeback)
  bool writebehind = true;      // the mount's own write-behind (fuse/async_ns.h)
  // Opens with write intent bypass the kernel's page cache (FOPEN_DIRECT_IO)
  // and let writes to one file run in parallel (FOPEN_PARALLEL_DIRECT_WRITES);
  // off with -o noparallel_writes, and unused with -o writeback or on kernels
  // before FUSE 7.39 (no shared mmap of such files there).
  bool parallel_writes = true;
  // Read-only opens of a regular file at least this large (bytes; 0: none)
  // bypass the kernel's page cache (FOPEN_DIRECT_IO): their reads come from
  // the mount's read-ahead (fuse/read_windows.h), with one copy less per byte
  // and no page-cache bookkeeping, at the price of no client caching of
  // such files between reads. Shared mmap of them still works (it needs
  // FUSE_DIRECT_IO_ALLOW_MMAP, so: kernels with 7.39, not with writeback).
  uint64_t direct_read_min = 16u << 20;
  // -o default_permissions: the kernel checks permissions (and asks for a
  // directory's attributes after every change in it); otherwise the mount
  // does (fuse/access.h).
  bool kernel_permissions = false;
  uint32_t lock_lease_ms = 0;  // 0: the servers' default lease
  bool async_ns = true;        // directory leases and deferred creates/unlinks (fuse/async_ns.h)
  // Pages one FUSE request may carry (the INIT reply's max_pages; 0: libfuse's
  // 256): direct reads up to this many pages, whatever the buffer's
  // alignment, reach the mount as one request (fuse/init_patch.h).
  uint32_t max_pages = 1024;
  // Read-ahead chunks stay in pipes, spliced from the data channel's socket,
  // and reads are answered from them by splice (fuse/chunk_bytes.h).
  bool splice_reads = true;
};

}  // namespace clf::fuse
