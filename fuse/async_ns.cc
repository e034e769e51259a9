#include "fuse/async_ns.h"

#include <sys/stat.h>

#include <algorithm>
#include <future>
#include <unordered_set>

#include "common/config.h"
#include "common/log.h"
#include "common/posix_access.h"

namespace clf::fuse {

using client::Attr;
using client::Caller;
using client::CommitOp;
using client::FileType;

namespace {

// A change of the name `name` in `dir` naming the file `h`.
CommitOp NameOp(CommitOp::Kind kind, Handle dir, const std::string& name, Handle h,
                const client::Caller& caller) {
  CommitOp op;
  op.kind = kind;
  op.parent = dir;
  op.name = name;
  op.handle = h;
  op.caller = caller;
  return op;
}

// Handles asked for with a lease taken to create in a directory.
constexpr uint32_t kHandlesPerLease = 16384;
// How long before the server's expiry this mount stops answering for a lease
// (its clock and the server's run at the same rate; the lease counts from
// when the request was sent, before the server started it).
AsyncNs::Clock::duration Margin(uint32_t lease_ms) {
  return std::chrono::milliseconds(std::max<uint32_t>(lease_ms / 4, 500));
}
constexpr uint32_t kPollMs = 10000;
constexpr auto kRefusedRetry = std::chrono::seconds(1);
// A directory recalled by another client is not leased for a listing again
// for this long.
constexpr auto kListAfterRecall = std::chrono::seconds(10);
// Listings served from a lease at most this long (larger ones are read from
// the server a page at a time).
constexpr size_t kMaxListing = 4096;
// The most entries a grant carries attributes for (MetaOps::kLeaseAttrsMax).
constexpr size_t kLeaseAttrsMax = 2048;
// Subdirectory leases asked for ahead of a tree walk, and at most in flight.
constexpr size_t kPrefetch = 4;
constexpr uint32_t kMaxPrefetching = 8;

client::Timespec NowTs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return client::Timespec{ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}

bool InGroup(const Caller& c, uint32_t gid) { return InGroups(gid, c.gid, c.groups); }

}  // namespace

AsyncNs::AsyncNs(client::Client* client, bool enabled, Clock::duration names_window)
    : AsyncNs(std::make_unique<ClientNsServers>(client), nullptr, enabled, names_window) {}

AsyncNs::AsyncNs(NsServers* servers, bool enabled, Clock::duration names_window)
    : AsyncNs(nullptr, servers, enabled, names_window) {}

AsyncNs::AsyncNs(std::unique_ptr<NsServers> owned, NsServers* servers, bool enabled,
                 Clock::duration names_window)
    : owned_servers_(std::move(owned)),
      servers_(owned_servers_ != nullptr ? owned_servers_.get() : servers),
      enabled_(enabled),
      names_window_(names_window),
      wb_(WriteBehind::Options{}, /*start_timer=*/enabled),
      queue_(CommitQueue::Options{}, QueueHooks(), /*start_timer=*/enabled) {
  if (!enabled_) return;
  RecallPoller::Hooks h;
  h.poll = [this](ServerId s, uint32_t wait_ms,
                  std::function<void(Result<std::vector<Handle>>)> done) {
    servers_->LeaseEvents(s, wait_ms, std::move(done));
  };
  h.recalled = [this](ServerId s, std::vector<Handle> dirs) { OnRecall(s, std::move(dirs)); };
  h.lost = [this](ServerId s) { OnServerLost(s); };
  h.tick = [this](Clock::time_point now, const std::set<ServerId>& lost) { Sweep(now, lost); };
  h.call_begin = [this] { BeginCallUnlocked(); };
  h.call_end = [this] { EndCall(); };
  poller_ = std::make_unique<RecallPoller>(std::move(h), kPollMs);
}

AsyncNs::~AsyncNs() { Shutdown(); }

CommitQueue::Hooks AsyncNs::QueueHooks() {
  CommitQueue::Hooks h;
  h.commit = [this](ServerId s, std::vector<CommitOp> ops,
                    std::function<void(Result<std::vector<Status>>)> done) {
    servers_->Commit(s, std::move(ops), std::move(done));
  };
  h.data_pending = [this](Handle f) { return wb_.Has(f); };
  h.send_data = [this](const std::vector<Handle>& files) {
    WriteBehind::Sends sends;
    for (Handle f : files) wb_.Take(f, &sends);
    wb_.SendAll(std::move(sends));
  };
  h.answered = [this](const std::vector<CommitOp>& ops, const std::vector<Status>& st,
                      Clock::time_point sent) { OnCommitted(ops, st, sent); };
  h.give_back = [this](ServerId s, std::vector<Handle> dirs) { OnRecall(s, std::move(dirs)); };
  h.call_begin = [this] { BeginCallUnlocked(); };
  h.call_end = [this] { EndCall(); };
  return h;
}

void AsyncNs::OnCommitted(const std::vector<CommitOp>& ops, const std::vector<Status>& st,
                          Clock::time_point sent) {
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < ops.size(); ++i) {
    // A commit renews the lease of the directory it changed.
    if (!st[i].ok() || ops[i].parent == 0) continue;
    auto d = dirs_.find(ops[i].parent);
    if (d != dirs_.end() && d->second.state == Dir::kHeld && !d->second.recalled) {
      d->second.valid_until =
          std::max(d->second.valid_until, sent + std::chrono::milliseconds(d->second.lease_ms) -
                                              Margin(d->second.lease_ms));
    }
  }
}

void AsyncNs::BeginCall() { ++calls_; }  // under mu_

void AsyncNs::BeginCallUnlocked() {
  std::lock_guard<std::mutex> l(mu_);
  BeginCall();
}

void AsyncNs::EndCall() {
  std::lock_guard<std::mutex> l(mu_);
  if (--calls_ == 0) cv_.notify_all();
}

AsyncNs::Dir& AsyncNs::StartGrantLocked(Handle dir, bool want_handles) {
  auto [it, fresh] = dirs_.try_emplace(dir);
  Dir& d = it->second;
  if (!fresh) DropBornLocked(d);
  d = Dir{};
  d.state = Dir::kAcquiring;
  d.want_handles = want_handles;
  return d;
}

void AsyncNs::DropBornLocked(Dir& d) {
  for (Handle h : d.born) {
    // A file moved here since (Rename) is another lease's now.
    auto b = born_.find(h);
    if (b == born_.end()) continue;
    auto owner = dirs_.find(b->second.dir);
    if (owner == dirs_.end() || &owner->second == &d) born_.erase(b);
  }
  d.born.clear();
}

AsyncNs::Dir* AsyncNs::HeldLocked(Handle dir) {
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return nullptr;
  Dir& d = it->second;
  if (d.state != Dir::kHeld || d.recalled || Clock::now() >= d.valid_until) return nullptr;
  return &d;
}

