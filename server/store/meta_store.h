// RocksMetaStore: every RocksDB type of clfd lives behind this class.
//
// Key space (handles big-endian so a prefix scan is in handle order):
//   'a' + handle            -> v1::Attr (serialized)
//   'e' + parent + name     -> child handle (8 bytes) + file type (1 byte)
//   'l' + handle            -> symlink target
//   'x' + handle + name     -> xattr value
//   'o' + handle            -> "" : unlinked file kept until Destroy (orphan)
//   'g' + handle            -> v1::Layout : data objects still to remove (a removal collective failed)
//   'D' + handle            -> "" : a replicated file with stale copies (its attributes'
//                              stale_replicas is not empty): the resync's work list
//   'S' + server id         -> "" : that server has announced a data store (Peer.AnnounceStore)
//   'U' + handle + slot     -> "" : this server's copy in that slot of a replicated file may
//                              hold writes not yet on its disk (WriteIntents; slot one byte)
// The cross-server rename intent protocol (docs/ARCHITECTURE.md, rename):
//   'R' + intent id         -> v1::RenameIntent : source side, outcome at the destination unknown
//   'P' + intent id         -> v1::RenameOutcome : destination side, applied or aborted
//   'K' + intent id         -> v1::PendingLinkDrop : destination side, replaced file's nlink -1 to do
//   'J' + op id             -> "" : a link adjustment with this op id was applied here
//   'Q'                     -> 8 bytes: intent ids below this value may have been used
//   'W' + source server id  -> 8 bytes: destination side, every intent id of that
//                              server below this value is settled there ('P' records
//                              below it deleted; an InsertEntry carrying one is refused)
// Thread safety: all methods are thread safe; atomicity across keys comes only
// from Commit(Batch). Callers serialize read-modify-write sequences with their
// own locks (MetaOps holds per-handle locks).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "clf/v1/common.pb.h"
#include "common/handle.h"
#include "common/status.h"

namespace rocksdb {
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace clf::server {

struct EntryValue {
  Handle handle = 0;
  v1::FileType type = v1::FT_UNKNOWN;
};

struct ListedEntry {
  std::string name;
  EntryValue value;
};

// An entry with its directory, as the fsck scan pages through them.
struct ScannedEntry {
  Handle parent = 0;
  std::string name;
  EntryValue value;
};

class RocksMetaStore {
 public:
  class Batch {
   public:
    Batch();
    ~Batch();
    void PutAttr(const v1::Attr& a);
    void DeleteAttr(Handle h);
    void PutEntry(Handle parent, std::string_view name, const EntryValue& v);
    void DeleteEntry(Handle parent, std::string_view name);
    void PutSymlink(Handle h, std::string_view target);
    void DeleteSymlink(Handle h);
    void PutOrphan(Handle h);
    void DeleteOrphan(Handle h);
    void PutGarbage(Handle h, const v1::Layout& l);
    void DeleteGarbage(Handle h);
    void PutDegraded(Handle h);
    void DeleteDegraded(Handle h);
    void PutStoreSeen(ServerId server);
    void PutUnsynced(Handle h, uint32_t slot);
    void DeleteUnsynced(Handle h, uint32_t slot);
    void PutXattr(Handle h, std::string_view name, std::string_view value);
    void DeleteXattr(Handle h, std::string_view name);
    // Values are serialized protobuf messages (see the key space above).
    void PutRenameIntent(uint64_t id, std::string_view value);
    void DeleteRenameIntent(uint64_t id);
    void PutRenameOutcome(uint64_t id, std::string_view value);
    void DeleteRenameOutcome(uint64_t id);
    void PutRenameWatermark(ServerId source, uint64_t settled_below);
    void PutLinkDrop(uint64_t id, std::string_view value);
    void DeleteLinkDrop(uint64_t id);
    void PutAppliedOp(uint64_t op_id);
    void PutIntentHighWater(uint64_t next);
    // Handle counters up to `limit` may have been handed out (MetaOps).
    void PutHandleHighWater(uint64_t limit);

   private:
    friend class RocksMetaStore;
    std::unique_ptr<rocksdb::WriteBatch> wb_;
  };

  // Opens (creating if missing) the database in `path`. sync: fsync the WAL on every commit.
  static Result<std::unique_ptr<RocksMetaStore>> Open(const std::string& path, bool sync);
  ~RocksMetaStore();

  // Acknowledged only once written to the WAL (and synced if `sync` was set).
  Status Commit(Batch& b);
  // The same, and the WAL synced before it returns, whatever `sync` was.
  Status CommitSynced(Batch& b);

  Result<v1::Attr> GetAttr(Handle h) const;
  Result<EntryValue> GetEntry(Handle parent, std::string_view name) const;
  Result<std::string> GetSymlink(Handle h) const;
  // Entries of `parent` with name > after, in name order; *eof set when no more follow.
  Result<std::vector<ListedEntry>> ListEntries(Handle parent, std::string_view after, size_t max,
                                               bool* eof) const;
  Result<bool> HasEntries(Handle parent) const;
  Result<std::string> GetXattr(Handle h, std::string_view name) const;
  Result<std::vector<std::string>> ListXattrs(Handle h) const;
  Result<bool> IsOrphan(Handle h) const;

  // Highest counter of a handle of `server` in use (0 if none).
  uint64_t MaxCounter(ServerId server) const;
  // Every handle with an attribute record (metadata objects), orphans, garbage.
  std::vector<Handle> AllAttrHandles() const;
  std::vector<Handle> Orphans() const;
  std::vector<std::pair<Handle, v1::Layout>> Garbage() const;
  std::vector<Handle> Degraded() const;
  bool StoreSeen(ServerId server) const;
  // The 'U' records: (handle, slot) in key order.
  std::vector<std::pair<Handle, uint32_t>> Unsynced() const;
  // Paged scans for fsck: at most `max` records with a key after the given
  // one, in key order; *eof set when no more follow.
  Result<std::vector<ScannedEntry>> ScanEntries(Handle after_parent, std::string_view after_name,
                                                size_t max, bool* eof) const;
  Result<std::vector<v1::Attr>> ScanAttrs(Handle after, size_t max, bool* eof) const;
  Result<std::vector<Handle>> ScanOrphans(Handle after, size_t max, bool* eof) const;
  Result<std::vector<Handle>> ScanGarbage(Handle after, size_t max, bool* eof) const;
  // The rename intent protocol's records; NotFound when missing.
  Result<std::string> GetRenameOutcome(uint64_t id) const;
  Result<bool> HasAppliedOp(uint64_t op_id) const;
  uint64_t IntentHighWater() const;  // 0 if never set
  uint64_t HandleHighWater() const;  // 0 if never set
  uint64_t RenameWatermark(ServerId source) const;  // 0 if never set
  // Ids of the outcome records of `source`'s intents below `below`, in order.
  std::vector<uint64_t> RenameOutcomeIds(ServerId source, uint64_t below) const;
  size_t RenameOutcomeCount() const;
  // Every record of the family, (id, value) in id order.
  std::vector<std::pair<uint64_t, std::string>> RenameIntents() const;
  std::vector<std::pair<uint64_t, std::string>> LinkDrops() const;
  uint64_t ApproximateBytes() const;
  Status SyncWal();

 private:
  RocksMetaStore() = default;
  std::unique_ptr<rocksdb::DB> db_;
  bool sync_ = false;
};

}  // namespace clf::server
