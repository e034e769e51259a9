// AsyncNs: directory leases and the namespace changes this mount acknowledges
// before the servers have them (CephFS's async dirops, in our terms).
//
// While the mount holds a lease on a directory (granted by the directory's
// server, Meta.DirLease) it knows the directory's complete listing, so:
//   - a lookup of a name it does not list is answered "no such file" here;
//   - a create of a new regular file is answered here, with a handle from a
//     range the server reserved for this lease, and committed later;
//   - an unlink of a listed file nobody here has open is answered here too;
//   - the size reports and ordinary setattrs (chmod, chown by root, times) of
//     a file created under a lease still held are queued the same way;
//   - an open directory's listing comes from the lease (List): a readdir of a
//     directory nobody else is changing takes the lease, with the entries'
//     attributes, in the call that would otherwise have read the listing.
// Queued changes are committed in order (Meta.Commit, batched: whatever
// queued up while the previous batch was on the wire goes in the next). A
// request that depends on a queued change (it names a directory or file a
// queued change touches) waits until the queue has drained past it (After).
// Another client's request for a leased directory makes its server recall
// the lease (LeaseEvents poll): the mount stops answering for it, drains its
// queue, then releases it, and only then does the other request proceed; so
// every other client sees every acknowledged change.
// A commit that fails (the server refused what was acknowledged: no space, a
// server down) is logged and reported by the next flush/fsync/close of the
// file (EIO), like an error of a write-back cache.
//
// Thread safety: every method is thread safe. No callback runs under the
// internal lock; `then` callbacks may run inline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/include/clf/client.h"
#include "fuse/commit_queue.h"
#include "fuse/ns_servers.h"
#include "fuse/recall_poller.h"
#include "fuse/write_behind.h"

namespace clf::fuse {

class AsyncNs {
 public:
  using Clock = std::chrono::steady_clock;

  // enabled false: every method answers "not here" and After never waits.
  // names_window: how long after this mount gave the kernel a directory's
  // entries with their attributes a later listing of it may carry names only
  // (the kernel still has them; half the shorter of its entry and attribute
  // timeouts).
  AsyncNs(client::Client* client, bool enabled,
          Clock::duration names_window = std::chrono::milliseconds(500));
  // The same over any NsServers (unit tests: a fake).
  AsyncNs(NsServers* servers, bool enabled,
          Clock::duration names_window = std::chrono::milliseconds(500));
  ~AsyncNs();
  AsyncNs(const AsyncNs&) = delete;
  AsyncNs& operator=(const AsyncNs&) = delete;

  bool enabled() const { return enabled_; }

  // Calls then(held) once it is known whether this mount holds a lease on
  // `dir`: at once if held (or refused recently), else after asking for it.
  // for_create: ask for a handle range with it.
  // with_attrs: a lease asked for now carries the entries' attributes (List).
  void WithLease(Handle dir, const client::Caller& caller, bool for_create,
                 std::function<void(bool held)> then, bool with_attrs = false);

  // The listing of `dir` for an open directory's readdir, from a lease
  // (taken now if this mount does not hold it and nobody recalled it lately):
  // every entry as this mount's queued changes leave it, sorted by name.
  // plus: each entry carries attributes when this call took the lease (the
  // server sent them with it, as ReadDir would), else names only, which is
  // served only within names_window of such a listing (the kernel then has
  // the attributes). nullopt: read it from the server (ReadDir).
  void List(Handle dir, const client::Caller& caller, bool plus,
            std::function<void(std::optional<std::vector<client::DirEntry>>)> then);

  // kListed: the name is listed and *born holds the attributes the lease's
  // grant carried: right about the file (handle, type) but maybe not current,
  // so they go to the kernel as already expired.
  enum class Known { kUnknown, kAbsent, kPresent, kListed };
  // Under a held lease: whether `name` is in `dir` as this mount will have it
  // once its queue is committed. kPresent fills *born when the file was
  // created here under the lease, or is a subdirectory whose lease this
  // mount holds (its attributes are then this mount's).
  // kUnknown for a name the lease lists with a known handle (the server's
  // entry, untouched by this mount's queue) sets *listed to it: the server's
  // answer about the name then depends on queued changes of that file only.
  // *listed_type (if not null) gets the listed file's type with *listed.
  Known Find(Handle dir, const std::string& name, client::Attr* born, Handle* listed = nullptr,
             client::FileType* listed_type = nullptr);

