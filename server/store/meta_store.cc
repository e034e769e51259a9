#include "server/store/meta_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/write_batch.h>

namespace clf::server {
namespace {

void AppendBE(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
uint64_t ReadBE(std::string_view s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}
std::string BE(uint64_t v) {
  std::string s;
  AppendBE(&s, v);
  return s;
}
// A counter record (8 bytes, big-endian); 0 when missing or malformed.
uint64_t GetCounter(rocksdb::DB* db, const std::string& key) {
  std::string v;
  if (!db->Get(rocksdb::ReadOptions(), key, &v).ok() || v.size() != 8) return 0;
  return ReadBE(v);
}
std::string Key(char tag, Handle h) {
  std::string k(1, tag);
  AppendBE(&k, h);
  return k;
}
std::string Key(char tag, Handle h, std::string_view name) {
  std::string k = Key(tag, h);
  k.append(name);
  return k;
}

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  if (s.IsNotFound()) return NotFound(std::string(what));
  if (s.IsNoSpace()) return Status(Code::kNoSpace, std::string(what) + ": " + s.ToString());
  return IoError(std::string(what) + ": rocksdb: " + s.ToString());
}

}  // namespace

RocksMetaStore::Batch::Batch() : wb_(std::make_unique<rocksdb::WriteBatch>()) {}
RocksMetaStore::Batch::~Batch() = default;

void RocksMetaStore::Batch::PutAttr(const v1::Attr& a) {
  wb_->Put(Key('a', a.handle()), a.SerializeAsString()).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteAttr(Handle h) { wb_->Delete(Key('a', h)).PermitUncheckedError(); }
void RocksMetaStore::Batch::PutEntry(Handle parent, std::string_view name, const EntryValue& v) {
  std::string val;
  AppendBE(&val, v.handle);
  val.push_back(static_cast<char>(v.type));
  wb_->Put(Key('e', parent, name), val).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteEntry(Handle parent, std::string_view name) {
  wb_->Delete(Key('e', parent, name)).PermitUncheckedError();
}
void RocksMetaStore::Batch::PutSymlink(Handle h, std::string_view target) {
  wb_->Put(Key('l', h), rocksdb::Slice(target.data(), target.size())).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteSymlink(Handle h) { wb_->Delete(Key('l', h)).PermitUncheckedError(); }
void RocksMetaStore::Batch::PutOrphan(Handle h) { wb_->Put(Key('o', h), "").PermitUncheckedError(); }
void RocksMetaStore::Batch::DeleteOrphan(Handle h) { wb_->Delete(Key('o', h)).PermitUncheckedError(); }
void RocksMetaStore::Batch::PutGarbage(Handle h, const v1::Layout& l) {
  wb_->Put(Key('g', h), l.SerializeAsString()).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteGarbage(Handle h) { wb_->Delete(Key('g', h)).PermitUncheckedError(); }
void RocksMetaStore::Batch::PutDegraded(Handle h) { wb_->Put(Key('D', h), "").PermitUncheckedError(); }
void RocksMetaStore::Batch::DeleteDegraded(Handle h) { wb_->Delete(Key('D', h)).PermitUncheckedError(); }
void RocksMetaStore::Batch::PutStoreSeen(ServerId server) {
  wb_->Put(Key('S', server), "").PermitUncheckedError();
}
void RocksMetaStore::Batch::PutUnsynced(Handle h, uint32_t slot) {
  wb_->Put(Key('U', h, std::string(1, static_cast<char>(slot))), "").PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteUnsynced(Handle h, uint32_t slot) {
  wb_->Delete(Key('U', h, std::string(1, static_cast<char>(slot)))).PermitUncheckedError();
}
void RocksMetaStore::Batch::PutXattr(Handle h, std::string_view name, std::string_view value) {
  wb_->Put(Key('x', h, name), rocksdb::Slice(value.data(), value.size())).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteXattr(Handle h, std::string_view name) {
  wb_->Delete(Key('x', h, name)).PermitUncheckedError();
}

void RocksMetaStore::Batch::PutRenameIntent(uint64_t id, std::string_view value) {
  wb_->Put(Key('R', id), rocksdb::Slice(value.data(), value.size())).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteRenameIntent(uint64_t id) {
  wb_->Delete(Key('R', id)).PermitUncheckedError();
}
void RocksMetaStore::Batch::PutRenameOutcome(uint64_t id, std::string_view value) {
  wb_->Put(Key('P', id), rocksdb::Slice(value.data(), value.size())).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteRenameOutcome(uint64_t id) {
  wb_->Delete(Key('P', id)).PermitUncheckedError();
}
void RocksMetaStore::Batch::PutRenameWatermark(ServerId source, uint64_t settled_below) {
  wb_->Put(Key('W', source), BE(settled_below)).PermitUncheckedError();
}
void RocksMetaStore::Batch::PutLinkDrop(uint64_t id, std::string_view value) {
  wb_->Put(Key('K', id), rocksdb::Slice(value.data(), value.size())).PermitUncheckedError();
}
void RocksMetaStore::Batch::DeleteLinkDrop(uint64_t id) {
  wb_->Delete(Key('K', id)).PermitUncheckedError();
}
void RocksMetaStore::Batch::PutAppliedOp(uint64_t op_id) {
  wb_->Put(Key('J', op_id), "").PermitUncheckedError();
}
void RocksMetaStore::Batch::PutIntentHighWater(uint64_t next) {
  wb_->Put("Q", BE(next)).PermitUncheckedError();
}
void RocksMetaStore::Batch::PutHandleHighWater(uint64_t limit) {
  wb_->Put("H", BE(limit)).PermitUncheckedError();
}

Result<std::unique_ptr<RocksMetaStore>> RocksMetaStore::Open(const std::string& path, bool sync) {
  rocksdb::Options opts;
  opts.create_if_missing = true;
  opts.IncreaseParallelism(2);
  opts.max_background_jobs = 2;
  opts.write_buffer_size = 32 << 20;
  rocksdb::BlockBasedTableOptions t;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.whole_key_filtering = false;  // prefix scans dominate
  opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, path, &db);
  if (!s.ok()) return FromRocks(s, "open metadata db " + path);
  auto store = std::unique_ptr<RocksMetaStore>(new RocksMetaStore());
  store->db_.reset(db);
  store->sync_ = sync;
  return store;
}

RocksMetaStore::~RocksMetaStore() {
  if (db_) db_->Close().PermitUncheckedError();
}

Status RocksMetaStore::Commit(Batch& b) {
  rocksdb::WriteOptions wo;
  wo.sync = sync_;
  return FromRocks(db_->Write(wo, b.wb_.get()), "commit");
}

Status RocksMetaStore::CommitSynced(Batch& b) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, b.wb_.get()), "commit");
}

Result<v1::Attr> RocksMetaStore::GetAttr(Handle h) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), Key('a', h), &v);
  if (s.IsNotFound()) return Status(Code::kStale, "no such file (handle " + std::to_string(h) + ")");
  CLF_RETURN_IF_ERROR(FromRocks(s, "get attr"));
  v1::Attr a;
  if (!a.ParseFromString(v)) return Internal("corrupt attribute record");
  return a;
}

Result<EntryValue> RocksMetaStore::GetEntry(Handle parent, std::string_view name) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), Key('e', parent, name), &v);
  if (s.IsNotFound()) return NotFound("no entry " + std::string(name));
  CLF_RETURN_IF_ERROR(FromRocks(s, "get entry"));
  if (v.size() != 9) return Internal("corrupt entry record");
  return EntryValue{ReadBE(v), static_cast<v1::FileType>(static_cast<uint8_t>(v[8]))};
}