void AsyncNs::WithLease(Handle dir, const Caller& caller, bool for_create,
                        std::function<void(bool)> then, bool with_attrs) {
  if (!enabled_) return then(false);
  bool ask = false;
  {
    std::unique_lock<std::mutex> l(mu_);
    if (shutdown_) {
      l.unlock();
      return then(false);
    }
    const Clock::time_point now = Clock::now();
    Dir* held = HeldLocked(dir);
    if (held != nullptr && (!for_create || held->next < held->end)) {
      l.unlock();
      return then(true);
    }
    auto it = dirs_.find(dir);
    if (it != dirs_.end()) {
      Dir& d = it->second;
      if (d.state == Dir::kAcquiring) {
        d.waiting.push_back(std::move(then));
        return;
      }
      if (d.state == Dir::kRefused && now < d.retry_after) {
        l.unlock();
        return then(false);
      }
      if (d.recalled) {  // being given back: not ours to answer for
        l.unlock();
        return then(false);
      }
      // Held but expired or out of handles: asked again (the server renews
      // it, with a fresh listing). Queued changes of the old grant must be
      // committed first, or the new listing would not show them.
      if (queue_.Touches(dir)) {
        l.unlock();
        return then(false);
      }
    }
    StartGrantLocked(dir, for_create).waiting.push_back(std::move(then));
    ask = true;
  }
  if (ask) Acquire(dir, caller, for_create, with_attrs);
}

void AsyncNs::List(Handle dir, const Caller& caller, bool plus,
                   std::function<void(std::optional<std::vector<client::DirEntry>>)> then) {
  if (!enabled_) return then(std::nullopt);
  // Serves the grant's listing with its attributes while they are as fresh
  // as a ReadDir's answer would be (names_window of the grant).
  auto serve_fresh = [this, dir](Dir& d) -> std::optional<std::vector<client::DirEntry>> {
    const bool unserved = d.attrs_unserved;
    d.attrs_unserved = false;
    if (!unserved || Clock::now() - d.granted_at >= names_window_) return std::nullopt;
    std::optional<std::vector<client::DirEntry>> out = ListingLocked(dir, d, true);
    if (out) d.names_until = Clock::now() + names_window_;
    return out;
  };
  auto granted = [this, dir, plus, then, caller, serve_fresh](bool held) {
    std::unique_lock<std::mutex> l(mu_);
    Dir* d = held ? HeldLocked(dir) : nullptr;
    std::optional<std::vector<client::DirEntry>> out;
    if (d != nullptr) out = plus ? serve_fresh(*d) : ListingLocked(dir, *d, false);
    std::vector<Handle> ahead;
    if (out) ahead = PrefetchLocked(dir, true);
    l.unlock();
    StartPrefetch(std::move(ahead), caller);
    then(std::move(out));
  };
  {
    std::unique_lock<std::mutex> l(mu_);
    if (Dir* d = HeldLocked(dir)) {
      std::optional<std::vector<client::DirEntry>> out;
      if (plus) out = serve_fresh(*d);  // a prefetched grant
      if (!out && (!plus || Clock::now() < d->names_until)) out = ListingLocked(dir, *d, false);
      if (out) {
        std::vector<Handle> ahead = PrefetchLocked(dir, true);
        l.unlock();
        StartPrefetch(std::move(ahead), caller);
        return then(std::move(out));
      }
      // Too large to come with attributes (the server sends names only):
      // asking again would not help; ReadDir pages it. Nor while files
      // created here under this lease are listed: asking again drops them,
      // and the grant's attributes are the servers', possibly from before
      // their queued size reports and times (tar -x, then find, saw sizes of
      // 0). ReadDir lists them as names only (Unsettled), and their lookups
      // are answered here.
      if (queue_.Touches(dir) || shutdown_ || d->names.size() > kLeaseAttrsMax ||
          !d->born.empty()) {
        l.unlock();
        return then(std::nullopt);
      }
      // Attributes wanted and nothing of this mount's queued for the
      // directory: the lease is asked again, with them (what a ReadDir would
      // cost; a second listing soon after then needs nothing).
      StartGrantLocked(dir, false).waiting.push_back(std::move(granted));
      std::vector<Handle> ahead = PrefetchLocked(dir, false);
      l.unlock();
      StartPrefetch(std::move(ahead), caller);
      return Acquire(dir, caller, false, true);
    }
    auto r = recalled_at_.find(dir);
    if (r != recalled_at_.end() && Clock::now() < r->second + kListAfterRecall) {
      l.unlock();
      return then(std::nullopt);
    }
    std::vector<Handle> ahead = PrefetchLocked(dir, false);
    l.unlock();
    StartPrefetch(std::move(ahead), caller);
  }
  WithLease(dir, caller, false, std::move(granted), plus);
}

std::vector<Handle> AsyncNs::PrefetchLocked(Handle dir, bool first_children) {
  std::vector<Handle> ask;
  const Clock::time_point now = Clock::now();
  auto want = [&](Handle h) {
    if (prefetching_ + ask.size() >= kMaxPrefetching) return false;
    auto r = recalled_at_.find(h);
    if (r != recalled_at_.end() && now < r->second + kListAfterRecall) return true;
    auto it = dirs_.find(h);
    if (it != dirs_.end()) {
      const Dir& d = it->second;
      if (d.state == Dir::kAcquiring || d.recalled) return true;
      if (d.state == Dir::kRefused && now < d.retry_after) return true;
      if (d.state == Dir::kHeld && (d.attrs_unserved || queue_.Touches(h))) return true;
      // Held with files created here under it: asking again would drop them
      // and list the servers' attributes, possibly from before their queued
      // size reports and times (the kernel takes a listing's attributes).
      if (d.state == Dir::kHeld && !d.born.empty()) return true;
    }
    ask.push_back(h);
    return true;
  };
  // The siblings after `dir` in its parent's listing.
  if (auto s = sibling_of_.find(dir); s != sibling_of_.end()) {
    auto p = dirs_.find(s->second.first);
    if (p != dirs_.end()) {
      const std::vector<Handle>& sub = p->second.subdirs;
      for (size_t i = s->second.second + 1; i < sub.size() && i <= s->second.second + kPrefetch;
           ++i) {
        if (!want(sub[i])) break;
      }
    }
  }
  if (first_children) {
    auto d = dirs_.find(dir);
    if (d != dirs_.end()) {
      const std::vector<Handle>& sub = d->second.subdirs;
      for (size_t i = 0; i < sub.size() && i < kPrefetch; ++i) {
        if (!want(sub[i])) break;
      }
    }
  }
  for (Handle h : ask) {
    ++prefetching_;
    StartGrantLocked(h, false).waiting.push_back([this](bool) {
      std::lock_guard<std::mutex> l(mu_);
      --prefetching_;
    });
  }
  return ask;
}

