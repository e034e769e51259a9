// Directory handlers: opendir, readdir, readdirplus, releasedir.
//
// Directories are read in pages (ReadDir "after" the last name) and the
// kernel is served from the current page, so directories of any size work
// with bounded memory. The stream an open directory presents is
//   index 0 ".", index 1 "..", index k >= 2 the (k-2)-th name in name order,
// and the d_off of the entry at index i is i + 1 (what the kernel passes back
// as `off` to continue after it). Each open directory remembers, for every
// page it fetched, the stream index the page started at and the name it was
// fetched after, so a seek to any offset handed out (telldir/seekdir,
// rewinddir) re-fetches from the nearest page start instead of re-reading the
// directory from the beginning.
//
// The first page of an open directory may come from this mount's lease on it
// (AsyncNs::List): the whole listing as one page, no ReadDir.
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fuse/ops_util.h"

namespace clf::fuse::ops {

namespace {

constexpr uint32_t kDirPage = 512;
constexpr uint64_t kFirstEntry = 2;  // stream index of the first real entry

struct DirHandle {
  explicit DirHandle(Handle h) : dir(h) { starts[kFirstEntry] = ""; }

  const Handle dir;
  std::mutex mu;  // guards the rest; taken before any inode table shard lock
  Handle parent = 0;
  bool have_page = false;
  bool page_plus = false;    // the page carries attributes
  bool plus_failed = false;  // a server was down for the attributes: names only
  bool page_eof = false;
  bool asked_lease = false;  // the lease was asked for the listing (once per open)
  uint64_t page_start = kFirstEntry;
  // When the page was asked for: an entry whose attributes this mount
  // changed since (AsyncNs::AttrsChangedSince) goes out as a name only.
  std::chrono::steady_clock::time_point page_sent{};
  std::vector<client::DirEntry> page;
  std::map<uint64_t, std::string> starts;  // stream index -> name to fetch after
};

DirHandle* DirOf(fuse_file_info* fi) { return reinterpret_cast<DirHandle*>(fi->fh); }

struct Fetch {
  uint64_t start = 0;
  std::string after;
};

void Serve(fuse_req_t req, Mount& m, DirHandle* d, size_t size, uint64_t off, bool plus);

void StartFetch(fuse_req_t req, Mount& m, DirHandle* d, size_t size, uint64_t off, bool plus,
                Fetch f) {
  bool with_attrs;
  {
    std::lock_guard lock(d->mu);
    with_attrs = plus && !d->plus_failed;
  }
  CLF_LOG_DEBUG("readdir {:#x} fetch after '{}' (index {})", d->dir, f.after, f.start);
  std::string after = f.after;
  const auto sent = std::chrono::steady_clock::now();
  m.client().ReadDir(
      d->dir, std::move(after), kDirPage, with_attrs, CallerOf(req),
      Completion<client::DirPage>(
          m, req, [req, &m, d, size, off, plus, with_attrs, f, sent](Result<client::DirPage> r) {
            if (!r.ok()) {
              const Code code = r.status().code();
              if (with_attrs && (code == Code::kUnavailable || code == Code::kIo)) {
                // The batched stat needs every data server; the names need
                // only the directory's server. Serve names without
                // attributes (the kernel then looks entries up one by one)
                // so `ls` works while a data server is down.
                CLF_LOG_WARN("readdirplus {:#x}: {}; reading names only", d->dir,
                             r.status().ToString());
                {
                  std::lock_guard lock(d->mu);
                  d->plus_failed = true;
                }
                return StartFetch(req, m, d, size, off, plus, f);
              }
              return ReplyStatus(req, r.status(), "readdir");
            }
            {
              std::lock_guard lock(d->mu);
              d->parent = r->parent;
              d->page_sent = sent;
              d->have_page = true;
              d->page_plus = with_attrs;
              d->page_start = f.start;
              d->page = std::move(r->entries);
              d->page_eof = r->eof || d->page.empty();
              d->starts[f.start] = f.after;
              if (!d->page_eof) d->starts[f.start + d->page.size()] = d->page.back().name;
            }
            Serve(req, m, d, size, off, plus);
          }));
}

// Fills one reply from the current page; fetches a page first when the
// requested offset is not in it (and nothing was added yet).
// "." or ".." (pos 0 or 1) into buf (room bytes): the bytes it takes (more
// than room: it did not fit). d->mu held; d has a page (".." needs the parent).
size_t AddDotEntry(fuse_req_t req, const DirHandle& d, uint64_t pos, bool plus, char* buf,
                   size_t room) {
  const off_t next = static_cast<off_t>(pos + 1);
  const char* name = pos == 0 ? "." : "..";
  // d_ino 0 would make readdir(3) skip the entry; an unknown parent
  // shows as the directory itself.
  const Handle ino = pos == 0 || d.parent == 0 ? d.dir : d.parent;
  if (plus) {
    fuse_entry_param e;  // ino 0: the kernel takes no lookup reference
    std::memset(&e, 0, sizeof(e));
    e.attr.st_ino = ino;
    e.attr.st_mode = S_IFDIR;
    return fuse_add_direntry_plus(req, buf, room, name, &e, next);
  }
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = ino;
  st.st_mode = S_IFDIR;
  return fuse_add_direntry(req, buf, room, name, &st, next);
}

// A listed entry into buf (room bytes), as AddDotEntry; one that goes out
// with attributes and fits takes a lookup reference, noted in *refs.
// d->mu held.
size_t AddPageEntry(fuse_req_t req, Mount& m, const DirHandle& d, const client::DirEntry& de,
                    uint64_t next, bool plus, double entry_timeout, char* buf, size_t room,
                    std::vector<Handle>* refs) {
  if (!plus) {
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    st.st_ino = de.handle;
    st.st_mode = TypeBits(de.type);
    return fuse_add_direntry(req, buf, room, de.name.c_str(), &st, static_cast<off_t>(next));
  }
  fuse_entry_param e;
  // An entry this mount has changes of still queued or in flight
  // (a file created here: its size report and times, its bytes) goes
  // out as a name only: the listing's attributes are the servers',
  // from before those changes, and the kernel would take them over
  // the ones it has (tar -x then diff saw sizes of 0). The kernel
  // looks the name up when it needs the attributes.
  // A subdirectory whose lease this mount holds goes out with the
  // lease's attributes (this mount's times of its changes in it), as
  // a lookup or stat of it answers: the servers' differ by the
  // commits' delay, and tar saw the directory change as it read it.
  const std::optional<client::Attr> held =
      de.type == client::FileType::kDirectory ? m.ns().DirAttr(de.handle) : std::nullopt;
  const bool has_attr = held.has_value() ||
                        (de.attr.handle == de.handle && de.handle != 0 &&
                         !m.ns().Unsettled(de.handle) &&
                         !m.ns().AttrsChangedSince(de.handle, d.page_sent));
  const client::Attr& attr = held ? *held : de.attr;
  if (has_attr) {
    e = ToEntry(attr, m.options());
    e.entry_timeout = entry_timeout;
    FloorBehindSize(m, &e.attr);
  } else {
    std::memset(&e, 0, sizeof(e));
    e.attr.st_ino = de.handle;
    e.attr.st_mode = TypeBits(de.type);
  }
  const size_t n =
      fuse_add_direntry_plus(req, buf, room, de.name.c_str(), &e, static_cast<off_t>(next));
  if (n <= room && has_attr) {
    m.inodes().Ref(attr);
    refs->push_back(de.handle);
  }
  return n;
}

void Serve(fuse_req_t req, Mount& m, DirHandle* d, size_t size, uint64_t off, bool plus) {
  std::vector<char> buf(size);
  size_t used = 0;
  std::vector<Handle> refs;  // lookups counted for this reply
  const double entry_timeout = plus ? EntryTimeoutIn(m, d->dir) : 0;
  bool need_fetch = false;
  Fetch fetch;
  {
    std::lock_guard lock(d->mu);
    const bool page_ok = d->have_page && (d->page_plus || !plus || d->plus_failed);
    for (uint64_t pos = off;; ++pos) {
      if (pos < kFirstEntry) {
        if (!d->have_page) {  // ".." needs the parent, which comes with a page
          need_fetch = true;
          fetch = {kFirstEntry, ""};
          break;
        }
        const size_t n = AddDotEntry(req, *d, pos, plus, buf.data() + used, size - used);
        if (n > size - used) break;
        used += n;
        continue;
      }
      const uint64_t end = d->page_start + d->page.size();
      if (page_ok && pos >= d->page_start && pos < end) {
        const size_t n = AddPageEntry(req, m, *d, d->page[pos - d->page_start], pos + 1, plus,
                                      entry_timeout, buf.data() + used, size - used, &refs);
        if (n > size - used) break;
        used += n;
        continue;
      }
      // End of directory (pos > end: an offset from before entries were removed).
      if (page_ok && pos >= end && d->page_eof) break;
      if (used > 0) break;  // reply what we have; the kernel comes back
      need_fetch = true;
      if (page_ok && pos == end) {
        fetch = {end, d->page.back().name};
      } else {
        auto it = d->starts.upper_bound(pos);
        --it;  // starts[kFirstEntry] exists and pos >= kFirstEntry
        fetch = {it->first, it->second};
      }
      break;
    }
  }
  if (need_fetch) return StartFetch(req, m, d, size, off, plus, std::move(fetch));
  if (fuse_reply_buf(req, buf.data(), used) != 0) {
    for (Handle h : refs) m.inodes().Unref(h, 1);
  }
}

// The first request of an open directory: its listing from the lease when
// this mount holds it or can take it; else served (fetched) as usual.
void Start(fuse_req_t req, Mount& m, DirHandle* d, size_t size, uint64_t off, bool plus) {
  bool ask;
  {
    std::lock_guard lock(d->mu);
    ask = !d->have_page && !d->asked_lease;
    d->asked_lease = true;
  }
  if (!ask) return Serve(req, m, d, size, off, plus);
  const auto sent = std::chrono::steady_clock::now();
  m.BeginCall();
  m.ns().List(d->dir, CallerOf(req), plus,
              [req, &m, d, size, off, plus, sent](std::optional<std::vector<client::DirEntry>> l) {
                RunGuarded(req, [&] {
                  if (l) {
                    CLF_LOG_DEBUG("readdir {:#x}: {} entries from the lease", d->dir, l->size());
                    std::lock_guard lock(d->mu);
                    d->have_page = true;
                    d->page_sent = sent;
                    d->page_plus = plus;  // entries without attributes go out as names only
                    d->page_start = kFirstEntry;
                    d->page = std::move(*l);
                    d->page_eof = true;
                  }
                  Serve(req, m, d, size, off, plus);
                });
                m.EndCall();
              });
}

}  // namespace

void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  CLF_LOG_DEBUG("opendir {:#x}", ino);
  Mount& m = MountOf(req);
  fuse_file_info fic = *fi;
  // Reading a directory needs its read permission (the server's ReadDir
  // checks it too; a listing from a lease is this mount's to check).
  CheckAccessThen(req, m, ino, CallerOf(req), kMayRead, [req, ino, fic]() mutable {
    auto* d = new DirHandle(ino);
    fic.fh = reinterpret_cast<uint64_t>(d);
    if (fuse_reply_open(req, &fic) != 0) delete d;
  });
}