  // Under a held lease, a new regular file: its attributes, the create
  // queued. nullopt when it cannot be answered here (no lease, name listed,
  // handles used up, setuid/setgid bits or a setgid directory).
  std::optional<client::Attr> Create(Handle dir, const std::string& name, uint32_t mode,
                                     bool open_for_write, const client::Caller& caller);
  // Under a held lease, a new symbolic link to `target` (mode 0777, the
  // caller's uid and gid): its attributes, the create queued; readlink of it
  // is answered here (BornTarget) while the lease is held. nullopt as Create.
  std::optional<client::Attr> Symlink(Handle dir, const std::string& name,
                                      const std::string& target, const client::Caller& caller);
  // Under a held lease on `dir`, a new name `name` for the file `h` that was
  // created here under a lease still held (its attributes are this mount's):
  // the file's attributes with the link counted, the link queued. nullopt:
  // ask the server.
  std::optional<client::Attr> Link(Handle h, Handle dir, const std::string& name,
                                   const client::Caller& caller);
  // Under held leases on `src` and `dst`: the rename of the non-directory
  // `sname` to the free name `dname` (no flags but RENAME_NOREPLACE), queued.
  // false: ask the server (a directory, a name taken, a sticky directory the
  // caller does not own, a lease not held).
  bool Rename(Handle src, const std::string& sname, Handle dst, const std::string& dname,
              const client::Caller& caller);
  // fsyncdir of `dir` while changes of it are queued or committing: a sync
  // of its server's metadata WAL queued after them (one round trip for
  // both); wait with After({dir}). false: nothing of it is queued.
  bool QueueSync(Handle dir);
  // The target of a symbolic link created here under a lease still held.
  std::optional<std::string> BornTarget(Handle ino);
  // Under a held lease, unlink of a listed non-directory `name` whose file
  // `is_open` says is not open here: its handle, the remove queued.
  std::optional<Handle> Unlink(Handle dir, const std::string& name, const client::Caller& caller,
                               const std::function<bool(Handle)>& is_open);

  // A held directory's attributes (a lease covers them: a change by another
  // client recalls it), as this mount's queued changes leave them.
  std::optional<client::Attr> DirAttr(Handle dir);

  // Under held leases on `dir` and on the directory `name` names, which this
  // mount has emptied (its listing is empty): the rmdir queued (after the
  // unlinks that emptied it). nullopt: ask the server.
  std::optional<Handle> Rmdir(Handle dir, const std::string& name, const client::Caller& caller);

  // A directory this mount just made (mkdir): its lease, with a handle range
  // for creates, asked for in the background, so the first create in it
  // (tar, cp -r, a build) need not wait for it. Skipped when the directory is
  // known already or enough leases are being fetched.
  void PrefetchForCreate(Handle dir, const client::Caller& caller);
  // A lease this mount held and let lapse (no commit of its renewed it: a
  // directory only looked up in, or only passed through by renames) while
  // the directory is still in use: asked again in the background, so the
  // next lookups and renames in it are answered here again. Nothing is done
  // for a directory never held, recalled, given back, or with changes of
  // this mount still queued (WithLease's rule: the new listing would miss
  // them).
  void RenewLapsed(Handle dir, const client::Caller& caller);

  // A setattr of `ino` done by the server (not answered here): a held
  // directory's attributes follow it; a grant on its way is not used.
  void NoteAttrChanged(Handle ino, const client::Attr& fresh);

  // Synchronous changes of this mount keep the listings exact.
  // `when`: the directory's new mtime and ctime as the server set them (a
  // new node's ctime: one time for both); none: now.
  void NoteAdded(Handle dir, const std::string& name, Handle h, client::FileType t,
                 std::optional<client::Timespec> when = std::nullopt);
  void NoteRemoved(Handle dir, const std::string& name);
  void NoteUnknown(Handle dir, const std::string& name);  // ask the server about it
  // A rename this mount made (synchronously): the listings follow it.
  void NoteRenamed(Handle src, const std::string& sname, Handle dst, const std::string& dname,
                   bool exchange);
  // A hard link made here (`a`: the file as the server's link left it):
  // listed, and the file is no longer answered for here; a lookup of any of
  // its names in `dir` is answered with `a` as a grant's attributes are
  // (Known::kListed), as long as this mount changes nothing of the file but
  // its names there (an unlink of another of them is counted in).
  void NoteLinked(Handle dir, const std::string& name, const client::Attr& a);
  // A file's link count changed on its server by this mount (an unlink of
  // one of its names, a rename over one): the attributes kept for it as
  // created here (Forget) and those a grant listed for it, or a grant on its
  // way lists, count the old names; none is answered any more
  // (NoteOwnAttrChangeLocked).
  void NoteLinkCountChanged(Handle h);