void AsyncNs::PrefetchForCreate(Handle dir, const Caller& caller) {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_ || dirs_.count(dir) != 0 || prefetching_ >= kMaxPrefetching) return;
    Dir& d = dirs_[dir];
    d.state = Dir::kAcquiring;
    d.want_handles = true;
    ++prefetching_;
    d.waiting.push_back([this](bool) {
      std::lock_guard<std::mutex> l(mu_);
      --prefetching_;
    });
  }
  CLF_LOG_DEBUG("lease on {:#x}: prefetched for creates", dir);
  Acquire(dir, caller, true, false);
}

void AsyncNs::RenewLapsed(Handle dir, const Caller& caller) {
  if (!enabled_) return;
  bool want_handles = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = dirs_.find(dir);
    if (shutdown_ || it == dirs_.end()) return;
    Dir& d = it->second;
    if (d.state != Dir::kHeld || d.recalled || Clock::now() < d.valid_until ||
        queue_.Touches(dir)) {
      return;
    }
    want_handles = d.want_handles;
    StartGrantLocked(dir, want_handles);
  }
  CLF_LOG_DEBUG("lease on {:#x}: lapsed while in use, asked again", dir);
  Acquire(dir, caller, want_handles, false);
}

void AsyncNs::StartPrefetch(std::vector<Handle> dirs, const Caller& caller) {
  for (Handle h : dirs) {
    CLF_LOG_DEBUG("lease on {:#x}: prefetched", h);
    Acquire(h, caller, false, true);
  }
}

std::optional<std::vector<client::DirEntry>> AsyncNs::ListingLocked(Handle dir, Dir& d,
                                                                    bool with_listed) {
  if (d.names.size() > kMaxListing) return std::nullopt;
  std::vector<client::DirEntry> out;
  out.reserve(d.names.size());
  for (const auto& [name, n] : d.names) {
    client::DirEntry e;
    e.name = name;
    e.handle = n.h;
    e.type = n.t;
    // Files created here under the lease: this mount's attributes are theirs;
    // others as the grant had them (a change since by this mount went
    // through the names, so what is listed here is what the server has).
    Dir* held = n.t == FileType::kDirectory ? HeldLocked(n.h) : nullptr;
    if (auto b = born_.find(n.h); b != born_.end()) {
      e.attr = b->second.attr;
    } else if (held != nullptr) {
      e.attr = held->attr;  // as a lookup of it answers (Find)
    } else if (auto a = d.listed.find(n.h); with_listed && a != d.listed.end()) {
      e.attr = a->second;
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const client::DirEntry& a, const client::DirEntry& b) { return a.name < b.name; });
  // The subdirectories in the order a walk visits them (prefetch).
  d.subdirs.clear();
  for (const client::DirEntry& e : out) {
    if (e.type != FileType::kDirectory) continue;
    sibling_of_[e.handle] = {dir, static_cast<uint32_t>(d.subdirs.size())};
    d.subdirs.push_back(e.handle);
  }
  return out;
}

void AsyncNs::Acquire(Handle dir, const Caller& caller, bool for_create, bool with_attrs) {
  const Clock::time_point sent = Clock::now();
  BeginCallUnlocked();
  servers_->AcquireDirLease(dir, for_create ? kHandlesPerLease : 0, with_attrs, caller,
                            [this, dir, sent](Result<client::DirLeaseGrant> r) {
                              OnLeaseAnswer(dir, sent, std::move(r));
                            });
}

void AsyncNs::OnLeaseAnswer(Handle dir, Clock::time_point sent, Result<client::DirLeaseGrant> r) {
  std::vector<std::function<void(bool)>> waiting;
  bool held = false, give_back = false;
  const ServerId s = ServerOf(dir);
  {
    std::lock_guard<std::mutex> l(mu_);
    Dir& d = dirs_[dir];
    waiting = std::move(d.waiting);
    d.waiting.clear();
    // The directory's own setattrs still queued here (a chmod or chown
    // of a directory created under its parent's lease): the grant's
    // attributes are from before them. Created here: this mount's
    // attributes are the directory's; otherwise ask again once the
    // queue has them.
    auto born = born_.find(dir);
    const bool own_attrs_queued = queue_.AttrsQueued(dir);
    if (own_attrs_queued && born == born_.end()) d.changed_while_acquiring = true;
    if (r.ok() && r->granted && !d.recalled && !d.changed_while_acquiring && !shutdown_) {
      HoldGrantLocked(dir, d, *r, sent, own_attrs_queued ? &born->second.attr : nullptr);
      held = true;
    } else {
      give_back = r.ok() && r->granted;  // recalled while asking, or unmounting
      RefuseLocked(dir, d, r);
    }
  }
  if (give_back) {
    BeginCallUnlocked();
    servers_->ReleaseDirLease(dir, [this](Status) { EndCall(); });
  }
  if (held) poller_->Watch(s);
  for (auto& w : waiting) w(held);
  EndCall();
}

void AsyncNs::HoldGrantLocked(Handle dir, Dir& d, client::DirLeaseGrant& g, Clock::time_point sent,
                              const client::Attr* mine) {
  d.state = Dir::kHeld;
  d.names.clear();
  d.names.reserve(g.entries.size());
  if (g.with_attrs) {
    d.listed.reserve(g.entries.size());
    d.attrs_unserved = true;
  }
  for (client::DirEntry& e : g.entries) {
    const bool changed_since = queue_.AttrsChangedSince(e.handle, sent);
    if (g.with_attrs && e.attr.handle == e.handle && e.handle != 0 && !changed_since) {
      NoteListedLocked(e.handle, dir);
      d.listed.emplace(e.handle, std::move(e.attr));
    }
    d.names[std::move(e.name)] = Name{e.handle, e.type};
  }
  d.next = g.handle_first;
  d.end = g.handle_first + g.handle_count;
  d.layout = g.file_layout;
  d.attr = g.dir;
  if (mine != nullptr) {
    d.attr.mode = mine->mode;
    d.attr.uid = mine->uid;
    d.attr.gid = mine->gid;
    d.attr.atime = mine->atime;
    d.attr.mtime = mine->mtime;
    d.attr.ctime = mine->ctime;
  }
  d.granted_at = sent;
  d.lease_ms = g.lease_ms;
  d.valid_until = sent + std::chrono::milliseconds(g.lease_ms) - Margin(g.lease_ms);
  for (Dir::Note& note : d.notes) ReplayLocked(d, note);
  d.notes.clear();
  ++granted_;
}

