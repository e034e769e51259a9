// FsckClient: what `clf fsck` needs from every server: paged scans of the
// metadata (directory entries, inodes, orphan and garbage records) and data
// objects each server stores, and the conditional repairs (Admin.FsckScan /
// Admin.FsckRepair). Scans need any credential; repairs the server role (the
// peer secret or a server certificate: ClientOptions.secret_file / tls_cert).
//
// Thread safety: all methods may be called from any thread; each call blocks
// (it is for tools, not the data path).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "common/handle.h"
#include "common/layout.h"
#include "common/status.h"

namespace clf::client {

struct FsckEntry {
  Handle parent = 0;  // the directory holding the entry (on the scanned server)
  std::string name;
  Handle handle = 0;  // what it names (metadata on ServerOf(handle))
  FileType type = FileType::kUnknown;
};

struct FsckInode {
  Handle handle = 0;
  FileType type = FileType::kUnknown;
  uint32_t nlink = 0;
  uint64_t size = 0;
  uint64_t blocks = 0;   // 512-byte blocks recorded as allocated over the data objects
  uint32_t writers = 0;  // opens for writing not yet reported
  Layout layout;
  // Replicated files: the copies M records stale, as (primary, slot)
  // (common/object_ref.h); the servers' resync brings them current.
  std::vector<std::pair<ServerId, uint32_t>> stale;
};

// A cross-server rename a server has not settled yet (docs/ARCHITECTURE.md, rename).
struct FsckRename {
  uint64_t id = 0;         // the intent id (its source server in the top bits)
  bool link_drop = false;  // false: an intent on its source server; true: a replaced file's
                           // link drop still to apply, on the destination server
  Handle handle = 0;       // the renamed file, or (link drop) the replaced file
  FileType type = FileType::kUnknown;
  Handle src_parent = 0, dst_parent = 0;  // intent
  std::string src_name, dst_name;         // intent
  bool in_flight = false;  // intent: its Rename call is still running
};

class FsckClient {
 public:
  static Result<std::unique_ptr<FsckClient>> Open(const ClusterConfig& cluster,
                                                  const ClientOptions& opts = {});
  virtual ~FsckClient() = default;

  virtual uint32_t servers() const = 0;
  // Everything of one kind server `s` stores, fetched page by page (page_size
  // items per call, 1..16384).
  virtual Result<std::vector<FsckEntry>> Entries(ServerId s) = 0;
  virtual Result<std::vector<FsckInode>> Inodes(ServerId s) = 0;
  virtual Result<std::vector<Handle>> Orphans(ServerId s) = 0;
  virtual Result<std::vector<Handle>> Garbage(ServerId s) = 0;
  virtual Result<std::vector<Handle>> DataObjects(ServerId s) = 0;
  virtual Result<std::vector<FsckRename>> Renames(ServerId s) = 0;
  virtual void set_page_size(uint32_t n) = 0;

  // Repairs, each applied only if the state it names still holds (kStale
  // otherwise). Entries go to ServerOf(parent), the others to ServerOf(handle).
  virtual Status RemoveEntry(Handle parent, const std::string& name, Handle handle) = 0;
  virtual Status AddEntry(Handle parent, const std::string& name, Handle handle, FileType t) = 0;
  virtual Status SetNlink(Handle h, uint32_t nlink, uint32_t expect_nlink) = 0;
  virtual Status DropOrphan(Handle h) = 0;
  virtual Status ClearBlocks(Handle h, uint64_t expect_blocks) = 0;
  virtual Status RemoveDataObject(ServerId s, Handle h) = 0;
  // Settles a pending rename on server `s` as its background settler would:
  // intent `id` on its source server, or the link drop recorded under `id` on
  // the destination. kStale: not pending (any more); kBusy: its Rename call
  // still runs; kUnavailable: the other server did not answer.
  virtual Status SettleRename(ServerId s, uint64_t id) = 0;

  // Replicated files' copies. ReadCopy: `length` bytes at `offset` of copy
  // `slot` of server `primary`'s units of h (the packed object on
  // ReplicaServer(primary, slot, n); zeros past its end); kNotCurrent when
  // the file's metadata server has that copy stale. Any credential.
  virtual Status ReadCopy(Handle h, uint32_t replicas, ServerId primary, uint32_t slot,
                          uint64_t offset, uint64_t length, std::string* out) = 0;
  // Records the copy stale on the file's metadata server (Peer.Replicas), so
  // the servers' resync rewrites it from the acting primary; kUnavailable if
  // it is the last current copy of those units. Server role.
  virtual Status MarkCopyStale(Handle h, ServerId primary, uint32_t slot) = 0;
};

}  // namespace clf::client
