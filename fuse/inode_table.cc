#include "fuse/inode_table.h"

#include <algorithm>
#include <utility>

namespace clf::fuse {

InodeTable::InodeTable() {
  // The root is pinned: the kernel never looks it up and never forgets it.
  Shard& s = ShardOf(kRootHandle);
  s.map[kRootHandle].nlookup = 1;
}

void InodeTable::Absorb(const client::Attr& attr, Entry* e) {
  if (attr.type == client::FileType::kRegular) {
    e->layout = attr.layout;
    e->has_layout = true;
  }
  e->known_size = std::max(e->known_size, attr.size);
  if (!e->cache_set) {
    e->cache_set = true;
    e->cache_size = attr.size;
    e->cache_mtime = attr.mtime;
  }
  e->is_dir = attr.type == client::FileType::kDirectory;
  e->nlink = attr.nlink;
  e->gone = false;
  e->has_xattrs = attr.has_xattrs;
  e->attr_seen = Clock::now();
  e->mode = attr.mode & 07777;
  e->uid = attr.uid;
  e->gid = attr.gid;
}

void InodeTable::AddUnreported(uint64_t end, Entry* e) {
  e->unreported_end = e->unreported ? std::max(e->unreported_end, end) : end;
  e->unreported = true;
}

bool InodeTable::Dead(uint64_t ino, const Entry& e) {
  return ino != kRootHandle && e.nlookup == 0 && e.open == 0;
}

void InodeTable::Ref(const client::Attr& attr) {
  Shard& s = ShardOf(attr.handle);
  std::lock_guard lock(s.mu);
  Entry& e = s.map[attr.handle];
  ++e.nlookup;
  Absorb(attr, &e);
}

bool InodeTable::RefKnown(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end()) return false;
  ++it->second.nlookup;
  return true;
}

void InodeTable::Unref(uint64_t ino, uint64_t n) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end()) return;
  Entry& e = it->second;
  e.nlookup = n >= e.nlookup ? 0 : e.nlookup - n;
  if (Dead(ino, e)) s.map.erase(it);
}

void InodeTable::Update(const client::Attr& attr) {
  Shard& s = ShardOf(attr.handle);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(attr.handle);
  if (it != s.map.end()) {
    Absorb(attr, &it->second);
  } else if (attr.handle == kRootHandle) {
    // The kernel never looks the root up (no Ref): kept from its getattr.
    Absorb(attr, &s.map[attr.handle]);
  }
}

std::optional<InodeTable::FileInfo> InodeTable::Open(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || !it->second.has_layout) return std::nullopt;
  ++it->second.open;
  open_total_.fetch_add(1, std::memory_order_acq_rel);
  return FileInfo{it->second.layout, it->second.known_size};
}

InodeTable::FileInfo InodeTable::OpenWithAttr(const client::Attr& attr) {
  Shard& s = ShardOf(attr.handle);
  std::lock_guard lock(s.mu);
  Entry& e = s.map[attr.handle];
  Absorb(attr, &e);
  e.layout = attr.layout;
  e.has_layout = true;
  ++e.open;
  open_total_.fetch_add(1, std::memory_order_acq_rel);
  return FileInfo{e.layout, e.known_size};
}

bool InodeTable::Release(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || it->second.open == 0) return false;
  Entry& e = it->second;
  --e.open;
  open_total_.fetch_sub(1, std::memory_order_acq_rel);
  bool destroy = false;
  if (e.open == 0 && e.orphaned) {
    e.orphaned = false;
    destroy = true;
  }
  if (Dead(ino, e)) s.map.erase(it);
  return destroy;
}

bool InodeTable::MarkOrphanIfOpen(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || it->second.open == 0) return false;
  it->second.orphaned = true;
  return true;
}

void InodeTable::NoteUnlinked(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || it->second.is_dir) return;
  Entry& e = it->second;
  if (e.nlink > 1) {
    --e.nlink;
  } else if (e.open == 0 && !e.orphaned) {
    e.nlink = 0;
    e.gone = true;
  }
}

bool InodeTable::Gone(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  return it != s.map.end() && it->second.gone;
}

bool InodeTable::IsOpen(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  return it != s.map.end() && it->second.open > 0;
}

std::optional<InodeTable::FileInfo> InodeTable::GetFile(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || !it->second.has_layout) return std::nullopt;
  return FileInfo{it->second.layout, it->second.known_size};
}

void InodeTable::NoteWriteEnd(uint64_t ino, uint64_t end) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end()) return;
  Entry& e = it->second;
  e.known_size = std::max(e.known_size, end);
  AddUnreported(end, &e);
  e.needs_refresh = true;
}

bool InodeTable::ChangedElsewhere(const client::Attr& fresh) {
  Shard& s = ShardOf(fresh.handle);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(fresh.handle);
  if (it == s.map.end()) return false;
  Entry& e = it->second;
  const bool changed =
      e.cache_set && (e.cache_size != fresh.size || e.cache_mtime.sec != fresh.mtime.sec ||
                      e.cache_mtime.nsec != fresh.mtime.nsec);
  Absorb(fresh, &e);
  e.cache_size = fresh.size;
  e.cache_mtime = fresh.mtime;
  if (changed && !e.unreported) e.known_size = fresh.size;
  return changed;
}

