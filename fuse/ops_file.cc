// File handlers: open, create, read, write, flush, release, fsync.
//
// Per-open state is only fi->fh: a number naming the open for its locks
// (ops_lock.cc) with bit 0 (kWriterOpen) set when M counts the open as a
// writer. Everything else a handler needs (layout, known size, open count)
// lives in the inode table, keyed by ino.
//
// Read trimming: the client returns exactly the bytes asked for (holes and
// the range past the end read as zeros). A read is cut at the file's "known
// size": the largest size this mount has seen from the servers or produced
// itself (write ends), set exactly by a truncate. It is never below the true
// size for a file only this mount changes, so nothing is lost; it saves
// shipping zeros past the end. The kernel clamps reads to its own i_size.
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/layout.h"
#include "common/test_fault.h"
#include "common/transport/zero_copy.h"
#include "fuse/init_patch.h"
#include "fuse/ops_util.h"

namespace clf::fuse::ops {

using client::Attr;

namespace {

constexpr int kReportReplySlowMs = 300;  // CLF_TEST_FAULT=report_reply_slow
// fi->fh bit: this open counts as a writer on the metadata server (M keeps the
// size; a writer's release reports it and ends the count).
constexpr uint64_t kWriterOpen = 1;
// fi->fh bit: a read-only open the mount made direct I/O (DirectIfLarge).
constexpr uint64_t kDirectRead = 2;

bool OpensForWrite(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

// Just before the open's reply: an open for writing goes around the kernel's
// page cache, and its reply lets the kernel send writes to this file in
// parallel (MountOptions::parallel_writes; the kernel otherwise holds the
// file's lock across each write's round trip, so N writers of one file take
// turns). Reads through such an open come from the mount's read-ahead windows.
// Whether the mount makes an open with `flags` direct I/O (DirectIfParallelWrites).
bool MountMakesDirect(const Mount& m, int flags) {
  return m.parallel_writes() && OpensForWrite(flags);
}

void DirectIfParallelWrites(Mount& m, fuse_file_info* fi) {
  if (!MountMakesDirect(m, fi->flags)) return;
  fi->direct_io = 1;
  MarkNextOpenParallelWrites();
}

// Just before a read-only open's reply: a file of MountOptions::direct_read_min
// bytes or more is read around the kernel's page cache, from the mount's
// read-ahead (Read below), unless this mount saw it read mostly in small
// requests (each would be a FUSE round trip: the page cache serves those
// better; ReadWindows::ReadsSmall).
void DirectIfLarge(Mount& m, fuse_file_info* fi, fuse_ino_t ino, uint64_t size) {
  const uint64_t min = m.options().direct_read_min;
  if (OpensForWrite(fi->flags) || min == 0 || size < min || !m.direct_mmap()) return;
  if (m.windows().ReadsSmall(ino)) return;
  fi->direct_io = 1;
  fi->fh |= kDirectRead;
}

// What an open with `flags` needs (an exec, which the kernel marks with
// FMODE_EXEC, needs the x bit instead of read).
uint32_t OpenMask(int flags) {
  constexpr int kFmodeExec = 0x20;  // __FMODE_EXEC in open flags
  switch (flags & O_ACCMODE) {
    case O_WRONLY:
      return kMayWrite;
    case O_RDWR:
      return kMayRead | kMayWrite;
    default:
      return (flags & kFmodeExec) != 0 ? kMayExec : kMayRead;
  }
}

// Reports this mount's unreported write end (if any) to M, then runs `next`
// with the outcome. delta: writers_delta; refresh: gather exact size/blocks.
void Report(Mount& m, fuse_ino_t ino, int32_t delta, bool refresh, client::Caller caller,
            std::function<void(Status)> next) {
  // The size M learns is backed by bytes on the servers: write-behind of a
  // file not created under a lease here lands first (a created file's report
  // is queued behind its data instead, so its close does not wait).
  if (!m.ns().Born(ino) &&
      m.ns().AfterWrites(ino, [&m, ino, delta, refresh, caller, next]() mutable {
        Report(m, ino, delta, refresh, std::move(caller), std::move(next));
      })) {
    return;
  }
  std::optional<uint64_t> end = m.inodes().TakeUnreported(ino);
  if (!end && delta == 0 && !refresh) return next(Status::Ok());
  client::ReportWriteArgs a;
  a.wrote = end.has_value();
  a.size = end.value_or(0);
  a.writers_delta = delta;
  a.refresh = refresh;
  // A file created here under a lease still held: queued behind its create.
  if (std::optional<Attr> local = m.ns().QueueReport(ino, a, caller)) {
    m.inodes().NoteOwnChange(*local);
    if (end) m.inodes().ReportDone(ino);  // the file's attributes here carry it
    return next(Status::Ok());
  }
  if (m.ns().After({ino}, [&m, ino, end, delta, refresh, caller, next]() mutable {
        if (end) m.inodes().RestoreUnreported(ino, *end);
        Report(m, ino, delta, refresh, std::move(caller), std::move(next));
      })) {
    return;
  }
  m.ns().Forget(ino);
  // A release's report is not waited for by the application: a truncate or
  // chmod may be sent while it travels, and its reply then carries the size
  // or mode from before that change (NoteOwnChangeSince leaves it out).
  const uint64_t sent = m.inodes().ChangesSent(ino);
  m.client().ReportWrite(
      ino, a, std::move(caller),
      Completion<Attr>(m, nullptr, [&m, ino, end, sent, next = std::move(next)](Result<Attr> r) {
        if (TestFault("report_reply_slow")) {
          std::this_thread::sleep_for(std::chrono::milliseconds(kReportReplySlowMs));
        }
        // Absorbed while the report still counts, so a truncate waiting for
        // it (BeginTruncate) is sent only after.
        if (r.ok()) m.inodes().NoteOwnChangeSince(*r, sent);  // not a change made elsewhere
        if (!r.ok() && end) m.inodes().RestoreUnreported(ino, *end);
        if (r.ok() && end) m.inodes().ReportDone(ino);
        if (!r.ok()) CLF_LOG_WARN("size report of {:#x}: {}", ino, r.status().ToString());
        next(r.status());
      }));
}

// Close-to-open: `fresh` came from M as this open started. If another client
// changed the file since this mount last saw it (size or mtime), the cached
// pages are dropped (keep_cache off for this open) and the kernel's attributes
// refreshed; then `next` runs. With the writeback cache the kernel keeps its
// own size for a cached regular file and takes a larger one only from a
// store of real bytes: the file's last byte is read and stored. A shrink made
// by another client is not pushed that way (docs/fuse.md: use -o nowriteback).
void Revalidate(Mount& m, const Attr& fresh, fuse_file_info* fi, std::function<void()> next) {
  if (!m.inodes().ChangedElsewhere(fresh)) {
    CLF_LOG_DEBUG("open {:#x}: unchanged (size {}, mtime {}.{})", fresh.handle, fresh.size,
                  fresh.mtime.sec, fresh.mtime.nsec);
    return next();
  }
  fi->keep_cache = 0;
  if (m.session() == nullptr) return next();
  const int rc = fuse_lowlevel_notify_inval_inode(m.session(), fresh.handle, -1, 0);
  CLF_LOG_DEBUG("open {:#x}: changed elsewhere (size {}), cache dropped (inval {})", fresh.handle,
                fresh.size, rc);
  if (!m.options().writeback || fresh.size == 0) return next();
  const Handle h = fresh.handle;
  const uint64_t last = fresh.size - 1;
  m.client().Read(h, fresh.layout, last, 1,
                  Completion<std::string>(
                      m, nullptr, [&m, h, last, next = std::move(next)](Result<std::string> r) {
                        if (r.ok() && r->size() == 1) {
                          fuse_bufvec bv = FUSE_BUFVEC_INIT(1);
                          bv.buf[0].mem = r->data();
                          const int st =
                              fuse_lowlevel_notify_store(m.session(), h, static_cast<off_t>(last),
                                                         &bv, FUSE_BUF_SPLICE_NONBLOCK);
                          if (st != 0 && st != -ENOENT)
                            CLF_LOG_WARN("store size of {:#x}: {}", h, st);
                        }
                        next();
                      }));
}

// The rest of an open once M answered: revalidate the cache, then reply. A
// writer open that the kernel did not take (interrupted) is ended on M again.
void FinishOpen(fuse_req_t req, Mount& m, Result<Attr> r, fuse_file_info fi,
                const client::Caller& caller) {
  if (!r.ok()) return ReplyStatus(req, r.status(), "open");
  if (r->type == client::FileType::kDirectory) return (void)fuse_reply_err(req, EISDIR);
  if (r->type != client::FileType::kRegular) return (void)fuse_reply_err(req, EINVAL);
  const Attr a = *r;
  // The server checked a writer's write permission when it counted it; the
  // rest of what the open needs is checked here, on the attributes it sent.
  if (!Allowed(m, caller, a, OpenMask(fi.flags))) {
    if ((fi.fh & kWriterOpen) != 0) {
      client::ReportWriteArgs undo;
      undo.writers_delta = -1;
      m.client().ReportWrite(a.handle, undo, {}, Completion<Attr>(m, nullptr, [](Result<Attr>) {}));
    }
    return (void)fuse_reply_err(req, EACCES);
  }
  auto fip = std::make_shared<fuse_file_info>(fi);
  Revalidate(m, a, fip.get(), [req, &m, a, fip] {
    m.inodes().OpenWithAttr(a);
    DirectIfParallelWrites(m, fip.get());
    DirectIfLarge(m, fip.get(), a.handle, a.size);
    if (fuse_reply_open(req, fip.get()) == 0) return;
    if ((fip->fh & kWriterOpen) != 0) {
      client::ReportWriteArgs undo;
      undo.writers_delta = -1;
      m.client().ReportWrite(a.handle, undo, {}, Completion<Attr>(m, nullptr, [](Result<Attr>) {}));
    }
    if (m.inodes().Release(a.handle)) DestroyLater(m, a.handle);
  });
}

void FinishCreate(fuse_req_t req, Mount& m, const Attr& attr, fuse_file_info fi,
                  fuse_ino_t parent) {
  fuse_entry_param e = ToEntry(attr, m.options());
  e.entry_timeout = EntryTimeoutIn(m, parent);
  m.inodes().Ref(attr);
  m.inodes().OpenWithAttr(attr);
  // A new file has no file capabilities: spare the getxattr of the first write.
  m.inodes().SetCapabilityAbsent(attr.handle, CapabilityHorizon(m));
  fi.fh = m.NewFileHandle() | (OpensForWrite(fi.flags) ? kWriterOpen : 0);
  fi.keep_cache = 1;
  DirectIfParallelWrites(m, &fi);
  if (fuse_reply_create(req, &e, &fi) != 0) {  // interrupted: the kernel holds neither
    m.inodes().Unref(attr.handle, 1);
    if (m.inodes().Release(attr.handle)) DestroyLater(m, attr.handle);
  }
}

// O_CREAT|O_TRUNC that found an existing, non-empty file truncates it as
// open(2) would, then replies; otherwise replies at once.
void TruncateThenFinishCreate(fuse_req_t req, Mount& m, const Attr& attr, fuse_file_info fi,
                              bool truncate, const client::Caller& caller, fuse_ino_t parent) {
  // Empty on M and no write of this mount's (another open's) past 0.
  if (!truncate || (attr.size == 0 && m.inodes().SizeFloor(attr.handle) == 0)) {
    return FinishCreate(req, m, attr, fi, parent);
  }
  // Like a setattr's truncate (SendSetAttr): after this mount's writes still
  // in flight and the size reports on their way.
  auto again = [req, &m, attr, fi, truncate, caller, parent] {
    TruncateThenFinishCreate(req, m, attr, fi, truncate, caller, parent);
  };
  if (m.ns().AfterWrites(attr.handle, again)) return;
  const Handle h = attr.handle;
  std::optional<InodeTable::TruncateTicket> ticket = m.inodes().BeginTruncate(h, again);
  if (!ticket) return;
  client::SetAttrArgs sa;
  sa.valid = client::kSetSize;
  sa.size = 0;
  m.inodes().NoteChangeSent(h);
  m.client().SetAttr(h, sa, caller,
                     Completion<Attr>(m, req, [req, &m, h, ticket = *ticket, fi, parent](Result<Attr> t) {
                       m.inodes().TruncateDone(h, ticket,
                                               t.ok() ? std::optional<uint64_t>(0) : std::nullopt);
                       if (!t.ok()) return ReplyStatus(req, t.status(), "create");
                       FinishCreate(req, m, *t, fi, parent);
                     }));
}

}  // namespace

namespace {

// An open of a file created here under a lease still held: no other client
// can have seen or changed it, so the attributes here are current and
// close-to-open asks nothing (a writer is counted in the queue, after the
// create). false: open it as any other file.
bool OpenBorn(fuse_req_t req, Mount& m, fuse_ino_t ino, const fuse_file_info& fi) {
  std::optional<Attr> b = m.ns().Born(ino);
  if (!b || b->type != client::FileType::kRegular) return false;
  const client::Caller caller = CallerOf(req);
  if (!Allowed(m, caller, *b, OpenMask(fi.flags))) return false;  // the server's answer
  fuse_file_info fic = fi;
  if (OpensForWrite(fi.flags)) {
    client::ReportWriteArgs a;
    a.writers_delta = +1;
    std::optional<Attr> w = m.ns().QueueReport(ino, a, caller);
    if (!w) return false;
    b = w;
  }
  CLF_LOG_DEBUG("open {:#x} flags {:#o}: created here (lease)", ino, fi.flags);
  fic.fh = m.NewFileHandle() | (OpensForWrite(fi.flags) ? kWriterOpen : 0);
  fic.keep_cache = 1;
  FinishOpen(req, m, *b, fic, caller);
  return true;
}

}  // namespace

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  if (OpenBorn(req, m, ino, *fi)) return;
  if (m.ns().After({ino}, [req, ino, f = *fi]() mutable { Open(req, ino, &f); })) return;
  m.ns().Forget(ino);
  m.windows().Drop(ino);  // close-to-open: no read-ahead from before this open
  CLF_LOG_DEBUG("open {:#x} flags {:#o}", ino, fi->flags);
  fi->fh = m.NewFileHandle();
  // Keep the page cache across opens: a second read of a file costs no RPC.
  // FUSE_CAP_AUTO_INVAL_DATA drops cached pages when a getattr (at most
  // attr_timeout old) shows another size or mtime, which is what catches
  // changes made by other clients.
  fi->keep_cache = 1;
  fuse_file_info fic = *fi;  // fi dies when this handler returns
  client::Caller caller = CallerOf(req);
  if (OpensForWrite(fi->flags)) {
    // M counts this writer (and checks write permission) before the first
    // write; its reply is the fresh size and mtime for the revalidation.
    fic.fh |= kWriterOpen;
    client::ReportWriteArgs a;
    a.writers_delta = +1;
    m.client().ReportWrite(ino, a, caller,
                           Completion<Attr>(m, req, [req, &m, fic, caller](Result<Attr> r) {
                             FinishOpen(req, m, std::move(r), fic, caller);
                           }));
    return;
  }
  // Every open asks M for the file's size and mtime (close-to-open: a change
  // another client closed before this open is seen), which also fetches the
  // layout if this mount does not hold it.
  m.client().GetAttr(ino, caller, Completion<Attr>(m, req, [req, &m, fic, caller](Result<Attr> r) {
                       FinishOpen(req, m, std::move(r), fic, caller);
                     }));
}

namespace {

void CreateSync(fuse_req_t req, fuse_ino_t parent, const std::string& name, mode_t mode,
                fuse_file_info* fi) {
  Mount& m = MountOf(req);
  client::CreateArgs args;
  args.type = client::FileType::kRegular;
  args.mode = mode & 07777;  // the kernel applied the umask
  args.exclusive = (fi->flags & O_EXCL) != 0;
  args.open_for_write = OpensForWrite(fi->flags);
  const bool truncate = (fi->flags & O_TRUNC) != 0 && !args.exclusive;
  fuse_file_info fic = *fi;
  CLF_LOG_DEBUG("create {:#x} {} flags {:#o}", parent, name, fi->flags);
  client::Caller caller = CallerOf(req);
  m.client().Create(
      parent, name, std::move(args), caller,
      Completion<Attr>(m, req, [req, &m, fic, truncate, caller, parent, name](Result<Attr> r) {
        if (!r.ok()) return ReplyStatus(req, r.status(), "create");
        m.ns().NoteAdded(parent, name, r->handle, r->type);
        if (r->type == client::FileType::kDirectory) return (void)fuse_reply_err(req, EISDIR);
        if (r->type != client::FileType::kRegular) return (void)fuse_reply_err(req, EEXIST);
        // An existing file is opened: the permission an open needs (the
        // server checks the write permission of a writer's open itself).
        if (r->existed && !Allowed(m, caller, *r, OpenMask(fic.flags))) {
          return (void)fuse_reply_err(req, EACCES);
        }
        if (r->existed && OpensForWrite(fic.flags)) {
          // Opened an existing file for writing: M counts the writer (and checks
          // write permission), then the O_TRUNC if asked.
          client::ReportWriteArgs a;
          a.writers_delta = +1;
          return m.client().ReportWrite(
              r->handle, a, caller,
              Completion<Attr>(m, req, [req, &m, fic, truncate, caller, parent](Result<Attr> w) {
                if (!w.ok()) return ReplyStatus(req, w.status(), "create");
                TruncateThenFinishCreate(req, m, *w, fic, truncate, caller, parent);
              }));
        }
        TruncateThenFinishCreate(req, m, *r, fic, truncate, caller, parent);
      }));
}

}  // namespace

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  std::string n(name);
  fuse_file_info fic = *fi;
  client::Caller caller = CallerOf(req);
  m.ns().WithLease(
      parent, caller, true, [req, &m, parent, n, mode, fic, caller](bool held) mutable {
        if (held && LeasedDirRefuses(m, parent, caller, kMayWrite | kMayExec)) {
          return (void)fuse_reply_err(req, EACCES);
        }
        if (held) {
          // A new name in a leased directory: answered here, committed later.
          if (std::optional<Attr> a =
                  m.ns().Create(parent, n, mode & 07777, OpensForWrite(fic.flags), caller)) {
            CLF_LOG_DEBUG("create {:#x} {}: deferred (lease), handle {:#x}", parent, n, a->handle);
            return FinishCreate(req, m, *a, fic, parent);
          }
        }
        if (m.ns().After({parent}, [req, parent, n, mode, fic]() mutable {
              CreateSync(req, parent, n, mode, &fic);
            })) {
          return;
        }
        CreateSync(req, parent, n, mode, &fic);
      });
}