Result<std::string> RocksMetaStore::GetSymlink(Handle h) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), Key('l', h), &v);
  CLF_RETURN_IF_ERROR(FromRocks(s, "symlink target"));
  return v;
}

Result<std::vector<ListedEntry>> RocksMetaStore::ListEntries(Handle parent, std::string_view after,
                                                             size_t max, bool* eof) const {
  std::vector<ListedEntry> out;
  const std::string prefix = Key('e', parent);
  const std::string upper = Key('e', parent + 1);
  rocksdb::ReadOptions ro;
  rocksdb::Slice ub(upper);
  ro.iterate_upper_bound = &ub;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  std::string start = prefix;
  start.append(after);
  it->Seek(start);
  if (!after.empty() && it->Valid() && it->key() == rocksdb::Slice(start)) it->Next();
  *eof = true;
  for (; it->Valid(); it->Next()) {
    if (out.size() >= max) {
      *eof = false;
      break;
    }
    rocksdb::Slice k = it->key();
    rocksdb::Slice v = it->value();
    if (v.size() != 9) return Internal("corrupt entry record");
    ListedEntry e;
    e.name.assign(k.data() + prefix.size(), k.size() - prefix.size());
    e.value.handle = ReadBE(std::string_view(v.data(), 8));
    e.value.type = static_cast<v1::FileType>(static_cast<uint8_t>(v.data()[8]));
    out.push_back(std::move(e));
  }
  CLF_RETURN_IF_ERROR(FromRocks(it->status(), "list entries"));
  return out;
}