void AsyncNs::RefuseLocked(Handle dir, Dir& d, const Result<client::DirLeaseGrant>& r) {
  if (!r.ok()) {
    CLF_LOG_DEBUG("lease on {:#x}: {}", dir, r.status().ToString());
  } else if (!r->granted) {
    CLF_LOG_DEBUG("lease on {:#x} refused: {}", dir, r->refused);
  }
  // A listing raced by this mount's own change: asked again at once.
  const bool raced = d.changed_while_acquiring;
  d = Dir{};
  d.state = Dir::kRefused;
  d.retry_after = Clock::now() + (raced ? Clock::duration::zero() : kRefusedRetry);
}

AsyncNs::Known AsyncNs::Find(Handle dir, const std::string& name, Attr* born, Handle* listed,
                             FileType* listed_type) {
  if (!enabled_) return Known::kUnknown;
  std::lock_guard<std::mutex> l(mu_);
  Dir* d = HeldLocked(dir);
  if (d == nullptr) return Known::kUnknown;
  auto it = d->names.find(name);
  if (it == d->names.end()) return Known::kAbsent;
  if (it->second.t == FileType::kUnknown) return Known::kUnknown;
  auto b = born_.find(it->second.h);
  if (b == born_.end()) {
    // A subdirectory whose own lease this mount holds: its attributes are
    // this mount's (a walk's lookup of the next directory, prefetched).
    if (it->second.t == FileType::kDirectory) {
      if (Dir* c = HeldLocked(it->second.h); c != nullptr && born != nullptr) {
        *born = c->attr;
        return Known::kPresent;
      }
    }
    if (auto a = d->listed.find(it->second.h); a != d->listed.end() && born != nullptr) {
      *born = a->second;
      return Known::kListed;
    }
    if (listed != nullptr) *listed = it->second.h;  // the server has its attributes
    if (listed_type != nullptr) *listed_type = it->second.t;
    return Known::kUnknown;
  }
  if (born != nullptr) *born = b->second.attr;
  return Known::kPresent;
}

std::optional<Attr> AsyncNs::Create(Handle dir, const std::string& name, uint32_t mode,
                                    bool open_for_write, const Caller& caller) {
  client::CreateArgs args;
  args.type = FileType::kRegular;
  args.mode = mode & 07777;
  args.open_for_write = open_for_write;
  return CreateHere(dir, name, std::move(args), caller);
}

std::optional<Attr> AsyncNs::Symlink(Handle dir, const std::string& name,
                                     const std::string& target, const Caller& caller) {
  client::CreateArgs args;
  args.type = FileType::kSymlink;
  args.mode = 0777;
  args.symlink_target = target;
  return CreateHere(dir, name, std::move(args), caller);
}

std::optional<Attr> AsyncNs::CreateHere(Handle dir, const std::string& name,
                                        client::CreateArgs args, const Caller& caller) {
  if (!enabled_) return std::nullopt;
  std::unique_lock<std::mutex> l(mu_);
  Dir* d = HeldLocked(dir);
  if (d == nullptr || d->next >= d->end) return std::nullopt;
  if (d->names.count(name) != 0) return std::nullopt;  // exists: the server decides
  // Where the server's create would do more than this (a setgid directory's
  // group, the kernel's handling of setuid/setgid bits): ask it.
  if ((args.mode & (S_ISUID | S_ISGID)) != 0 || (d->attr.mode & S_ISGID) != 0) return std::nullopt;
  const bool symlink = args.type == FileType::kSymlink;
  Attr a;
  a.handle = d->next++;
  a.type = args.type;
  a.mode = args.mode;
  a.uid = caller.uid;
  a.gid = caller.gid;
  a.nlink = 1;
  a.atime = a.mtime = a.ctime = NowTs();
  if (symlink) {
    a.size = args.symlink_target.size();  // as the server sets it
  } else {
    a.layout = d->layout;
    a.layout.first_server = FirstServerFor(a.handle, servers_->servers());
    a.writers = args.open_for_write ? 1 : 0;
  }
  a.has_xattrs = false;
  d->names[name] = Name{a.handle, a.type};
  d->attr.mtime = d->attr.ctime = a.mtime;
  born_[a.handle] = BornFile{dir, a, symlink ? args.symlink_target : std::string()};
  d->born.push_back(a.handle);
  CommitOp op = NameOp(CommitOp::kCreate, dir, name, a.handle, caller);
  op.create = std::move(args);
  op.time = a.mtime;
  const bool start = queue_.Enqueue(std::move(op), ServerOf(dir), {dir, a.handle});
  l.unlock();
  if (start) queue_.Kick();
  return a;
}

std::optional<Handle> AsyncNs::Unlink(Handle dir, const std::string& name, const Caller& caller,
                                      const std::function<bool(Handle)>& is_open) {
  if (!enabled_) return std::nullopt;
  std::unique_lock<std::mutex> l(mu_);
  Dir* d = HeldLocked(dir);
  if (d == nullptr) return std::nullopt;
  auto it = d->names.find(name);
  if (it == d->names.end()) return std::nullopt;  // the server says ENOENT
  const Name n = it->second;
  if (n.t == FileType::kUnknown || n.t == FileType::kDirectory) return std::nullopt;
  // Sticky directories need the file's owner: only the owner of the directory
  // or root is answered here.
  if ((d->attr.mode & S_ISVTX) != 0 && caller.uid != 0 && caller.uid != d->attr.uid) {
    return std::nullopt;
  }
  if (is_open(n.h)) return std::nullopt;  // open-unlink keeps an orphan: the server's job
  // Its write-behind must land before the data is freed.
  if (wb_.Has(n.h)) return std::nullopt;
  d->names.erase(it);
  d->attr.mtime = d->attr.ctime = NowTs();
  // A file created here keeps its attributes while it has other names.
  if (auto b = born_.find(n.h); b != born_.end()) {
    if (b->second.attr.nlink > 1) {
      --b->second.attr.nlink;
      b->second.attr.ctime = d->attr.ctime;
    } else {
      born_.erase(b);
    }
  }
  // The file keeps its other names (hard links): where its attributes are
  // listed, the link count and ctime follow this unlink.
  if (auto li = listed_in_.find(n.h); li != listed_in_.end()) {
    if (auto o = dirs_.find(li->second); o != dirs_.end()) {
      if (auto a = o->second.listed.find(n.h); a != o->second.listed.end()) {
        if (a->second.nlink > 1) {
          --a->second.nlink;
          a->second.ctime = d->attr.ctime;
        } else {
          o->second.listed.erase(a);
        }
      }
    }
  }
  CommitOp op = NameOp(CommitOp::kRemove, dir, name, n.h, caller);
  const bool start = queue_.Enqueue(std::move(op), ServerOf(dir), {dir, n.h});
  l.unlock();
  if (start) queue_.Kick();
  return n.h;
}

std::optional<Attr> AsyncNs::DirAttr(Handle dir) {
  if (!enabled_) return std::nullopt;
  std::lock_guard<std::mutex> l(mu_);
  Dir* d = HeldLocked(dir);
  if (d == nullptr) return std::nullopt;
  return d->attr;
}