  // Files created here under a lease still held: attributes kept here, size
  // reports and setattrs queued.
  std::optional<client::Attr> Born(Handle ino);
  // A change of `ino` goes to the server: its attributes are no longer kept here.
  void Forget(Handle ino);
  std::optional<client::Attr> QueueReport(Handle ino, const client::ReportWriteArgs& a,
                                          const client::Caller& c);
  // Applies `a` to the file's attributes here and queues it: false when it
  // must go to the server (size, layout, not the owner, setuid bits...).
  bool QueueSetAttr(Handle ino, const client::SetAttrArgs& a, const client::Caller& c,
                    client::Attr* out);

  // Write-behind. The mount answers a write once it has its bytes and sends
  // them in the background (a failure is reported by the file's next
  // flush/fsync, like the kernel's write-back cache). It applies to a file
  // created here under a lease still held (nobody else can reach it before
  // the lease comes back, and giving it back waits for these writes) and,
  // with kAnyFile, to every other file open for writing here (never to an
  // O_DIRECT, O_SYNC or O_DSYNC write: BehindScope::kNever): its bytes
  // are on the servers before close(2), fsync(2), a lock call, a truncate or
  // a read of it on this mount returns (close-to-open for other mounts).
  // Contiguous writes of a file gather into one run of up to kRunBytes,
  // sent when full, when a write does not continue it, when something needs
  // the file's data (AfterWrites), once it is kRunAge old, or at Flush.
  // A write overlapping one still in flight is never sent beside it (the
  // servers could apply them in either order): the caller waits (AfterWrites).
  // Behind: kBehind when *data was taken (reply now); kSync: write it now;
  // kWaitFirst: AfterWrites, then ask again.
  enum class WriteMode { kBehind, kSync, kWaitFirst };
  // Sends one run; it must call EndWrite with the outcome.
  using WriteSender =
      std::function<void(Handle ino, const Layout& layout, uint64_t offset, std::string data)>;
  void SetWriteSender(WriteSender s);
  // Which writes may go behind: kNever (O_DIRECT, O_SYNC, O_DSYNC: the
  // caller waits for the servers, whatever file it is), kBornOnly (files
  // created here under a held lease), kAnyFile (every file open for writing).
  enum class BehindScope { kNever, kBornOnly, kAnyFile };
  WriteMode Behind(Handle ino, const Layout& layout, uint64_t offset, std::string* data,
                   BehindScope scope);
  void EndWrite(Handle ino, uint64_t offset, uint64_t bytes, const Status& s);
  // `then` once no write-behind of `ino` is gathering or in flight (true; a
  // gathering run is sent now), or false at once.
  bool AfterWrites(Handle ino, std::function<void()> then);
  // The end of the bytes of `ino` acknowledged here that may not be on the
  // servers yet, 0 if none: a size from the servers is at least this.
  uint64_t BehindEnd(Handle ino);

  // If a queued or committing change touches one of `handles`: `then` runs
  // once everything queued now is committed, and true is returned. false:
  // nothing to wait for (the caller goes on at once).
  bool After(std::initializer_list<Handle> handles, std::function<void()> then);
  // Like After, for queued setattrs of `h` only (its mode and owner, which a
  // server-side permission check in `h` reads).
  bool AfterAttrs(Handle h, std::function<void()> then);
  // True if this mount changed the attributes of `h` (a setattr queued or
  // sent) at or after `t`: a server answer asked for before then may be
  // from before the change.
  bool AttrsChangedSince(Handle h, std::chrono::steady_clock::time_point t);
  // Like After({h}), passing over queued unlinks of h's names: they change
  // only its link count and ctime, which NlinkChangedSince tells about (the
  // unlinks of one hard link after another: each lookup of the next name
  // need not wait for the last unlink's commit).
  bool AfterBesidesUnlinks(Handle h, std::function<void()> then);
  // Like After({h}), for the queued create of `h` only (its metadata server
  // does not know the file before it is committed).
  bool AfterCreate(Handle h, std::function<void()> then);
  // True if an unlink of one of h's names by this mount is queued, or was
  // committed at or after `t`: a server answer asked for before then may
  // count a name that is gone (an entry given with it is already expired).
  bool NlinkChangedSince(Handle h, std::chrono::steady_clock::time_point t);
  // `then` runs once everything queued now is committed.
  void Flush(std::function<void()> then);
  // A queued or committing create or remove names `name` in `dir`, or a
  // setattr of `dir` (its mode decides the server's permission check) is
  // queued or committing: a synchronous create of `name` must wait (After).
  bool NameQueued(Handle dir, const std::string& name);
  // This mount has a change of `h` the servers do not have yet: queued or
  // committing (its create, a size report, a setattr) or write-behind bytes
  // gathering or in flight. Attributes of h from a server are then older
  // than the ones this mount gave the kernel.
  bool Unsettled(Handle h);
  // A failed commit of a change to `ino`, or of a change in the directory
  // `ino` (a create, unlink or rename in it; taken once), else Ok.
  Status TakeError(Handle ino);

