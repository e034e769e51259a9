#include "server/ops/fsck_ops.h"

#include <algorithm>
#include <mutex>
#include <string>

namespace clf::server {
namespace {

std::string Hex(Handle h) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Status Changed(const std::string& what) {
  return Status(Code::kStale, "fsck: " + what + " changed since the scan; not repaired");
}

// Scan's pages, one per kind: fill *out from after `r.after()`, at most `max`
// records, *eof false and out->next set when more follow.

Status ScanEntryPage(RocksMetaStore* store, const v1::FsckScanRequest& r, size_t max,
                     v1::FsckScanReply* out, bool* eof) {
  CLF_ASSIGN_OR_RETURN(std::vector<ScannedEntry> es,
                       store->ScanEntries(r.after().handle(), r.after().name(), max, eof));
  for (ScannedEntry& e : es) {
    v1::FsckEntry* o = out->add_entries();
    o->set_parent(e.parent);
    o->set_name(std::move(e.name));
    o->set_handle(e.value.handle);
    o->set_type(e.value.type);
  }
  if (!*eof && !es.empty()) {
    out->mutable_next()->set_handle(out->entries().rbegin()->parent());
    out->mutable_next()->set_name(out->entries().rbegin()->name());
  }
  return Status::Ok();
}

Status ScanInodePage(RocksMetaStore* store, const v1::FsckScanRequest& r, size_t max,
                     v1::FsckScanReply* out, bool* eof) {
  CLF_ASSIGN_OR_RETURN(std::vector<v1::Attr> as, store->ScanAttrs(r.after().handle(), max, eof));
  for (v1::Attr& a : as) *out->add_inodes() = std::move(a);
  if (!*eof && !as.empty()) out->mutable_next()->set_handle(out->inodes().rbegin()->handle());
  return Status::Ok();
}

// Orphan or garbage records (handles).
Status ScanHandlePage(RocksMetaStore* store, const v1::FsckScanRequest& r, size_t max,
                      v1::FsckScanReply* out, bool* eof) {
  Result<std::vector<Handle>> hs = r.kind() == v1::FSCK_SCAN_ORPHANS
                                       ? store->ScanOrphans(r.after().handle(), max, eof)
                                       : store->ScanGarbage(r.after().handle(), max, eof);
  CLF_RETURN_IF_ERROR(hs.status());
  for (Handle h : *hs) out->add_handles(h);
  if (!*eof && !hs->empty()) out->mutable_next()->set_handle(hs->back());
  return Status::Ok();
}

void ScanDataPage(ObjectStore* objects, const v1::FsckScanRequest& r, size_t max,
                  v1::FsckScanReply* out, bool* eof) {
  // Whole folders where they fit; a folder larger than the page is cut by handle.
  uint32_t folder = r.after().folder();
  Handle after = r.after().handle();
  for (; folder < ObjectStore::kFolders; ++folder, after = 0) {
    std::vector<Handle> hs = objects->ListFolder(folder);
    auto it = std::upper_bound(hs.begin(), hs.end(), after);
    for (; it != hs.end() && static_cast<size_t>(out->handles_size()) < max; ++it) {
      out->add_handles(*it);
    }
    if (it != hs.end()) {  // page full inside this folder
      *eof = false;
      out->mutable_next()->set_folder(folder);
      out->mutable_next()->set_handle(*(it - 1));
      return;
    }
    if (static_cast<size_t>(out->handles_size()) >= max && folder + 1 < ObjectStore::kFolders) {
      *eof = false;
      out->mutable_next()->set_folder(folder + 1);
      return;
    }
  }
}

Status ScanRenamePage(MetaOps* meta, RocksMetaStore* store, const v1::FsckScanRequest& r,
                      size_t max, v1::FsckScanReply* out, bool* eof) {
  // Few (pending intents, link drops still to apply): one sorted list, paged by id.
  std::vector<v1::FsckRename> all;
  for (auto& [in, in_flight] : meta->PendingRenames()) {
    v1::FsckRename f;
    f.set_id(in.id());
    f.set_handle(in.handle());
    f.set_type(in.type());
    f.set_src_parent(in.src_parent());
    f.set_src_name(in.src_name());
    f.set_dst_parent(in.dst_parent());
    f.set_dst_name(in.dst_name());
    f.set_in_flight(in_flight);
    all.push_back(std::move(f));
  }
  for (auto& [id, value] : store->LinkDrops()) {
    v1::PendingLinkDrop d;
    if (!d.ParseFromString(value)) return Internal("corrupt pending link drop record");
    v1::FsckRename f;
    f.set_id(id);
    f.set_link_drop(true);
    f.set_handle(d.handle());
    all.push_back(std::move(f));
  }
  std::sort(all.begin(), all.end(),
            [](const v1::FsckRename& a, const v1::FsckRename& b) { return a.id() < b.id(); });
  for (v1::FsckRename& f : all) {
    if (f.id() <= r.after().handle()) continue;
    if (static_cast<size_t>(out->renames_size()) >= max) {
      *eof = false;
      out->mutable_next()->set_handle(out->renames().rbegin()->id());
      break;
    }
    *out->add_renames() = std::move(f);
  }
  return Status::Ok();
}

}  // namespace

Result<v1::FsckScanReply> FsckOps::Scan(const v1::FsckScanRequest& r) const {
  v1::FsckScanReply out;
  const size_t max = r.max();
  bool eof = true;
  switch (r.kind()) {
    case v1::FSCK_SCAN_ENTRIES:
      CLF_RETURN_IF_ERROR(ScanEntryPage(store_, r, max, &out, &eof));
      break;
    case v1::FSCK_SCAN_INODES:
      CLF_RETURN_IF_ERROR(ScanInodePage(store_, r, max, &out, &eof));
      break;
    case v1::FSCK_SCAN_ORPHANS:
    case v1::FSCK_SCAN_GARBAGE:
      CLF_RETURN_IF_ERROR(ScanHandlePage(store_, r, max, &out, &eof));
      break;
    case v1::FSCK_SCAN_DATA:
      ScanDataPage(objects_, r, max, &out, &eof);
      break;
    case v1::FSCK_SCAN_RENAMES:
      CLF_RETURN_IF_ERROR(ScanRenamePage(meta_, store_, r, max, &out, &eof));
      break;
    default:
      return Invalid("fsck: unknown scan kind");
  }
  out.set_done(eof);
  return out;
}

Status FsckOps::Repair(const v1::FsckRepairRequest& r) {
  switch (r.op()) {
    case v1::FSCK_REPAIR_REMOVE_ENTRY: return RemoveEntry(r);
    case v1::FSCK_REPAIR_ADD_ENTRY: return AddEntry(r);
    case v1::FSCK_REPAIR_SET_NLINK: return SetNlink(r);
    case v1::FSCK_REPAIR_DROP_ORPHAN: return DropOrphan(r);
    case v1::FSCK_REPAIR_CLEAR_BLOCKS: return ClearBlocks(r);
    case v1::FSCK_REPAIR_SETTLE_RENAME: return meta_->SettleRename(r.handle());
    default: return Invalid("fsck: unknown repair");
  }
}

Status FsckOps::RemoveEntry(const v1::FsckRepairRequest& r) {
  std::lock_guard<std::recursive_mutex> dl(meta_->locks().Dir(r.parent()));
  Result<EntryValue> e = store_->GetEntry(r.parent(), r.name());
  if (!e.ok()) return e.status().code() == Code::kNotFound ? Changed("entry " + r.name()) : e.status();
  if (e->handle != r.handle()) return Changed("entry " + r.name());
  RocksMetaStore::Batch b;
  b.DeleteEntry(r.parent(), r.name());
  return store_->Commit(b);
}

Status FsckOps::AddEntry(const v1::FsckRepairRequest& r) {
  std::lock_guard<std::recursive_mutex> dl(meta_->locks().Dir(r.parent()));
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, store_->GetAttr(r.parent()));
  if (dir.type() != v1::FT_DIRECTORY) return Status(Code::kNotDir, "fsck: not a directory");
  if (dir.nlink() == 0) return NotFound("fsck: directory was removed");
  Result<EntryValue> e = store_->GetEntry(r.parent(), r.name());
  if (e.ok()) return Exists("fsck: " + r.name() + " exists");
  if (e.status().code() != Code::kNotFound) return e.status();
  RocksMetaStore::Batch b;
  b.PutEntry(r.parent(), r.name(), EntryValue{r.handle(), r.type()});
  return store_->Commit(b);
}