namespace {

// Below this a reply from a pipe is read out of it and written (a splice
// saves nothing on a few bytes).
constexpr size_t kSpliceReplyMin = 2 * 4096;

// Answers a read with the bytes of read-ahead chunks: from their pipes
// (fuse/chunk_bytes.h) while the chunks are still there, else from memory,
// in place.
void ReplyPieces(fuse_req_t req, const ReadWindows::Pieces& pieces) {
  std::vector<ChunkBytes::Span> spans;
  spans.reserve(pieces.size());
  size_t len = 0;
  for (const ReadWindows::Piece& p : pieces) {
    spans.push_back(ChunkBytes::Span{p.data.get(), p.off, p.len});
    len += p.len;
  }
  if (ChunkBytes::SendFromPipes(spans, [req, len](int fd) {
          if (len < kSpliceReplyMin) {
            char small[kSpliceReplyMin];
            if (!transport::EmptyPipe(fd, len, small)) return (void)fuse_reply_err(req, EIO);
            return (void)fuse_reply_buf(req, small, len);
          }
          ReplyNextFromPipe(fd, len);
          fuse_reply_buf(req, static_cast<const char*>(PipeReplyMarker()), len);
        })) {
    return;
  }
  std::vector<iovec> iov;
  iov.reserve(pieces.size());
  for (const ReadWindows::Piece& p : pieces) {
    const char* d = p.data->data();
    if (d == nullptr) return (void)fuse_reply_err(req, EIO);
    iov.push_back(iovec{const_cast<char*>(d) + p.off, p.len});
  }
  fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
}

// Fetches a planned read-ahead chunk: into a pipe (spliced from the data
// channel's socket) when splice replies are on and a pipe is free, else into
// memory.
void FetchAhead(Mount& m, fuse_ino_t ino, const Layout& layout, const ReadWindows::AheadPlan& p) {
  std::unique_ptr<ChunkPipe> pipe;
  if (m.options().splice_reads && p.length <= ChunkPipe::kPipeBytes) {
    // Only the TCP data channel splices: no pipe for a server reached over
    // RDMA or inline gRPC (nothing chosen yet: the first fetch finds out).
    const std::vector<Piece> on = MapRange(layout, m.client().cluster().size(), p.off, p.length);
    const std::string t = on.empty() ? std::string() : m.client().DataTransportOf(on.front().server);
    if (t.empty() || t == "tcp") pipe = ChunkPipe::Make();
  }
  if (pipe == nullptr) {
    return m.client().ReadInto(ino, layout, p.off, p.length, m.windows().TakeBuffer(),
                               Completion<std::string>(m, nullptr, [&m, ino, p](Result<std::string> r) {
                                 if (!r.ok()) return m.windows().LandAhead(ino, p, false, {});
                                 m.windows().LandAhead(ino, p, true, std::move(*r));
                               }));
  }
  const int w = pipe->write_end(), r = pipe->read_end();
  auto held = std::make_shared<std::unique_ptr<ChunkPipe>>(std::move(pipe));
  m.client().ReadToPipe(
      ino, layout, p.off, p.length, w, r, m.windows().TakeBuffer(),
      Completion<client::Client::PipedRead>(m, nullptr, [&m, ino, p, held](Result<client::Client::PipedRead> got) {
        if (!got.ok()) return m.windows().LandAhead(ino, p, false, {});
        if (got->in_pipe) {
          return m.windows().LandAheadPiped(ino, p, std::move(*held), std::move(got->bytes));
        }
        ChunkBytes::NoteNotInPipe();
        m.windows().LandAhead(ino, p, true, std::move(got->bytes));
      }));
}

}  // namespace

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  if (m.ns().AfterWrites(
          ino, [req, ino, size, off, f = *fi]() mutable { Read(req, ino, size, off, &f); })) {
    return;
  }
  std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(ino);
  if (!f) return (void)fuse_reply_err(req, EBADF);
  const uint64_t offset = static_cast<uint64_t>(off);
  if (size == 0 || offset >= f->known_size) return (void)fuse_reply_buf(req, nullptr, 0);
  // A replicated file's copies serve only once its metadata server knows it
  // (as for writes, WriteAfterKillPriv).
  if (f->layout.replicas > 1 &&
      m.ns().AfterCreate(ino, [req, ino, size, off, f = *fi]() mutable {
        Read(req, ino, size, off, &f);
      })) {
    return;
  }
  const uint64_t length = std::min<uint64_t>(size, f->known_size - offset);
  // A read through an open the page cache does not serve: from the mount's
  // read-ahead (fuse/read_windows.h) when its chunks cover it; a large one
  // fetches the stream's next chunks now.
  const bool uncached =
      (fi->flags & O_DIRECT) != 0 || (fi->fh & kDirectRead) != 0 || MountMakesDirect(m, fi->flags);
  if (uncached) {
    m.windows().NoteRead(ino, size);
    ReadWindows::Pieces got;
    const ReadWindows::Ahead a = m.windows().TakeAhead(
        ino, offset, length, &got,
        [req, ino, size, off, fic = *fi](bool ok, ReadWindows::Pieces pieces) mutable {
          if (!ok) return Read(req, ino, size, off, &fic);  // the read fetches it itself
          ReplyPieces(req, pieces);
        });
    if (length > ReadWindows::kSmallRead) {
      for (const ReadWindows::AheadPlan& p :
           m.windows().PlanAhead(ino, offset, length, f->known_size)) {
        FetchAhead(m, ino, f->layout, p);
      }
    }
    if (a == ReadWindows::Ahead::kReady) {
      CLF_LOG_DEBUG("read {:#x} off {} len {}: ahead", ino, off, length);
      return ReplyPieces(req, got);
    }
    if (a == ReadWindows::Ahead::kWaiting) {
      CLF_LOG_DEBUG("read {:#x} off {} len {}: ahead, in flight", ino, off, length);
      return;
    }
  }
  // A small read of a sequential stream: from the mount's read-ahead window
  // (fuse/read_windows.h), or it fetches the next one.
  std::string hit;
  if (m.windows().Serve(ino, offset, length, &hit)) {
    CLF_LOG_DEBUG("read {:#x} off {} len {}: window", ino, off, length);
    return (void)fuse_reply_buf(req, hit.data(), hit.size());
  }
  const ReadWindows::Plan plan = m.windows().Fetch(ino, offset, length, f->known_size);
  CLF_LOG_DEBUG("read {:#x} off {} len {} (fetch {})", ino, off, length, plan.length);
  const auto start = std::chrono::steady_clock::now();
  m.client().Read(ino, f->layout, offset, plan.length,
                  Completion<std::string>(
                      m, req, [req, &m, ino, offset, length, plan, start](Result<std::string> r) {
                        CLF_LOG_DEBUG("read {:#x} off {} done in {} us", ino, offset,
                                      std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now() - start)
                                          .count());
                        if (!r.ok()) return ReplyStatus(req, r.status(), "read");
                        fuse_reply_buf(req, r->data(), std::min<size_t>(r->size(), length));
                        m.windows().Fill(ino, plan, offset, std::move(*r));
                      }));
}