Result<bool> RocksMetaStore::HasEntries(Handle parent) const {
  bool eof = false;
  CLF_ASSIGN_OR_RETURN(auto v, ListEntries(parent, "", 1, &eof));
  return !v.empty();
}

Result<std::string> RocksMetaStore::GetXattr(Handle h, std::string_view name) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), Key('x', h, name), &v);
  if (s.IsNotFound()) return Status(Code::kNoData, "no xattr " + std::string(name));
  CLF_RETURN_IF_ERROR(FromRocks(s, "get xattr"));
  return v;
}

Result<std::vector<std::string>> RocksMetaStore::ListXattrs(Handle h) const {
  std::vector<std::string> out;
  const std::string prefix = Key('x', h);
  const std::string upper = Key('x', h + 1);
  rocksdb::ReadOptions ro;
  rocksdb::Slice ub(upper);
  ro.iterate_upper_bound = &ub;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    out.emplace_back(it->key().data() + prefix.size(), it->key().size() - prefix.size());
  }
  CLF_RETURN_IF_ERROR(FromRocks(it->status(), "list xattrs"));
  return out;
}

Result<bool> RocksMetaStore::IsOrphan(Handle h) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), Key('o', h), &v);
  if (s.IsNotFound()) return false;
  CLF_RETURN_IF_ERROR(FromRocks(s, "orphan"));
  return true;
}

uint64_t RocksMetaStore::MaxCounter(ServerId server) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  it->SeekForPrev(Key('a', MakeHandle(server, kCounterMask)));
  if (!it->Valid()) return 0;
  rocksdb::Slice k = it->key();
  if (k.size() != 9 || k[0] != 'a') return 0;
  Handle h = ReadBE(std::string_view(k.data() + 1, 8));
  return ServerOf(h) == server ? (h & kCounterMask) : 0;
}

// Calls fn(key) for every record of `tag`, in key order.
template <typename F>
static void ScanTag(rocksdb::DB* db, char tag, F fn) {
  std::string lo(1, tag), hi(1, static_cast<char>(tag + 1));
  rocksdb::ReadOptions ro;
  rocksdb::Slice ub(hi);
  ro.iterate_upper_bound = &ub;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  for (it->Seek(lo); it->Valid(); it->Next()) fn(it->key());
}

static std::vector<Handle> ScanHandles(rocksdb::DB* db, char tag) {
  std::vector<Handle> out;
  ScanTag(db, tag, [&](const rocksdb::Slice& k) {
    if (k.size() >= 9) out.push_back(ReadBE(std::string_view(k.data() + 1, 8)));
  });
  return out;
}