  // At unmount: commits the queue, gives back every lease, ends the polls.
  void Shutdown();

  // Counters (logs, tests).
  uint64_t committed() const;
  uint64_t leases_granted() const;

 private:
  AsyncNs(std::unique_ptr<NsServers> owned, NsServers* servers, bool enabled,
          Clock::duration names_window);

  struct Name {
    Handle h = 0;
    client::FileType t = client::FileType::kUnknown;  // kUnknown: ask the server
  };
  struct Dir {
    enum State { kAcquiring, kHeld, kRefused } state = kAcquiring;
    std::unordered_map<std::string, Name> names;
    Handle next = 0, end = 0;  // handles left for creates
    Layout layout;
    client::Attr attr;
    uint32_t lease_ms = 0;
    Clock::time_point valid_until, retry_after;
    bool recalled = false;
    // Changes this mount made synchronously while the grant was on its way:
    // the server may have listed before or after each. Added and removed
    // names and the directory's own setattr are replayed onto the grant
    // (each is idempotent); a rename or an unknown entry makes the grant
    // unusable (changed_while_acquiring: given back, asked again).
    struct Note {
      enum Kind { kAdd, kRemove, kAttr } kind = kAdd;
      std::string name;
      Name n;
      client::Attr attr;
    };
    std::vector<Note> notes;
    bool changed_while_acquiring = false;
    bool want_handles = false;
    // The grant carried attributes (asked for by List) that no listing has
    // given the kernel yet; and until when a listing may carry names only.
    bool attrs_unserved = false;
    Clock::time_point granted_at;  // when the grant was asked for
    Clock::time_point names_until;
    // Subdirectories in listing order (from the last listing served): the
    // ones after an opened one are prefetched (PrefetchAfterLocked).
    std::vector<Handle> subdirs;
    // The attributes a grant with attributes carried, by handle (served
    // with the first listing, and to lookups as kListed).
    std::unordered_map<Handle, client::Attr> listed;  // see listed_in_
    std::vector<std::function<void(bool)>> waiting;
    std::vector<Handle> born;  // files created under this grant (keys of born_)
  };
  struct BornFile {
    Handle dir = 0;
    client::Attr attr;
    std::string target;  // symbolic links
  };
  // Create and Symlink: the file's attributes, the create queued.
  std::optional<client::Attr> CreateHere(Handle dir, const std::string& name,
                                         client::CreateArgs args, const client::Caller& caller);
  // Under mu_: `dir`'s entry reset for a grant on its way (kAcquiring). A
  // new grant starts from the server's state: attributes kept here for files
  // created under an earlier grant are not trusted across the gap.
  Dir& StartGrantLocked(Handle dir, bool want_handles);
  // Under mu_: forgets the attributes kept for the files created under `d`.
  void DropBornLocked(Dir& d);
  // Under mu_: the lease on `dir` is usable for new local answers.
  Dir* HeldLocked(Handle dir);
  // A synchronous change of `dir` while its lease is being acquired.
  void NoteWhileAcquiringLocked(Handle dir);
  // Keeps `note` for the grant on its way; false if `dir` is not being acquired.
  bool NoteAcquiringLocked(Handle dir, Dir::Note note);
  static void ReplayLocked(Dir& d, const Dir::Note& note);
  // The queue's hooks into this mount: the client, write-behind, leases.
  CommitQueue::Hooks QueueHooks();
  // A batch answered: the leases of the directories it changed are renewed.
  void OnCommitted(const std::vector<client::CommitOp>& ops, const std::vector<Status>& st,
                   Clock::time_point sent);
  void Acquire(Handle dir, const client::Caller& caller, bool for_create, bool with_attrs);
  // The server's answer to Acquire (sent at `sent`): the lease held, or the
  // entry marked refused and a grant that came too late given back; then the
  // directory's waiters are told which.
  void OnLeaseAnswer(Handle dir, Clock::time_point sent, Result<client::DirLeaseGrant> r);
  // Under mu_: `d` holds grant `g` (its names, and attributes not changed here
  // since `sent`); `mine`, when set, are this mount's own queued attributes
  // of the directory, which win over the grant's. Notes kept while acquiring
  // are replayed.
  void HoldGrantLocked(Handle dir, Dir& d, client::DirLeaseGrant& g, Clock::time_point sent,
                       const client::Attr* mine);
  // Under mu_: `d` reset and refused, asked for again after kRefusedRetry
  // (at once if this mount changed it while acquiring).
  void RefuseLocked(Handle dir, Dir& d, const Result<client::DirLeaseGrant>& r);
  // Under mu_: leases (with attributes) on up to kPrefetch subdirectories
  // that follow `dir` in its parent's listing, or the first ones of `dir`
  // itself (first_children): a tree walk (rm -r, find, ls -R, du) opens them
  // next, and their listing is then here when it does. Returns what to ask.
  std::vector<Handle> PrefetchLocked(Handle dir, bool first_children);
  void StartPrefetch(std::vector<Handle> dirs, const client::Caller& caller);
  // Under mu_: `d`'s listing, sorted; attributes from born files and, when
  // with_listed, the grant's. Records the subdirectories' order for prefetching.
  std::optional<std::vector<client::DirEntry>> ListingLocked(Handle dir, Dir& d, bool with_listed);
  void OnRecall(ServerId s, std::vector<Handle> dirs);
  // The poll of server `s` failed: its leases are gone.
  void OnServerLost(ServerId s);
  // The poller's tick: forgets recalls and listings' orders of the past,
  // leases long expired, and those of `lost` servers with nothing queued.
  void Sweep(Clock::time_point now, const std::set<ServerId>& lost);
  // This mount changed the attributes of `h` (a setattr queued or sent, or
  // its commit acknowledged): records when (CommitQueue::NoteAttrChange) and drops the
  // grant's now stale attributes of `h`.
  void NoteOwnAttrChangeLocked(Handle h);
  void NoteListedLocked(Handle h, Handle dir);
  static constexpr size_t kListedIndexMax = 1 << 20;
  void BeginCall();  // under mu_
  void BeginCallUnlocked();  // takes mu_ (the parts' hooks)
  void EndCall();

