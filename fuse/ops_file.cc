// File handlers: open, create, read, write, flush, release, fsync.
//
// No per-open state: fi->fh is 0 and everything a handler needs (layout,
// known size, open count) lives in the inode table, keyed by ino.
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
#include <string>

#include "fuse/ops_util.h"

namespace clf::fuse::ops {

using client::Attr;

namespace {

void FinishCreate(fuse_req_t req, Mount& m, const Attr& attr, fuse_file_info fi) {
  fuse_entry_param e = ToEntry(attr, m.options());
  m.inodes().Ref(attr);
  m.inodes().OpenWithAttr(attr);
  // A new file has no file capabilities: spare the getxattr of the first write.
  m.inodes().SetCapabilityAbsent(attr.handle, CapabilityHorizon(m));
  fi.fh = 0;
  fi.keep_cache = 1;
  if (fuse_reply_create(req, &e, &fi) != 0) {  // interrupted: the kernel holds neither
    m.inodes().Unref(attr.handle, 1);
    if (m.inodes().Release(attr.handle)) DestroyLater(m, attr.handle);
  }
}

}  // namespace

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("open {:#x} flags {:#o}", ino, fi->flags);
  fi->fh = 0;
  // Keep the page cache across opens: a second read of a file costs no RPC.
  // FUSE_CAP_AUTO_INVAL_DATA drops cached pages when a getattr (at most
  // attr_timeout old) shows another size or mtime, which is what catches
  // changes made by other clients.
  fi->keep_cache = 1;
  if (m.inodes().Open(ino)) {
    if (fuse_reply_open(req, fi) != 0 && m.inodes().Release(ino)) DestroyLater(m, ino);
    return;
  }
  // The kernel opened an inode whose layout we do not hold (not a regular
  // file we saw, or the entry was dropped): fetch it.
  fuse_file_info fic = *fi;  // fi dies when this handler returns
  m.client().GetAttr(ino, CallerOf(req), Completion<Attr>(m, req, [req, &m, fic](Result<Attr> r) {
                       if (!r.ok()) return ReplyStatus(req, r.status(), "open");
                       if (r->type == client::FileType::kDirectory) {
                         return (void)fuse_reply_err(req, EISDIR);
                       }
                       if (r->type != client::FileType::kRegular) {
                         return (void)fuse_reply_err(req, EINVAL);
                       }
                       m.inodes().OpenWithAttr(*r);
                       if (fuse_reply_open(req, &fic) != 0 && m.inodes().Release(r->handle)) {
                         DestroyLater(m, r->handle);
                       }
                     }));
}

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
            fuse_file_info* fi) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  client::CreateArgs args;
  args.type = client::FileType::kRegular;
  args.mode = mode & 07777;  // the kernel applied the umask
  args.exclusive = (fi->flags & O_EXCL) != 0;
  const bool truncate = (fi->flags & O_TRUNC) != 0 && !args.exclusive;
  fuse_file_info fic = *fi;
  CLF_LOG_DEBUG("create {:#x} {} flags {:#o}", parent, name, fi->flags);
  client::Caller caller = CallerOf(req);
  m.client().Create(
      parent, name, std::move(args), caller,
      Completion<Attr>(m, req, [req, &m, fic, truncate, caller](Result<Attr> r) {
        if (!r.ok()) return ReplyStatus(req, r.status(), "create");
        if (r->type == client::FileType::kDirectory) return (void)fuse_reply_err(req, EISDIR);
        if (r->type != client::FileType::kRegular) return (void)fuse_reply_err(req, EEXIST);
        if (!truncate || r->size == 0) return FinishCreate(req, m, *r, fic);
        // O_CREAT|O_TRUNC found an existing file: truncate it as open(2) would.
        client::SetAttrArgs sa;
        sa.valid = client::kSetSize;
        sa.size = 0;
        const Handle h = r->handle;
        m.client().SetAttr(h, sa, caller, Completion<Attr>(m, req, [req, &m, fic](Result<Attr> t) {
                             if (!t.ok()) return ReplyStatus(req, t.status(), "create");
                             m.inodes().SetSize(t->handle, 0);
                             FinishCreate(req, m, *t, fic);
                           }));
      }));
}

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* /*fi*/) {
  Mount& m = MountOf(req);
  std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(ino);
  if (!f) return (void)fuse_reply_err(req, EBADF);
  const uint64_t offset = static_cast<uint64_t>(off);
  if (size == 0 || offset >= f->known_size) return (void)fuse_reply_buf(req, nullptr, 0);
  const uint64_t length = std::min<uint64_t>(size, f->known_size - offset);
  CLF_LOG_DEBUG("read {:#x} off {} len {}", ino, off, length);
  const auto start = std::chrono::steady_clock::now();
  m.client().Read(ino, f->layout, offset, length,
                  Completion<std::string>(m, req, [req, ino, offset, start](Result<std::string> r) {
                    CLF_LOG_DEBUG("read {:#x} off {} done in {} us", ino, offset,
                                  std::chrono::duration_cast<std::chrono::microseconds>(
                                      std::chrono::steady_clock::now() - start).count());
                    if (!r.ok()) return ReplyStatus(req, r.status(), "read");
                    fuse_reply_buf(req, r->data(), r->size());
                  }));
}