std::optional<Handle> AsyncNs::Rmdir(Handle dir, const std::string& name, const Caller& caller) {
  if (!enabled_) return std::nullopt;
  std::unique_lock<std::mutex> l(mu_);
  Dir* d = HeldLocked(dir);
  if (d == nullptr) return std::nullopt;
  auto it = d->names.find(name);
  if (it == d->names.end() || it->second.t != FileType::kDirectory) return std::nullopt;
  const Handle child = it->second.h;
  Dir* c = HeldLocked(child);
  // Empty as far as the server will know once the queue is committed: the
  // child's listing came from its server under a lease this mount still holds.
  if (c == nullptr || !c->names.empty()) return std::nullopt;
  if ((d->attr.mode & S_ISVTX) != 0 && caller.uid != 0 && caller.uid != d->attr.uid) {
    return std::nullopt;
  }
  d->names.erase(it);
  if (d->attr.nlink > 2) --d->attr.nlink;
  d->attr.mtime = d->attr.ctime = NowTs();
  DropBornLocked(*c);
  dirs_.erase(child);  // gone once committed; its server's lease runs out by itself
  CommitOp op = NameOp(CommitOp::kRemove, dir, name, child, caller);
  op.directory = true;
  const bool start = queue_.Enqueue(std::move(op), ServerOf(dir), {dir, child});
  l.unlock();
  if (start) queue_.Kick();
  return child;
}

void AsyncNs::NoteWhileAcquiringLocked(Handle dir) {
  auto it = dirs_.find(dir);
  if (it != dirs_.end() && it->second.state == Dir::kAcquiring) {
    it->second.changed_while_acquiring = true;
  }
}

void AsyncNs::ReplayLocked(Dir& d, const Dir::Note& note) {
  switch (note.kind) {
    case Dir::Note::kAdd: {
      auto [it, inserted] = d.names.insert_or_assign(note.name, note.n);
      if (inserted && note.n.t == FileType::kDirectory) ++d.attr.nlink;
      break;
    }
    case Dir::Note::kRemove: {
      auto it = d.names.find(note.name);
      if (it == d.names.end()) break;
      if (it->second.t == FileType::kDirectory && d.attr.nlink > 2) --d.attr.nlink;
      d.names.erase(it);
      break;
    }
    case Dir::Note::kAttr:
      d.attr.mode = note.attr.mode;
      d.attr.uid = note.attr.uid;
      d.attr.gid = note.attr.gid;
      d.attr.ctime = note.attr.ctime;
      d.attr.atime = note.attr.atime;
      break;
  }
}

bool AsyncNs::NoteAcquiringLocked(Handle dir, Dir::Note note) {
  auto it = dirs_.find(dir);
  if (it == dirs_.end() || it->second.state != Dir::kAcquiring) return false;
  it->second.notes.push_back(std::move(note));
  return true;
}

void AsyncNs::NoteListedLocked(Handle h, Handle dir) {
  // Entries of directories whose listings were dropped since stay behind:
  // past a bound, the index is made again from the listings held.
  if (listed_in_.size() >= kListedIndexMax) {
    listed_in_.clear();
    for (const auto& [dh, d] : dirs_) {
      for (const auto& [fh, a] : d.listed) listed_in_[fh] = dh;
    }
  }
  // One listing per file (a file with names in two directories): the older
  // one is dropped, so a change of the file drops the only one.
  auto [it, inserted] = listed_in_.try_emplace(h, dir);
  if (!inserted && it->second != dir) {
    if (auto o = dirs_.find(it->second); o != dirs_.end()) o->second.listed.erase(h);
    it->second = dir;
  }
}

void AsyncNs::NoteOwnAttrChangeLocked(Handle h) {
  queue_.NoteAttrChange(h);
  auto it = listed_in_.find(h);
  if (it == listed_in_.end()) return;
  if (auto d = dirs_.find(it->second); d != dirs_.end()) d->second.listed.erase(h);
  listed_in_.erase(it);
}

void AsyncNs::NoteAttrChanged(Handle ino, const Attr& fresh) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> l(mu_);
  NoteOwnAttrChangeLocked(ino);
  if (fresh.type != FileType::kDirectory) return;
  Dir::Note note;
  note.kind = Dir::Note::kAttr;
  note.attr = fresh;
  if (NoteAcquiringLocked(ino, std::move(note))) return;
  Dir* d = HeldLocked(ino);
  if (d == nullptr) return;
  // The permission bits and owner are the server's now; the listing, link
  // count and mtime stay as this mount's queued changes leave them.
  d->attr.mode = fresh.mode;
  d->attr.uid = fresh.uid;
  d->attr.gid = fresh.gid;
  d->attr.ctime = fresh.ctime;
  d->attr.atime = fresh.atime;
}

void AsyncNs::NoteAdded(Handle dir, const std::string& name, Handle h, FileType t,
                        std::optional<client::Timespec> when) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> l(mu_);
  Dir::Note note;
  note.kind = Dir::Note::kAdd;
  note.name = name;
  note.n = Name{h, t};
  if (NoteAcquiringLocked(dir, std::move(note))) return;
  auto it = dirs_.find(dir);
  if (it == dirs_.end() || it->second.state != Dir::kHeld) return;
  Dir& d = it->second;
  d.names[name] = Name{h, t};
  d.attr.mtime = d.attr.ctime = when.value_or(NowTs());
  if (t == FileType::kDirectory) ++d.attr.nlink;
}

void AsyncNs::NoteRemoved(Handle dir, const std::string& name) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> l(mu_);
  Dir::Note note;
  note.kind = Dir::Note::kRemove;
  note.name = name;
  if (NoteAcquiringLocked(dir, std::move(note))) return;
  auto it = dirs_.find(dir);
  if (it == dirs_.end() || it->second.state != Dir::kHeld) return;
  Dir& d = it->second;
  auto n = d.names.find(name);
  if (n == d.names.end()) return;
  if (n->second.t == FileType::kDirectory && d.attr.nlink > 2) --d.attr.nlink;
  d.listed.erase(n->second.h);  // its link count changed: the server's now
  d.names.erase(n);
  d.attr.mtime = d.attr.ctime = NowTs();
}

void AsyncNs::NoteUnknown(Handle dir, const std::string& /*name*/) {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    NoteWhileAcquiringLocked(dir);
    auto it = dirs_.find(dir);
    if (it == dirs_.end() || it->second.state != Dir::kHeld) return;
  }
  // An entry whose handle and type this mount does not know (a rename from a
  // directory it holds no lease on): give the lease back rather than guess.
  OnRecall(ServerOf(dir), {dir});
}