void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  DirHandle* d = DirOf(fi);
  // This mount's deferred creates and unlinks in the directory come first.
  if (m.ns().After({ino}, [req, &m, d, size, off] {
        Start(req, m, d, size, static_cast<uint64_t>(off), false);
      })) {
    return;
  }
  Start(req, m, d, size, static_cast<uint64_t>(off), false);
}

void Readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  DirHandle* d = DirOf(fi);
  if (m.ns().After({ino}, [req, &m, d, size, off] {
        Start(req, m, d, size, static_cast<uint64_t>(off), true);
      })) {
    return;
  }
  Start(req, m, d, size, static_cast<uint64_t>(off), true);
}

// The directory's entries and attributes live in its server's RocksDB: sync that WAL.
void Fsyncdir(fuse_req_t req, fuse_ino_t ino, int /*datasync*/, fuse_file_info* /*fi*/) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("fsyncdir {:#x}", ino);
  // The directory's deferred changes and the sync of its server's WAL in one
  // commit.
  auto answer = [req, &m, ino] {
    if (Status d = m.ns().TakeError(ino); !d.ok()) return ReplyStatus(req, d, "fsyncdir");
    fuse_reply_err(req, 0);
  };
  if (m.ns().QueueSync(ino)) {
    if (!m.ns().After({ino}, answer)) answer();
    return;
  }
  // No deferred change of this directory is queued or committing: its
  // changes this mount made are on its server, and the WAL sync makes them
  // durable. Deferred changes of other directories (a rename between two
  // subdirectories) are theirs to sync: fsync(2) of a directory covers its
  // own entries and attributes only, as on a local file system.
  m.client().Sync(ino, Layout{0, 0, 0, 0}, StatusCompletion(m, req, [req, &m, ino](Status s) {
                    if (!s.ok()) return ReplyStatus(req, s, "fsyncdir");
                    if (Status d = m.ns().TakeError(ino); !d.ok()) {
                      return ReplyStatus(req, d, "fsyncdir");
                    }
                    fuse_reply_err(req, 0);
                  }));
}

void Releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  CLF_LOG_DEBUG("releasedir {:#x}", ino);
  delete DirOf(fi);
  fuse_reply_err(req, 0);
}

}  // namespace clf::fuse::ops