  std::unique_ptr<NsServers> owned_servers_;  // the client's adapter, when given a client
  NsServers* const servers_;
  const bool enabled_;
  const Clock::duration names_window_;
  mutable std::mutex mu_;
  // Each with its own lock, taken under mu_ (never the other way); the
  // queue takes wb_'s under its own (data_pending).
  WriteBehind wb_;
  CommitQueue queue_;
  std::unordered_map<Handle, Dir> dirs_;
  // When another client last recalled a directory from this mount: a
  // listing does not take that lease again soon (no ping-pong with a writer).
  std::unordered_map<Handle, Clock::time_point> recalled_at_;
  // Where each subdirectory of a listing served stands in it (parent, index).
  std::unordered_map<Handle, std::pair<Handle, uint32_t>> sibling_of_;
  uint32_t prefetching_ = 0;  // prefetch grants in flight
  std::unordered_map<Handle, BornFile> born_;
  // Which directory's grant listed a file's attributes (Dir::listed): a
  // setattr of the file by this mount makes them stale, so they are dropped
  // (NoteOwnAttrChangeLocked). An entry whose directory is gone is harmless.
  std::unordered_map<Handle, Handle> listed_in_;
  bool shutdown_ = false;
  uint64_t granted_ = 0;
  // Own calls in flight (polls, commits, lease calls): Shutdown waits for them.
  uint64_t calls_ = 0;
  std::condition_variable cv_;
  std::unique_ptr<RecallPoller> poller_;  // when enabled
};

}  // namespace clf::fuse