namespace {

// What a write's reply waits for (KindOf).
enum class WriteKind { kMayDefer, kWait, kWaitAndSync };

// What fsync does once this mount's writes of `ino` are on the servers: the
// size report first (the Sync that follows syncs M's WAL too, so the size on
// M is as durable as the data), then the deferred changes (the file's create,
// its entry) reach M, then every server holding the file syncs it.
// `req`: answered EIO if `done` throws (done must reply to it).
void SyncOnServers(fuse_req_t req, Mount& m, fuse_ino_t ino, const Layout& layout,
                   std::function<void(Status)> done) {
  Report(m, ino, 0, false, client::Caller{}, [req, &m, ino, layout, done](Status r) {
    if (!r.ok()) return done(r);
    m.ns().Flush([req, &m, ino, layout, done] {
      if (Status d = m.ns().TakeError(ino); !d.ok()) return done(d);
      m.client().Sync(ino, layout, StatusCompletion(m, req, [done](Status s) { done(s); }));
    });
  });
}

// Sends `data` (the write's one copy out of the FUSE request buffer, which
// libfuse reuses once the handler returns) to the servers; the client moves
// it from there to the data channels' sockets without further copies.
// kind: KindOf (write-behind allowed; or the reply waits for the servers, and
// for an O_SYNC/O_DSYNC write through a direct open, for their sync too).
void StartWrite(fuse_req_t req, Mount& m, fuse_ino_t ino, const Layout& layout, uint64_t offset,
                std::string data, WriteKind kind) {
  const uint64_t n = data.size();
  m.windows().Drop(ino);  // read-ahead windows hold the bytes before this write
  // O_DIRECT, O_SYNC, O_DSYNC: never behind, not even for a file born here.
  const bool behind_ok = kind == WriteKind::kMayDefer;
  const AsyncNs::BehindScope scope = !behind_ok                ? AsyncNs::BehindScope::kNever
                                     : m.options().writebehind ? AsyncNs::BehindScope::kAnyFile
                                                               : AsyncNs::BehindScope::kBornOnly;
  switch (m.ns().Behind(ino, layout, offset, &data, scope)) {
    case AsyncNs::WriteMode::kBehind:
      // Answered now, sent in the background (gathered with the writes that
      // follow it); flush/fsync report a failure.
      CLF_LOG_DEBUG("write {:#x} off {} len {}: behind", ino, offset, n);
      m.inodes().NoteWriteEnd(ino, offset + n);
      fuse_reply_write(req, n);
      return;
    case AsyncNs::WriteMode::kWaitFirst: {
      auto d = std::make_shared<std::string>(std::move(data));
      if (m.ns().AfterWrites(ino, [req, &m, ino, layout, offset, d, kind] {
            StartWrite(req, m, ino, layout, offset, std::move(*d), kind);
          })) {
        return;
      }
      data = std::move(*d);  // they finished meanwhile
      return StartWrite(req, m, ino, layout, offset, std::move(data), kind);
    }
    case AsyncNs::WriteMode::kSync:
      break;
  }
  CLF_LOG_DEBUG("write {:#x} off {} len {}", ino, offset, data.size());
  const auto start = std::chrono::steady_clock::now();
  m.client().Write(
      ino, layout, offset, std::move(data),
      Completion<uint64_t>(m, req, [req, &m, ino, layout, offset, start, kind](Result<uint64_t> r) {
        CLF_LOG_DEBUG("write {:#x} off {} done in {} us", ino, offset,
                      std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count());
        if (!r.ok()) return ReplyStatus(req, r.status(), "write");
        m.inodes().NoteWriteEnd(ino, offset + *r);
        if (kind != WriteKind::kWaitAndSync) return (void)fuse_reply_write(req, *r);
        const uint64_t written = *r;
        CLF_LOG_DEBUG("write {:#x} off {}: O_SYNC, syncing", ino, offset);
        SyncOnServers(req, m, ino, layout, [req, written](Status s) {
          if (!s.ok()) return ReplyStatus(req, s, "write");
          fuse_reply_write(req, written);
        });
      }));
}

// O_DIRECT, O_SYNC and O_DSYNC writes wait for the servers. The kernel sends
// FSYNC after an O_SYNC/O_DSYNC write (or RWF_SYNC/RWF_DSYNC) only through its
// page cache: through a direct open (every open for writing while parallel
// writes are on) the mount syncs the servers itself before it replies.
WriteKind KindOf(const Mount& m, const fuse_file_info* fi) {
  const int flags = fi != nullptr ? fi->flags : 0;
  if ((flags & (O_SYNC | O_DSYNC)) != 0 && MountMakesDirect(m, flags)) {
    return WriteKind::kWaitAndSync;
  }
  if ((flags & (O_DIRECT | O_SYNC | O_DSYNC)) != 0) return WriteKind::kWait;
  return WriteKind::kMayDefer;
}

// FUSE_HANDLE_KILLPRIV_V2: what a write clears (KillPrivBits: setuid and
// setgid bits, a file capability) is cleared before the write goes; then
// `then`. `bits`: KillPrivBits, not 0.
void KillPrivThen(fuse_req_t req, Mount& m, fuse_ino_t ino, const client::Caller& c, uint32_t bits,
                  std::function<void()> then) {
  client::SetAttrArgs a;
  a.valid = bits | client::kSetViaOpenFile;
  client::Attr local;
  if (m.ns().QueueSetAttr(ino, a, c, &local)) {  // a file created here: its mode is this mount's
    m.inodes().NoteOwnChange(local);
    return then();
  }
  if (m.ns().After({ino},
                   [req, &m, ino, c, bits, then] { KillPrivThen(req, m, ino, c, bits, then); })) {
    return;
  }
  CLF_LOG_DEBUG("write {:#x}: clearing {:#x} first", ino, bits);
  m.ns().Forget(ino);
  m.inodes().NoteChangeSent(ino);
  m.client().SetAttr(
      ino, a, c,
      Completion<client::Attr>(m, req, [req, &m, ino, bits, then](Result<client::Attr> r) {
        if (!r.ok()) return ReplyStatus(req, r.status(), "write");
        if (bits & client::kKillCaps) {
          m.inodes().SetCapabilityAbsent(ino, CapabilityHorizon(m));
        }
        m.inodes().NoteOwnChange(*r);
        m.ns().NoteAttrChanged(ino, *r);
        then();
      }));
}

// A write, after what it must clear (KillPrivThen). Nothing to clear, the
// usual case: the write starts at once, without a continuation.
void WriteAfterKillPriv(fuse_req_t req, Mount& m, fuse_ino_t ino, const Layout& layout, off_t off,
                        std::string data, WriteKind kind) {
  if (layout.replicas > 1) {
    // A replicated file's copies take a write only once its metadata server
    // confirms which copy orders it (server/ops/replication.h): a file
    // created here whose create is still queued is not known there yet.
    auto d = std::make_shared<std::string>(std::move(data));
    if (m.ns().AfterCreate(ino, [req, &m, ino, layout, off, d, kind] {
          WriteAfterKillPriv(req, m, ino, layout, off, std::move(*d), kind);
        })) {
      return;
    }
    data = std::move(*d);
  }
  const client::Caller c = CallerOf(req);
  const uint32_t bits = m.kill_priv() ? KillPrivBits(m, ino, c) : 0;
  if (bits == 0)
    return StartWrite(req, m, ino, layout, static_cast<uint64_t>(off), std::move(data), kind);
  auto d = std::make_shared<std::string>(std::move(data));
  KillPrivThen(req, m, ino, c, bits, [req, &m, ino, layout, off, d, kind] {
    StartWrite(req, m, ino, layout, static_cast<uint64_t>(off), std::move(*d), kind);
  });
}

}  // namespace