uint64_t InodeTable::ChangesSent(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  return it == s.map.end() ? 0 : it->second.changes_sent;
}

void InodeTable::NoteChangeSent(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it != s.map.end()) ++it->second.changes_sent;
}

void InodeTable::NoteOwnChangeSince(const client::Attr& attr, uint64_t sent) {
  Shard& s = ShardOf(attr.handle);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(attr.handle);
  if (it == s.map.end() || it->second.changes_sent != sent) return;
  Absorb(attr, &it->second);
  it->second.cache_set = true;
}

void InodeTable::NoteOwnChange(const client::Attr& attr) {
  Shard& s = ShardOf(attr.handle);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(attr.handle);
  if (it == s.map.end()) return;
  Absorb(attr, &it->second);
  it->second.cache_set = true;
  it->second.cache_size = attr.size;
  it->second.cache_mtime = attr.mtime;
}

std::optional<uint64_t> InodeTable::TakeUnreported(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || !it->second.unreported) return std::nullopt;
  Entry& e = it->second;
  e.unreported = false;
  ++e.reporting;
  e.reporting_end = std::max(e.reporting_end, e.unreported_end);
  return e.unreported_end;
}

bool InodeTable::HasUnreported(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  return it != s.map.end() && it->second.unreported;
}

std::vector<std::function<void()>> InodeTable::EndReport(Entry* e) {
  if (e->reporting > 0 && --e->reporting == 0) {
    e->reporting_end = 0;
    return std::exchange(e->after_reports, {});
  }
  return {};
}

namespace {
void RunAll(std::vector<std::function<void()>> fns) {
  for (auto& f : fns) f();
}
}  // namespace

void InodeTable::ReportDone(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(s.mu);
    auto it = s.map.find(ino);
    if (it != s.map.end()) run = EndReport(&it->second);
  }
  RunAll(std::move(run));
}

std::optional<InodeTable::TruncateTicket> InodeTable::BeginTruncate(
    uint64_t ino, std::function<void()> retry) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  TruncateTicket t;
  auto it = s.map.find(ino);
  if (it == s.map.end()) return t;  // nothing of this mount's to order against
  Entry& e = it->second;
  if (e.reporting > 0) {
    e.after_reports.push_back(std::move(retry));
    return std::nullopt;
  }
  t.counted = true;
  ++e.reporting;
  if (e.unreported) {
    e.unreported = false;
    e.reporting_end = std::max(e.reporting_end, e.unreported_end);
    t.taken = e.unreported_end;
  }
  return t;
}

void InodeTable::TruncateDone(uint64_t ino, const TruncateTicket& t,
                              std::optional<uint64_t> size) {
  if (!t.counted) return;
  Shard& s = ShardOf(ino);
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(s.mu);
    auto it = s.map.find(ino);
    if (it == s.map.end()) return;
    Entry& e = it->second;
    if (size) e.known_size = *size;
    if (t.taken && !size) AddUnreported(*t.taken, &e);  // the truncate failed: report it later
    run = EndReport(&e);
  }
  RunAll(std::move(run));
}

uint64_t InodeTable::SizeFloor(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end()) return 0;
  const Entry& e = it->second;
  return std::max(e.unreported ? e.unreported_end : 0, e.reporting_end);
}

void InodeTable::RestoreUnreported(uint64_t ino, uint64_t end) {
  Shard& s = ShardOf(ino);
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(s.mu);
    auto it = s.map.find(ino);
    if (it == s.map.end()) return;
    AddUnreported(end, &it->second);
    run = EndReport(&it->second);
  }
  RunAll(std::move(run));
}

bool InodeTable::TakeNeedsRefresh(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || !it->second.needs_refresh) return false;
  it->second.needs_refresh = false;
  return true;
}

bool InodeTable::CapabilityKnownAbsent(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  return it != s.map.end() && it->second.cap_absent_until > Clock::now();
}

void InodeTable::SetCapabilityAbsent(uint64_t ino, Clock::time_point until) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it != s.map.end()) it->second.cap_absent_until = until;
}

void InodeTable::ClearCapabilityAbsent(uint64_t ino) { SetCapabilityAbsent(ino, {}); }

bool InodeTable::NoXattrsKnown(uint64_t ino, Clock::duration horizon) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  const Clock::time_point now = Clock::now();
  return it != s.map.end() && !it->second.has_xattrs && now - it->second.attr_seen < horizon &&
         (it->second.xattr_set == Clock::time_point{} || now - it->second.xattr_set >= horizon);
}

std::optional<InodeTable::Perm> InodeTable::GetPerm(uint64_t ino) const {
  const Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it == s.map.end() || it->second.attr_seen == Clock::time_point{}) return std::nullopt;
  const Entry& e = it->second;
  return Perm{e.mode, e.uid, e.gid, e.is_dir, e.nlink, e.attr_seen};
}

void InodeTable::NoteXattrSet(uint64_t ino) {
  Shard& s = ShardOf(ino);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(ino);
  if (it != s.map.end()) {
    it->second.has_xattrs = true;
    it->second.xattr_set = Clock::now();
  }
}

size_t InodeTable::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.map.size();
  }
  return n;
}

}  // namespace clf::fuse