void AsyncNs::NoteRenamed(Handle src, const std::string& sname, Handle dst,
                          const std::string& dname, bool exchange) {
  if (!enabled_) return;
  std::vector<Handle> give_back;
  {
    std::lock_guard<std::mutex> l(mu_);
    NoteWhileAcquiringLocked(src);
    NoteWhileAcquiringLocked(dst);
    auto s = dirs_.find(src);
    auto d = dirs_.find(dst);
    const bool s_held = s != dirs_.end() && s->second.state == Dir::kHeld;
    const bool d_held = d != dirs_.end() && d->second.state == Dir::kHeld;
    Name moved;
    bool known = false;
    if (s_held) {
      auto n = s->second.names.find(sname);
      if (n != s->second.names.end() && n->second.t != FileType::kUnknown) {
        moved = n->second;
        known = true;
      }
    }
    if (exchange) {
      if (s_held) give_back.push_back(src);
      if (d_held && dst != src) give_back.push_back(dst);
    } else {
      if (s_held) {
        s->second.names.erase(sname);
        s->second.attr.mtime = s->second.attr.ctime = NowTs();
        if (moved.t == FileType::kDirectory && s->second.attr.nlink > 2 && src != dst) {
          --s->second.attr.nlink;
        }
      }
      if (known) born_.erase(moved.h);
      if (d_held) {
        if (known && moved.t != FileType::kDirectory) {
          auto old = d->second.names.find(dname);
          if (old != d->second.names.end()) born_.erase(old->second.h);
          d->second.names[dname] = moved;
          d->second.attr.mtime = d->second.attr.ctime = NowTs();
        } else {
          give_back.push_back(dst);  // nlink and the entry: ask the server
        }
      }
    }
  }
  if (!give_back.empty()) OnRecall(ServerOf(give_back.front()), give_back);
}

void AsyncNs::NoteLinked(Handle dir, const std::string& name, const Attr& a) {
  NoteAdded(dir, name, a.handle, a.type);
  if (!enabled_) return;
  std::lock_guard<std::mutex> l(mu_);
  born_.erase(a.handle);
  // A grant on its way may list the file with its old link count; a listing
  // in another directory has it.
  NoteOwnAttrChangeLocked(a.handle);
  Dir* d = HeldLocked(dir);
  if (d == nullptr || d->names.count(name) == 0) return;
  // A change of the file queued meanwhile is newer than `a`.
  if (queue_.Touches(a.handle) || queue_.AttrsQueued(a.handle)) return;
  // Listed in one directory at most: this mount's own attribute change drops
  // that one listing (NoteOwnAttrChangeLocked).
  if (auto li = listed_in_.find(a.handle); li != listed_in_.end() && li->second != dir) {
    auto o = dirs_.find(li->second);
    if (o != dirs_.end() && o->second.listed.count(a.handle) != 0) return;
  }
  d->listed[a.handle] = a;
  NoteListedLocked(a.handle, dir);
}

void AsyncNs::NoteLinkCountChanged(Handle h) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> l(mu_);
  born_.erase(h);
  NoteOwnAttrChangeLocked(h);
}

void AsyncNs::Forget(Handle ino) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> l(mu_);
  born_.erase(ino);
}

std::optional<Attr> AsyncNs::Born(Handle ino) {
  if (!enabled_) return std::nullopt;
  std::lock_guard<std::mutex> l(mu_);
  auto b = born_.find(ino);
  if (b == born_.end() || HeldLocked(b->second.dir) == nullptr) return std::nullopt;
  return b->second.attr;
}

std::optional<Attr> AsyncNs::Link(Handle h, Handle dir, const std::string& name,
                                  const Caller& caller) {
  if (!enabled_) return std::nullopt;
  std::unique_lock<std::mutex> l(mu_);
  Dir* d = HeldLocked(dir);
  if (d == nullptr || d->names.count(name) != 0) return std::nullopt;  // exists: the server says
  auto b = born_.find(h);
  if (b == born_.end() || HeldLocked(b->second.dir) == nullptr) return std::nullopt;
  Attr& a = b->second.attr;
  if (a.type == FileType::kDirectory || a.nlink >= kMaxLinks) return std::nullopt;
  ++a.nlink;
  a.ctime = NowTs();
  d->names[name] = Name{h, a.type};
  d->attr.mtime = d->attr.ctime = a.ctime;
  CommitOp op = NameOp(CommitOp::kLink, dir, name, h, caller);
  const Attr out = a;
  const bool start = queue_.Enqueue(std::move(op), ServerOf(dir), {dir, h});
  l.unlock();
  if (start) queue_.Kick();
  return out;
}

bool AsyncNs::Rename(Handle src, const std::string& sname, Handle dst, const std::string& dname,
                     const Caller& caller) {
  if (!enabled_ || (src == dst && sname == dname)) return false;
  std::unique_lock<std::mutex> l(mu_);
  Dir* s = HeldLocked(src);
  Dir* d = HeldLocked(dst);
  if (s == nullptr || d == nullptr || d->names.count(dname) != 0) return false;
  auto it = s->names.find(sname);
  if (it == s->names.end()) return false;  // the server says ENOENT
  const Name n = it->second;
  if (n.t == FileType::kUnknown || n.t == FileType::kDirectory) return false;
  // A sticky source needs the file's owner: only the directory's owner or
  // root is answered here.
  if ((s->attr.mode & S_ISVTX) != 0 && caller.uid != 0 && caller.uid != s->attr.uid) return false;
  s->names.erase(it);
  d->names[dname] = n;
  const client::Timespec now = NowTs();
  s->attr.mtime = s->attr.ctime = now;
  d->attr.mtime = d->attr.ctime = now;
  // The file's ctime moves: attributes a listing holds are stale; a file
  // created here keeps its own, now under the destination's lease.
  NoteOwnAttrChangeLocked(n.h);
  if (auto b = born_.find(n.h); b != born_.end()) {
    b->second.attr.ctime = now;
    if (b->second.dir != dst) {
      b->second.dir = dst;
      d->born.push_back(n.h);
    }
  }
  bool kick = false;
  if (queue_.FoldRename(n.h, src, sname, dst, dname, caller, &kick)) {
    l.unlock();
    if (kick) queue_.Kick();
    return true;
  }
  CommitOp op = NameOp(CommitOp::kRename, src, sname, n.h, caller);
  op.new_parent = dst;
  op.new_name = dname;
  const bool start = queue_.Enqueue(std::move(op), ServerOf(src), {src, dst, n.h});
  l.unlock();
  if (start) queue_.Kick();
  return true;
}

bool AsyncNs::QueueSync(Handle dir) {
  if (!enabled_) return false;
  std::unique_lock<std::mutex> l(mu_);
  if (!queue_.Touches(dir)) return false;
  CommitOp op;
  op.kind = CommitOp::kSync;
  op.parent = dir;
  op.handle = dir;  // a failure is the directory's (TakeError)
  const bool start = queue_.Enqueue(std::move(op), ServerOf(dir), {dir});
  l.unlock();
  if (start) queue_.Kick();
  return true;
}

