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

// Called right before fuse_reply_buf(req, PipeReplyMarker(), len) on the same
// thread: that reply's `len` bytes are not at the marker but wait in the pipe
// whose read end is `pipe_r` (exactly len bytes; fuse/chunk_bytes.h). The
// reply goes to /dev/fuse by splice: its header (which only libfuse can make:
// it holds the request's id) is written into a pipe of the thread's, the
// bytes are spliced behind it (their buffers move, nothing is copied), and
// that pipe is spliced to /dev/fuse, where the kernel copies the bytes to
// the reader. libfuse's own splice reply (fuse_reply_data) is not used: it
// wants a pipe of twice the reply, over /proc/sys/fs/pipe-max-size (1 MiB),
// which needs CAP_SYS_RESOURCE. When a pipe cannot take the buffers, the
// bytes are read out of it and written as usual.
void ReplyNextFromPipe(int pipe_r, size_t len);
const void* PipeReplyMarker();
// Replies sent by splice and those that fell back to a copy (process-wide).
uint64_t spliced_replies();
uint64_t spliced_reply_fallbacks();

}  // namespace clf::fuse