void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
           fuse_file_info* fi) {
  Mount& m = MountOf(req);
  std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(ino);
  if (!f) return (void)fuse_reply_err(req, EBADF);
  WriteAfterKillPriv(req, m, ino, f->layout, off, std::string(buf, size), KindOf(m, fi));
}

// The kernel's data as a buffer vector: memory (the request buffer) or, when
// libfuse spliced the request, a pipe. One fuse_buf_copy moves it into the
// string the client sends from.
void WriteBuf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(ino);
  if (!f) return (void)fuse_reply_err(req, EBADF);
  const size_t size = fuse_buf_size(in);
  std::string data;
  if (in->count == 1 && in->idx == 0 && in->off == 0 && !(in->buf[0].flags & FUSE_BUF_IS_FD)) {
    data.assign(static_cast<const char*>(in->buf[0].mem), size);
  } else {
    data.resize(size);
    fuse_bufvec out = FUSE_BUFVEC_INIT(size);
    out.buf[0].mem = data.data();
    ssize_t n = fuse_buf_copy(&out, in, static_cast<fuse_buf_copy_flags>(0));
    if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
    data.resize(static_cast<size_t>(n));
  }
  WriteAfterKillPriv(req, m, ino, f->layout, off, std::move(data), KindOf(m, fi));
}

void Flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  // Writes are on the servers once replied, and the kernel wrote back its
  // dirty pages before sending FLUSH. What is left is the size: M learns the
  // end of this mount's writes before close(2) returns (close-to-open), at
  // the cost of one call only for files written since the last report. Then
  // the owner's POSIX locks go (after the size: the next locker sees it).
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("flush {:#x}", ino);
  fuse_file_info fic = *fi;
  Report(m, ino, 0, false, CallerOf(req), [req, &m, ino, fic](Status s) mutable {
    if (!s.ok()) return ReplyStatus(req, s, "flush");
    if (Status d = m.ns().TakeError(ino); !d.ok()) return ReplyStatus(req, d, "flush");
    if (FlushLocks(req, ino, &fic)) return;  // replies once the owner's locks are released
    fuse_reply_err(req, 0);
  });
}

void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("release {:#x}", ino);
  ReleaseLocks(m, ino, fi);
  const bool writer = (fi->fh & kWriterOpen) != 0;
  const bool destroy = m.inodes().Release(ino);
  fuse_reply_err(req, 0);
  if (!writer) {
    if (destroy) DestroyLater(m, ino);
    return;
  }
  // The writer's open ends on M (after the reply: close(2) does not wait for
  // RELEASE). A written file gets its exact size and allocation gathered once.
  const bool refresh = m.inodes().TakeNeedsRefresh(ino);
  Report(m, ino, -1, refresh, client::Caller{}, [&m, ino, destroy](Status) {
    if (destroy) DestroyLater(m, ino);
  });
}

void Fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(ino);
  if (!f) return (void)fuse_reply_err(req, EBADF);
  if (m.ns().AfterWrites(
          ino, [req, ino, datasync, f = *fi]() mutable { Fsync(req, ino, datasync, &f); })) {
    return;
  }
  CLF_LOG_DEBUG("fsync {:#x} datasync {}", ino, datasync);
  SyncOnServers(req, m, ino, f->layout, [req](Status s) {
    if (!s.ok()) return ReplyStatus(req, s, "fsync");
    fuse_reply_err(req, 0);
  });
}

}  // namespace clf::fuse::ops

namespace clf::fuse {

void ReportWrites(Mount& m, fuse_ino_t ino, const client::Caller& caller,
                  std::function<void(Status)> next) {
  ops::Report(m, ino, 0, false, caller, std::move(next));
}

}  // namespace clf::fuse