std::optional<std::string> AsyncNs::BornTarget(Handle ino) {
  if (!enabled_) return std::nullopt;
  std::lock_guard<std::mutex> l(mu_);
  auto b = born_.find(ino);
  if (b == born_.end() || b->second.attr.type != FileType::kSymlink ||
      HeldLocked(b->second.dir) == nullptr) {
    return std::nullopt;
  }
  return b->second.target;
}

std::optional<Attr> AsyncNs::QueueReport(Handle ino, const client::ReportWriteArgs& a,
                                         const Caller& c) {
  if (!enabled_) return std::nullopt;
  std::unique_lock<std::mutex> l(mu_);
  auto b = born_.find(ino);
  if (b == born_.end() || HeldLocked(b->second.dir) == nullptr) return std::nullopt;
  Attr& at = b->second.attr;
  if (a.wrote) {
    at.size = std::max(at.size, a.size);
    at.mtime = at.ctime = NowTs();
  }
  if (a.writers_delta < 0 && at.writers > 0) --at.writers;
  if (a.writers_delta > 0) ++at.writers;
  // The close of a file created and not written (`: > f`, tar's empty
  // files), whose create is still queued: the create goes without its
  // writer instead of a create and a report (the server applies the same).
  if (!a.wrote && !a.refresh && a.writers_delta == -1 && queue_.DropCreateWriter(ino)) return at;
  CommitOp op;
  op.kind = CommitOp::kReport;
  op.handle = ino;
  op.report = a;
  op.caller = c;
  const Attr out = at;
  const bool start = queue_.Enqueue(std::move(op), ServerOf(ino), {ino});
  l.unlock();
  if (start) queue_.Kick();
  return out;
}

bool AsyncNs::QueueSetAttr(Handle ino, const client::SetAttrArgs& a, const Caller& c, Attr* out) {
  if (!enabled_) return false;
  using namespace client;
  constexpr uint32_t kLocal = kSetMode | kSetUid | kSetGid | kSetAtime | kSetMtime | kSetAtimeNow |
                              kSetMtimeNow | kSetViaOpenFile | kKillSuidGid;
  if ((a.valid & ~kLocal) != 0) return false;  // size, layout: the server
  std::unique_lock<std::mutex> l(mu_);
  // A file created here under a lease still held, or a directory this mount
  // holds the lease of (its attributes are this mount's while it does).
  Attr* held = nullptr;
  if (auto b = born_.find(ino); b != born_.end()) {
    if (HeldLocked(b->second.dir) != nullptr) held = &b->second.attr;
  } else if (Dir* d = HeldLocked(ino)) {
    held = &d->attr;
  }
  if (held == nullptr) return false;
  Attr& at = *held;
  const bool root = c.uid == 0;
  const bool owner = c.uid == at.uid;
  NoteOwnAttrChangeLocked(ino);
  // The server's rules where they are simple; everything else goes there.
  if (!root && !owner) return false;
  if ((a.valid & kSetUid) && !root && a.uid != at.uid) return false;
  if ((a.valid & kSetGid) && !root && !InGroup(c, a.gid)) return false;
  if ((a.valid & kSetMode) && (a.mode & (S_ISUID | S_ISGID)) != 0 && !root) return false;
  // chown by root keeps setuid/setgid bits only for root; the files answered
  // here never have them (Create refuses those modes), so nothing to clear.
  if ((at.mode & (S_ISUID | S_ISGID)) != 0 && (a.valid & (kSetUid | kSetGid))) return false;
  const client::Timespec now = NowTs();
  if (a.valid & kSetMode) at.mode = a.mode & 07777;
  if (a.valid & kKillSuidGid) at.mode = ModeAfterKillPriv(at.mode, root, InGroup(c, at.gid));
  if (a.valid & kSetUid) at.uid = a.uid;
  if (a.valid & kSetGid) at.gid = a.gid;
  if (a.valid & kSetAtimeNow)
    at.atime = now;
  else if (a.valid & kSetAtime)
    at.atime = a.atime;
  if (a.valid & kSetMtimeNow)
    at.mtime = now;
  else if (a.valid & kSetMtime)
    at.mtime = a.mtime;
  at.ctime = now;
  // A directory created here that has a lease of its own too: its lease's
  // attributes (DirAttr) are the same directory's.
  if (Dir* own = HeldLocked(ino); own != nullptr && &own->attr != &at) {
    own->attr.mode = at.mode;
    own->attr.uid = at.uid;
    own->attr.gid = at.gid;
    own->attr.atime = at.atime;
    own->attr.mtime = at.mtime;
    own->attr.ctime = at.ctime;
  }
  CommitOp op;
  op.kind = CommitOp::kSetAttr;
  op.handle = ino;
  op.setattr = a;
  // "now" resolved here, so the server stores what this mount answered.
  if (a.valid & kSetAtimeNow) {
    op.setattr.valid = (op.setattr.valid & ~kSetAtimeNow) | kSetAtime;
    op.setattr.atime = at.atime;
  }
  if (a.valid & kSetMtimeNow) {
    op.setattr.valid = (op.setattr.valid & ~kSetMtimeNow) | kSetMtime;
    op.setattr.mtime = at.mtime;
  }
  op.caller = c;
  if (out != nullptr) *out = at;
  // tar sets times, owner and mode one call after another: when this file's
  // latest queued change is a setattr of the same caller not yet sent, this
  // one joins it (the server applies both at once, as in sequence).
  if (queue_.MergeSetAttr(ino, op)) return true;
  const bool start = queue_.Enqueue(std::move(op), ServerOf(ino), {ino});
  l.unlock();
  if (start) queue_.Kick();
  return true;
}

void AsyncNs::SetWriteSender(WriteSender s) { wb_.SetSender(std::move(s)); }

AsyncNs::WriteMode AsyncNs::Behind(Handle ino, const Layout& layout, uint64_t offset,
                                   std::string* data, BehindScope scope) {
  if (!enabled_) return WriteMode::kSync;
  WriteBehind::Sends sends;
  WriteBehind::Mode mode;
  {
    // Under mu_: a lease recalled now (OnRecall marks it before its Flush)
    // either sees this write's run or this write sees the recall.
    std::lock_guard<std::mutex> l(mu_);
    bool eligible = scope == BehindScope::kAnyFile;
    if (scope == BehindScope::kBornOnly) {
      auto b = born_.find(ino);
      eligible = b != born_.end() && HeldLocked(b->second.dir) != nullptr;
    }
    mode = wb_.Offer(ino, layout, offset, data, eligible && !shutdown_, &sends);
  }
  wb_.SendAll(std::move(sends));
  switch (mode) {
    case WriteBehind::Mode::kBehind: return WriteMode::kBehind;
    case WriteBehind::Mode::kWaitFirst: return WriteMode::kWaitFirst;
    case WriteBehind::Mode::kSync: break;
  }
  return WriteMode::kSync;
}