std::vector<Handle> RocksMetaStore::AllAttrHandles() const { return ScanHandles(db_.get(), 'a'); }
std::vector<Handle> RocksMetaStore::Orphans() const { return ScanHandles(db_.get(), 'o'); }
std::vector<Handle> RocksMetaStore::Degraded() const { return ScanHandles(db_.get(), 'D'); }
bool RocksMetaStore::StoreSeen(ServerId server) const {
  std::string v;
  return db_->Get(rocksdb::ReadOptions(), Key('S', server), &v).ok();
}

std::vector<std::pair<Handle, uint32_t>> RocksMetaStore::Unsynced() const {
  std::vector<std::pair<Handle, uint32_t>> out;
  ScanTag(db_.get(), 'U', [&](const rocksdb::Slice& k) {
    if (k.size() == 10) {
      out.emplace_back(ReadBE(std::string_view(k.data() + 1, 8)), static_cast<uint8_t>(k[9]));
    }
  });
  return out;
}

std::vector<std::pair<Handle, v1::Layout>> RocksMetaStore::Garbage() const {
  std::vector<std::pair<Handle, v1::Layout>> out;
  for (Handle h : ScanHandles(db_.get(), 'g')) {
    std::string v;
    if (!db_->Get(rocksdb::ReadOptions(), Key('g', h), &v).ok()) continue;
    v1::Layout l;
    if (l.ParseFromString(v)) out.emplace_back(h, l);
  }
  return out;
}

namespace {

// Visits the records of `tag` with a key after tag + `after` (exclusive), in
// key order, until `fn` returns false (page full: *eof false) or they end.
template <typename Fn>
Status ScanAfter(rocksdb::DB* db, char tag, const std::string& after, bool* eof, Fn fn) {
  std::string hi(1, static_cast<char>(tag + 1));
  rocksdb::ReadOptions ro;
  rocksdb::Slice ub(hi);
  ro.iterate_upper_bound = &ub;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  std::string start(1, tag);
  start.append(after);
  it->Seek(start);
  if (it->Valid() && it->key() == rocksdb::Slice(start)) it->Next();
  *eof = true;
  for (; it->Valid(); it->Next()) {
    if (!fn(it->key(), it->value())) {
      *eof = false;
      break;
    }
  }
  return FromRocks(it->status(), "fsck scan");
}

}  // namespace

Result<std::vector<ScannedEntry>> RocksMetaStore::ScanEntries(Handle after_parent,
                                                              std::string_view after_name,
                                                              size_t max, bool* eof) const {
  std::vector<ScannedEntry> out;
  std::string after = BE(after_parent);
  after.append(after_name);
  bool corrupt = false;
  CLF_RETURN_IF_ERROR(ScanAfter(db_.get(), 'e', after, eof, [&](rocksdb::Slice k, rocksdb::Slice v) {
    if (out.size() >= max) return false;
    if (k.size() < 10 || v.size() != 9) {
      corrupt = true;
      return true;
    }
    ScannedEntry e;
    e.parent = ReadBE(std::string_view(k.data() + 1, 8));
    e.name.assign(k.data() + 9, k.size() - 9);
    e.value.handle = ReadBE(std::string_view(v.data(), 8));
    e.value.type = static_cast<v1::FileType>(static_cast<uint8_t>(v.data()[8]));
    out.push_back(std::move(e));
    return true;
  }));
  if (corrupt) return Internal("corrupt entry record");
  return out;
}

Result<std::vector<v1::Attr>> RocksMetaStore::ScanAttrs(Handle after, size_t max, bool* eof) const {
  std::vector<v1::Attr> out;
  bool corrupt = false;
  CLF_RETURN_IF_ERROR(ScanAfter(db_.get(), 'a', BE(after), eof, [&](rocksdb::Slice k, rocksdb::Slice v) {
    if (out.size() >= max) return false;
    v1::Attr a;
    if (k.size() != 9 || !a.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
      corrupt = true;
      return true;
    }
    out.push_back(std::move(a));
    return true;
  }));
  if (corrupt) return Internal("corrupt attribute record");
  return out;
}