namespace {

// Sends `data` (the write's one copy out of the FUSE request buffer, which
// libfuse reuses once the handler returns) to the servers; the client moves
// it from there to the data channels' sockets without further copies.
void StartWrite(fuse_req_t req, Mount& m, fuse_ino_t ino, const Layout& layout, uint64_t offset,
                std::string data) {
  CLF_LOG_DEBUG("write {:#x} off {} len {}", ino, offset, data.size());
  const auto start = std::chrono::steady_clock::now();
  m.client().Write(ino, layout, offset, std::move(data),
                   Completion<uint64_t>(m, req, [req, &m, ino, offset, start](Result<uint64_t> r) {
                     CLF_LOG_DEBUG("write {:#x} off {} done in {} us", ino, offset,
                                   std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::steady_clock::now() - start).count());
                     if (!r.ok()) return ReplyStatus(req, r.status(), "write");
                     m.inodes().NoteWriteEnd(ino, offset + *r);
                     fuse_reply_write(req, *r);
                   }));
}

}  // namespace

void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
           fuse_file_info* /*fi*/) {
  Mount& m = MountOf(req);
  std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(ino);
  if (!f) return (void)fuse_reply_err(req, EBADF);
  StartWrite(req, m, ino, f->layout, static_cast<uint64_t>(off), std::string(buf, size));
}

// The kernel's data as a buffer vector: memory (the request buffer) or, when
// libfuse spliced the request, a pipe. One fuse_buf_copy moves it into the
// string the client sends from.
void WriteBuf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* /*fi*/) {
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
  StartWrite(req, m, ino, f->layout, static_cast<uint64_t>(off), std::move(data));
}

void Flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  // Writes are on the servers once replied, and the kernel wrote back its
  // dirty pages before sending FLUSH: nothing is left to push.
  CLF_LOG_DEBUG("flush {:#x}", ino);
  fuse_reply_err(req, 0);
}

void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("release {:#x}", ino);
  const bool destroy = m.inodes().Release(ino);
  fuse_reply_err(req, 0);
  if (destroy) DestroyLater(m, ino);
}

void Fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* /*fi*/) {
  Mount& m = MountOf(req);
  std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(ino);
  if (!f) return (void)fuse_reply_err(req, EBADF);
  CLF_LOG_DEBUG("fsync {:#x} datasync {}", ino, datasync);
  m.client().Sync(ino, f->layout, StatusCompletion(m, req, [req](Status s) {
                    if (!s.ok()) return ReplyStatus(req, s, "fsync");
                    fuse_reply_err(req, 0);
                  }));
}

}  // namespace clf::fuse::ops