uint64_t AsyncNs::BehindEnd(Handle ino) {
  if (!enabled_) return 0;
  return wb_.End(ino);
}

void AsyncNs::EndWrite(Handle ino, uint64_t offset, uint64_t bytes, const Status& s) {
  // A size report of `ino` waiting for its data may go once none is in flight.
  if (wb_.EndWrite(ino, offset, bytes, s)) queue_.DataLanded();
}

bool AsyncNs::AfterWrites(Handle ino, std::function<void()> then) {
  if (!enabled_) return false;
  return wb_.AfterWrites(ino, std::move(then));
}

bool AsyncNs::NameQueued(Handle dir, const std::string& name) {
  if (!enabled_) return false;
  return queue_.NameQueued(dir, name) || queue_.AttrsQueued(dir);
}

bool AsyncNs::Unsettled(Handle h) {
  if (!enabled_ || h == 0) return false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (born_.count(h) != 0) return true;
  }
  // In the order a change moves: write-behind bytes land before their size
  // report is queued, so a file between the two is seen by one question.
  return wb_.Has(h) || queue_.Touches(h);
}

bool AsyncNs::After(std::initializer_list<Handle> handles, std::function<void()> then) {
  if (!enabled_) return false;
  return queue_.WaitIf(
      [&](const PendingIndex& p) {
        for (Handle h : handles) {
          if (h != 0 && p.Touches(h)) return true;
        }
        return false;
      },
      std::move(then));
}

bool AsyncNs::AfterAttrs(Handle h, std::function<void()> then) {
  if (!enabled_ || h == 0) return false;
  return queue_.WaitIf([&](const PendingIndex& p) { return p.AttrsQueued(h); }, std::move(then));
}

bool AsyncNs::AfterBesidesUnlinks(Handle h, std::function<void()> then) {
  if (!enabled_ || h == 0) return false;
  return queue_.WaitIf([&](const PendingIndex& p) { return p.TouchesBesidesUnlinks(h); },
                       std::move(then));
}

bool AsyncNs::AfterCreate(Handle h, std::function<void()> then) {
  if (!enabled_ || h == 0) return false;
  return queue_.WaitIf([&](const PendingIndex& p) { return p.CreateQueued(h); }, std::move(then));
}

bool AsyncNs::NlinkChangedSince(Handle h, std::chrono::steady_clock::time_point t) {
  if (!enabled_) return false;
  return queue_.NlinkChangedSince(h, t);
}

bool AsyncNs::AttrsChangedSince(Handle h, std::chrono::steady_clock::time_point t) {
  if (!enabled_) return false;
  return queue_.AttrsChangedSince(h, t);
}

void AsyncNs::Flush(std::function<void()> then) {
  // Write-behind first (a size report may follow them in the queue), then the queue.
  wb_.FlushAll([this, then = std::move(then)]() mutable { queue_.Flush(std::move(then)); });
}

Status AsyncNs::TakeError(Handle ino) {
  if (!enabled_) return Status::Ok();
  Status written = wb_.TakeError(ino);
  Status committed = queue_.TakeError(ino);
  return committed.ok() ? written : committed;
}

void AsyncNs::OnRecall(ServerId /*s*/, std::vector<Handle> dirs) {
  {
    std::lock_guard<std::mutex> l(mu_);
    const Clock::time_point now = Clock::now();
    for (Handle h : dirs) {
      auto it = dirs_.find(h);
      if (it != dirs_.end()) it->second.recalled = true;
      recalled_at_[h] = now;
    }
  }
  for (Handle h : dirs) {
    CLF_LOG_DEBUG("lease on {:#x} recalled", h);
    Flush([this, h] {
      bool release = true;
      {
        std::lock_guard<std::mutex> l(mu_);
        auto it = dirs_.find(h);
        if (it != dirs_.end() && it->second.state == Dir::kAcquiring) {
          release = false;  // the grant's arrival gives it back (recalled is set)
        } else if (it != dirs_.end() && it->second.recalled) {
          DropBornLocked(it->second);
          dirs_.erase(it);
        }
        if (release) BeginCall();
      }
      if (release) servers_->ReleaseDirLease(h, [this](Status) { EndCall(); });
    });
  }
}

void AsyncNs::OnServerLost(ServerId s) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [h, d] : dirs_) {
    if (ServerOf(h) == s && d.state == Dir::kHeld) d.recalled = true;
  }
}

void AsyncNs::Sweep(Clock::time_point now, const std::set<ServerId>& lost) {
  std::lock_guard<std::mutex> l(mu_);
  if (shutdown_) return;
  for (auto it = recalled_at_.begin(); it != recalled_at_.end();) {
    it = now > it->second + kListAfterRecall ? recalled_at_.erase(it) : std::next(it);
  }
  for (auto it = sibling_of_.begin(); it != sibling_of_.end();) {
    it = dirs_.count(it->second.first) == 0 ? sibling_of_.erase(it) : std::next(it);
  }
  // Leases that ran out long ago (nothing queued for them): forgotten, with
  // the attributes kept for their files, so memory follows what is in use.
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    Dir& d = it->second;
    if (d.state != Dir::kAcquiring && d.waiting.empty() && !d.recalled &&
        now > std::max(d.valid_until, d.retry_after) + std::chrono::seconds(10) &&
        !queue_.Touches(it->first)) {
      DropBornLocked(d);
      it = dirs_.erase(it);
    } else {
      ++it;
    }
  }
  if (lost.empty()) return;
  // Directories whose server failed are forgotten once nothing is queued for them.
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (it->second.recalled && lost.count(ServerOf(it->first)) && !queue_.Touches(it->first)) {
      it = dirs_.erase(it);
    } else {
      ++it;
    }
  }
}

void AsyncNs::Shutdown() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_) return;
  }
  // Commit what is queued.
  std::promise<void> flushed;
  Flush([&flushed] { flushed.set_value(); });
  flushed.get_future().wait();
  {
    std::lock_guard<std::mutex> l(mu_);
    shutdown_ = true;
  }
  const std::set<ServerId> servers = poller_->watched();
  poller_->Stop();
  wb_.Stop();
  queue_.Stop();
  // Give every lease back; each server answers the session's poll.
  for (ServerId s : servers) {
    std::promise<void> done;
    servers_->EndLeaseSession(s, [&done](Status) { done.set_value(); });
    done.get_future().wait();
  }
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return calls_ == 0; });
}

uint64_t AsyncNs::committed() const {
  return queue_.committed();
}

uint64_t AsyncNs::leases_granted() const {
  std::lock_guard<std::mutex> l(mu_);
  return granted_;
}

}  // namespace clf::fuse