static Result<std::vector<Handle>> ScanHandlePage(rocksdb::DB* db, char tag, Handle after,
                                                  size_t max, bool* eof) {
  std::vector<Handle> out;
  CLF_RETURN_IF_ERROR(ScanAfter(db, tag, BE(after), eof, [&](rocksdb::Slice k, rocksdb::Slice) {
    if (out.size() >= max) return false;
    if (k.size() >= 9) out.push_back(ReadBE(std::string_view(k.data() + 1, 8)));
    return true;
  }));
  return out;
}

Result<std::vector<Handle>> RocksMetaStore::ScanOrphans(Handle after, size_t max, bool* eof) const {
  return ScanHandlePage(db_.get(), 'o', after, max, eof);
}

Result<std::vector<Handle>> RocksMetaStore::ScanGarbage(Handle after, size_t max, bool* eof) const {
  return ScanHandlePage(db_.get(), 'g', after, max, eof);
}

Result<std::string> RocksMetaStore::GetRenameOutcome(uint64_t id) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), Key('P', id), &v);
  if (s.IsNotFound()) return NotFound("no rename outcome");
  CLF_RETURN_IF_ERROR(FromRocks(s, "get rename outcome"));
  return v;
}

Result<bool> RocksMetaStore::HasAppliedOp(uint64_t op_id) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), Key('J', op_id), &v);
  if (s.IsNotFound()) return false;
  CLF_RETURN_IF_ERROR(FromRocks(s, "get applied op"));
  return true;
}

uint64_t RocksMetaStore::IntentHighWater() const { return GetCounter(db_.get(), "Q"); }

uint64_t RocksMetaStore::HandleHighWater() const { return GetCounter(db_.get(), "H"); }

uint64_t RocksMetaStore::RenameWatermark(ServerId source) const {
  return GetCounter(db_.get(), Key('W', source));
}

std::vector<uint64_t> RocksMetaStore::RenameOutcomeIds(ServerId source, uint64_t below) const {
  std::vector<uint64_t> out;
  const uint64_t lo_id = MakeHandle(source, 0);
  if (below <= lo_id) return out;
  std::string lo = Key('P', lo_id), hi = Key('P', below);
  rocksdb::ReadOptions ro;
  rocksdb::Slice ub(hi);
  ro.iterate_upper_bound = &ub;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  for (it->Seek(lo); it->Valid(); it->Next()) {
    if (it->key().size() != 9) continue;
    out.push_back(ReadBE(std::string_view(it->key().data() + 1, 8)));
  }
  return out;
}

size_t RocksMetaStore::RenameOutcomeCount() const {
  size_t n = 0;
  std::string lo(1, 'P'), hi(1, 'Q');
  rocksdb::ReadOptions ro;
  rocksdb::Slice ub(hi);
  ro.iterate_upper_bound = &ub;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  for (it->Seek(lo); it->Valid(); it->Next()) ++n;
  return n;
}

static std::vector<std::pair<uint64_t, std::string>> ScanRecords(rocksdb::DB* db, char tag) {
  std::vector<std::pair<uint64_t, std::string>> out;
  std::string lo(1, tag), hi(1, static_cast<char>(tag + 1));
  rocksdb::ReadOptions ro;
  rocksdb::Slice ub(hi);
  ro.iterate_upper_bound = &ub;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  for (it->Seek(lo); it->Valid(); it->Next()) {
    if (it->key().size() != 9) continue;
    out.emplace_back(ReadBE(std::string_view(it->key().data() + 1, 8)), it->value().ToString());
  }
  return out;
}

std::vector<std::pair<uint64_t, std::string>> RocksMetaStore::RenameIntents() const {
  return ScanRecords(db_.get(), 'R');
}
std::vector<std::pair<uint64_t, std::string>> RocksMetaStore::LinkDrops() const {
  return ScanRecords(db_.get(), 'K');
}

uint64_t RocksMetaStore::ApproximateBytes() const {
  uint64_t sst = 0, mem = 0;
  db_->GetIntProperty("rocksdb.total-sst-files-size", &sst);
  db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &mem);
  return sst + mem;
}

Status RocksMetaStore::SyncWal() { return FromRocks(db_->SyncWAL(), "sync wal"); }

}  // namespace clf::server
