// INIT reply flags libfuse 3.14 cannot set: FUSE_PARALLEL_DIROPS (fixed in
// 3.17.1) and FUSE_HANDLE_KILLPRIV_V2.
//
// libfuse 3.14 reads FUSE_PARALLEL_DIROPS from the kernel's INIT request and
// puts FUSE_CAP_PARALLEL_DIROPS in `want`, but never sets the flag in its
// INIT reply (fixed upstream in 3.17.1), so the kernel serializes lookups and
// readdir in one directory behind a per-directory mutex. This installs a
// custom io on the session whose writev adds the flag to the INIT reply when
// the init handler armed it. Every other read/write/splice goes straight to
// the kernel, unchanged.
#pragma once

#include <cstdint>

#include "fuse/fuse_ll.h"

namespace clf::fuse {

// Call after fuse_session_mount(). Returns 0, or -errno from libfuse.
int InstallInitPatch(fuse_session* se);

// Called by the init handler (before libfuse sends the INIT reply) when the
// kernel offers parallel directory operations and the mount wants them.
void ArmParallelDirops();

// FUSE_HANDLE_KILLPRIV_V2 (protocol 7.33; libfuse 3.14 has no capability bit
// for it): the file system clears setuid/setgid and the file capability on
// write, truncate and chown (the mount asks the servers: KillPrivBits in
// fuse/ops_util.h). The kernel then no longer asks for security.capability
// before every write(2), only before an inode's first one.
void ArmKillPrivV2();

// FUSE_DIRECT_IO_ALLOW_MMAP (protocol 7.39, a flags2 bit libfuse 3.14 does
// not know): files opened with FOPEN_DIRECT_IO can still be mmap()ed shared;
// the kernel keeps such mappings coherent with the direct writes.
void ArmDirectIoAllowMmap();

// max_pages of the INIT reply (protocol 7.28): the most pages one request may
// carry. libfuse 3.14 sends max_write's page count (256 for 1 MiB), so a
// 1 MiB direct read into a buffer that does not start on a page boundary
// (257 pages) reaches the mount as two requests, 1 MiB - 16 bytes and 16
// bytes, each a round trip of its own. The kernel takes at most
// fs.fuse.max_pages_limit (RaiseMaxPagesLimit). Writes stay within
// max_write whatever this says.
void ArmMaxPages(uint32_t pages);

// Called right before fuse_reply_open/fuse_reply_create on the same thread,
// for an open the mount marked direct_io: that reply gets
// FOPEN_PARALLEL_DIRECT_WRITES too (libfuse 3.14's fuse_file_info has no bit
// for it), so the kernel takes the file's lock shared for writes within its
// size, and writers of one file reach the mount in parallel.
void MarkNextOpenParallelWrites();

}  // namespace clf::fuse