Status FsckOps::SetNlink(const v1::FsckRepairRequest& r) {
  const Handle h = r.handle();
  std::lock_guard<std::recursive_mutex> dl(meta_->locks().Dir(h));  // a directory's nlink
  std::lock_guard<std::mutex> il(meta_->locks().Inode(h));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (a.nlink() != r.expect_nlink()) return Changed("link count of " + Hex(h));
  a.set_nlink(r.nlink());
  RocksMetaStore::Batch b;
  b.PutAttr(a);
  return store_->Commit(b);
}

Status FsckOps::DropOrphan(const v1::FsckRepairRequest& r) {
  const Handle h = r.handle();
  std::lock_guard<std::mutex> il(meta_->locks().Inode(h));
  CLF_ASSIGN_OR_RETURN(bool orphan, store_->IsOrphan(h));
  if (!orphan) return Changed("orphan record of " + Hex(h));
  Result<v1::Attr> a = store_->GetAttr(h);
  if (a.ok() && a->nlink() == 0) {
    return Invalid("fsck: " + Hex(h) + " is an unlinked open file awaiting Destroy; kept");
  }
  if (!a.ok() && a.status().code() != Code::kStale) return a.status();
  RocksMetaStore::Batch b;
  b.DeleteOrphan(h);
  return store_->Commit(b);
}

Status FsckOps::ClearBlocks(const v1::FsckRepairRequest& r) {
  const Handle h = r.handle();
  std::lock_guard<std::mutex> il(meta_->locks().Inode(h));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (a.type() != v1::FT_REGULAR) return Invalid("fsck: not a regular file");
  if (a.writers() != 0 || a.blocks() != r.expect_blocks()) return Changed("allocation of " + Hex(h));
  a.set_blocks(0);
  RocksMetaStore::Batch b;
  b.PutAttr(a);
  return store_->Commit(b);
}

}  // namespace clf::server
