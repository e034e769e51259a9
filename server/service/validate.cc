#include "server/service/validate.h"

#include <set>
#include <string>

#include "common/config.h"
#include "common/layout.h"
#include "server/ops/data_ops.h"
#include "server/ops/ops_internal.h"

namespace clf::server {
namespace {

constexpr uint32_t kNsecPerSec = 1000000000u;

std::string Hex(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%#llx", static_cast<unsigned long long>(h));
  return buf;
}

// A handle some server of this cluster could have issued.
Status CheckHandle(Handle h, const ClusterView& v, const char* what) {
  if (h == 0) return Status(Code::kStale, std::string(what) + ": handle 0 names no file");
  if (ServerOf(h) >= v.servers) {
    return Status(Code::kStale, std::string(what) + ": handle " + Hex(h) + " names server " +
                                    std::to_string(ServerOf(h)) + ", not in this cluster of " +
                                    std::to_string(v.servers));
  }
  return Status::Ok();
}

// A handle this server owns (a directory's entries, a file's metadata object).
Status CheckLocal(Handle h, const ClusterView& v, const char* what) {
  CLF_RETURN_IF_ERROR(CheckHandle(h, v, what));
  if (ServerOf(h) != v.self) {
    return Status(Code::kStale, std::string(what) + ": handle " + Hex(h) + " belongs to server " +
                                    std::to_string(ServerOf(h)) + ", not to server " +
                                    std::to_string(v.self));
  }
  return Status::Ok();
}

Status CheckCaller(const v1::Caller& c) {
  if (c.groups_size() > kMaxCallerGroups) {
    return Invalid("caller has " + std::to_string(c.groups_size()) + " groups; at most " +
                   std::to_string(kMaxCallerGroups));
  }
  return Status::Ok();
}

Status CheckMode(uint32_t mode) {
  if (mode & ~uint32_t{07777}) return Invalid("mode has bits outside 07777");
  return Status::Ok();
}

Status CheckType(v1::FileType t) {
  if (t <= v1::FT_UNKNOWN || t > v1::FT_BLOCK) return Invalid("bad file type " + std::to_string(t));
  return Status::Ok();
}

Status CheckTime(const v1::Timespec& t, const char* what) {
  if (t.nsec() >= kNsecPerSec) return Invalid(std::string(what) + ": nanoseconds >= 10^9");
  return Status::Ok();
}

Status CheckNamed(const std::string& name, const char* what) {
  Status s = ValidateName(name);
  if (!s.ok()) return s.WithContext(what);
  return Status::Ok();
}

Status CheckXattrName(const std::string& name) {
  if (name.empty()) return Invalid("empty xattr name");
  if (name.size() > kMaxXattrNameBytes)
    return Status(Code::kRange, "xattr name longer than 255 bytes");
  if (name.find('\0') != std::string::npos) return Invalid("xattr name contains NUL");
  return Status::Ok();
}


// Extents of a data request: count, range, total size.
Status CheckExtents(const google::protobuf::RepeatedPtrField<v1::Extent>& in, uint64_t* total) {
  if (in.size() > static_cast<int>(kMaxExtents)) {
    return Status(Code::kTooBig, "more than " + std::to_string(kMaxExtents) + " extents");
  }
  *total = 0;
  for (const v1::Extent& e : in) {
    if (e.offset() > kMaxFileSize || e.length() > kMaxFileSize - e.offset()) {
      return Status(Code::kFileTooBig, "extent past the maximum file size (2^60)");
    }
    *total += e.length();
    if (*total > kMaxIoBytes) return Status(Code::kTooBig, "request larger than 64 MiB");
  }
  return Status::Ok();
}

}  // namespace

bool SecretMatches(std::string_view presented, std::string_view expected) {
  // Every byte of `expected` is compared whatever `presented` holds.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= p ^ static_cast<unsigned char>(expected[i]);
  }
  // Keep the compiler from turning the loop into an early-exit compare.
  volatile unsigned char result = diff;
  return result == 0;
}

// ---------------------------------------------------------------- Meta

Status Validate(const v1::LookupRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.parent(), v, "lookup: directory"));
  CLF_RETURN_IF_ERROR(CheckNamed(r.name(), "lookup"));
  return CheckCaller(r.caller());
}

Status Validate(const v1::GetAttrRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "getattr"));
  return CheckCaller(r.caller());
}

Status Validate(const v1::SetAttrRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "setattr"));
  CLF_RETURN_IF_ERROR(CheckCaller(r.caller()));
  const uint32_t valid = r.valid();
  if (valid & ~kSetAttrKnownBits) return Invalid("setattr: unknown bits in valid");
  if (valid & 1) CLF_RETURN_IF_ERROR(CheckMode(r.mode()));
  if ((valid & 8) && r.size() > kMaxFileSize) {
    return Status(Code::kFileTooBig, "setattr: size past the maximum file size (2^60)");
  }
  if (valid & 16) CLF_RETURN_IF_ERROR(CheckTime(r.atime(), "setattr atime"));
  if (valid & 32) CLF_RETURN_IF_ERROR(CheckTime(r.mtime(), "setattr mtime"));
  if ((valid & 16) && (valid & 64)) return Invalid("setattr: atime both given and now");
  if ((valid & 32) && (valid & 128)) return Invalid("setattr: mtime both given and now");
  if (valid & 256) {
    Layout l = FromProto(r.layout());
    // stripe_count 0 means "all servers", as in the cluster file.
    if (l.stripe_count == 0) l.stripe_count = v.servers;
    if (l.first_server != 0) {
      return Invalid(
          "setattr: a directory layout's first_server must be 0 (each file's is chosen by hash)");
    }
    if (l.replicas == 0) return Invalid("setattr: replicas must be at least 1");
    Status s = ValidateLayout(l, v.servers);
    if (!s.ok()) return s.WithContext("setattr layout");
  }
  return Status::Ok();
}

Status Validate(const v1::CreateRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.parent(), v, "create: directory"));
  CLF_RETURN_IF_ERROR(CheckNamed(r.name(), "create"));
  CLF_RETURN_IF_ERROR(CheckCaller(r.caller()));
  CLF_RETURN_IF_ERROR(CheckType(r.type()));
  CLF_RETURN_IF_ERROR(CheckMode(r.mode()));
  if (r.umask() & ~uint32_t{07777}) return Invalid("create: umask has bits outside 07777");
  if (r.rdev() != 0 && r.type() != v1::FT_CHAR && r.type() != v1::FT_BLOCK) {
    return Invalid("create: rdev is only for device files");
  }
  if (r.type() == v1::FT_SYMLINK) {
    const std::string& t = r.symlink_target();
    if (t.empty() || t.size() > kMaxSymlinkBytes || t.find('\0') != std::string::npos) {
      return Invalid("create: symlink target must be 1..4095 bytes without NUL");
    }
  } else if (!r.symlink_target().empty()) {
    return Invalid("create: a symlink target on a file that is not a symlink");
  }
  if (r.handle() != 0 || r.has_time()) {
    return Invalid("create: a preassigned handle or time is only valid inside Meta.Commit");
  }
  return Status::Ok();
}

Status Validate(const v1::DirLeaseRequest& r, const ClusterView& v) {
  if (r.op() != v1::DirLeaseRequest::END_SESSION) {
    CLF_RETURN_IF_ERROR(CheckLocal(r.dir(), v, "dir lease: directory"));
  }
  if (r.op() < v1::DirLeaseRequest::ACQUIRE || r.op() > v1::DirLeaseRequest::END_SESSION) {
    return Invalid("dir lease: unknown op");
  }
  if (r.handles_wanted() > 65536) return Invalid("dir lease: at most 65536 handles at once");
  return CheckCaller(r.caller());
}

Status Validate(const v1::CommitRequest& r, const ClusterView& v) {
  if (r.ops_size() == 0) return Invalid("commit: no ops");
  if (r.ops_size() > 4096) return Invalid("commit: at most 4096 ops");
  for (const v1::CommitOp& op : r.ops()) {
    switch (op.op_case()) {
      case v1::CommitOp::kCreate: {
        v1::CreateRequest c = op.create();
        if (c.handle() == 0 || (c.type() != v1::FT_REGULAR && c.type() != v1::FT_SYMLINK)) {
          return Invalid(
              "commit: a create needs a preassigned handle and a regular file or symbolic link");
        }
        if (ServerOf(c.handle()) != v.self) return Invalid("commit: handle not of this server");
        c.clear_handle();
        c.clear_time();
        CLF_RETURN_IF_ERROR(Validate(c, v));
        break;
      }
      case v1::CommitOp::kRemove:
        CLF_RETURN_IF_ERROR(Validate(op.remove(), v));
        break;
      case v1::CommitOp::kLink:
        CLF_RETURN_IF_ERROR(Validate(op.link(), v));
        break;
      case v1::CommitOp::kSync:
        break;
      case v1::CommitOp::kRename:
        CLF_RETURN_IF_ERROR(Validate(op.rename(), v));
        if (op.rename().keep_orphan()) return Invalid("commit: a rename replaces nothing");
        break;
      case v1::CommitOp::kSetattr:
        CLF_RETURN_IF_ERROR(Validate(op.setattr(), v));
        break;
      case v1::CommitOp::kReport:
        CLF_RETURN_IF_ERROR(Validate(op.report(), v));
        break;
      default:
        return Invalid("commit: empty op");
    }
  }
  return Status::Ok();
}

Status Validate(const v1::LinkRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle(), v, "link: file"));
  CLF_RETURN_IF_ERROR(CheckLocal(r.new_parent(), v, "link: directory"));
  CLF_RETURN_IF_ERROR(CheckNamed(r.new_name(), "link"));
  return CheckCaller(r.caller());
}

Status Validate(const v1::RemoveRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.parent(), v, "remove: directory"));
  CLF_RETURN_IF_ERROR(CheckNamed(r.name(), "remove"));
  return CheckCaller(r.caller());
}

Status Validate(const v1::RenameRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.src_parent(), v, "rename: source directory"));
  CLF_RETURN_IF_ERROR(CheckHandle(r.dst_parent(), v, "rename: destination directory"));
  CLF_RETURN_IF_ERROR(CheckNamed(r.src_name(), "rename source"));
  CLF_RETURN_IF_ERROR(CheckNamed(r.dst_name(), "rename destination"));
  CLF_RETURN_IF_ERROR(CheckCaller(r.caller()));
  constexpr uint32_t kRenameBits = v1::RENAME_FLAG_NOREPLACE | v1::RENAME_FLAG_EXCHANGE;
  if (r.flags() & ~kRenameBits) return Invalid("rename: unknown flags");
  if (r.flags() == kRenameBits) return Invalid("rename: RENAME_NOREPLACE with RENAME_EXCHANGE");
  return Status::Ok();
}

Status Validate(const v1::ReadDirRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "readdir"));
  CLF_RETURN_IF_ERROR(CheckCaller(r.caller()));
  if (r.after().size() > kMaxNameBytes)
    return Status(Code::kNameTooLong, "readdir: resume name too long");
  return Status::Ok();
}

Status Validate(const v1::DestroyRequest& r, const ClusterView& v) {
  return CheckLocal(r.handle(), v, "destroy");
}

Status Validate(const v1::ReportWriteRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "report write"));
  CLF_RETURN_IF_ERROR(CheckCaller(r.caller()));
  if (r.writers_delta() < -1 || r.writers_delta() > 1) {
    return Invalid("report write: writers_delta must be -1, 0 or 1");
  }
  if (r.size() > kMaxFileSize) {
    return Status(Code::kFileTooBig, "report write: size past the maximum file size (2^60)");
  }
  return Status::Ok();
}

Status Validate(const v1::XattrRequest& r, XattrCall call, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "xattr"));
  CLF_RETURN_IF_ERROR(CheckCaller(r.caller()));
  if (call == XattrCall::kList) {
    if (!r.name().empty()) return Invalid("listxattr: a name was given");
  } else {
    CLF_RETURN_IF_ERROR(CheckXattrName(r.name()));
  }
  if (call == XattrCall::kSet) {
    constexpr uint32_t kXattrBits = v1::XATTR_FLAG_CREATE | v1::XATTR_FLAG_REPLACE;
    if (r.flags() & ~kXattrBits) return Invalid("setxattr: unknown flags");
    if (r.flags() == kXattrBits) return Invalid("setxattr: XATTR_CREATE with XATTR_REPLACE");
    if (r.value().size() > kMaxXattrValueBytes)
      return Status(Code::kTooBig, "xattr value larger than 64 KiB");
  } else {
    if (r.flags() != 0) return Invalid("xattr: flags are only for setxattr");
    if (!r.value().empty()) return Invalid("xattr: a value is only for setxattr");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- Data

// A data request's copy (replicated files): slots in range, no more copies
// than kMaxReplicas or than the cluster's servers.
static Status CheckCopy(const v1::ObjectCopy& c, const ClusterView& v, const char* what) {
  ObjectRef o;
  Status st = DataOps::ObjectOf(0, c, &o);
  if (!st.ok()) return st.WithContext(what);
  if (o.replicas > v.servers) {
    return Invalid(std::string(what) + ": " + std::to_string(o.replicas) + " copies in a cluster of " +
                   std::to_string(v.servers) + " servers");
  }
  return Status::Ok();
}

Status Validate(const v1::WriteRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle(), v, "write"));
  CLF_RETURN_IF_ERROR(CheckCopy(r.copy(), v, "write"));
  uint64_t total = 0;
  CLF_RETURN_IF_ERROR(CheckExtents(r.extents(), &total));
  if (total != r.payload().size()) {
    return Invalid("write: payload is " + std::to_string(r.payload().size()) +
                   " bytes, the extents cover " + std::to_string(total));
  }
  return Status::Ok();
}

Status Validate(const v1::ReadRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle(), v, "read"));
  CLF_RETURN_IF_ERROR(CheckCopy(r.copy(), v, "read"));
  uint64_t total = 0;
  return CheckExtents(r.extents(), &total);
}

Status Validate(const v1::SyncRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle(), v, "sync"));
  return CheckCopy(r.copy(), v, "sync");
}

// ---------------------------------------------------------------- Peer

Status Validate(const v1::CollectiveRequest& r, const ClusterView& v) {
  if (r.op() < v1::COLL_CREATE || r.op() > v1::COLL_TRUNCATE) {
    return Invalid("collective: unknown op " + std::to_string(r.op()));
  }
  if (r.server_count() != v.servers) {
    return Invalid("collective: sent for a cluster of " + std::to_string(r.server_count()) +
                   " servers to one of " + std::to_string(v.servers));
  }
  if (r.targets_size() == 0 || r.targets(0) != v.self) {
    return Invalid("collective: the first target must be the receiver");
  }
  if (static_cast<uint32_t>(r.targets_size()) > v.servers)
    return Invalid("collective: more targets than servers");
  std::set<uint32_t> seen;
  for (uint32_t t : r.targets()) {
    if (t >= v.servers)
      return Invalid("collective: target " + std::to_string(t) + " is not a server");
    if (!seen.insert(t).second)
      return Invalid("collective: target " + std::to_string(t) + " twice");
  }
  if (r.files_size() > kMaxCollectiveFiles)
    return Status(Code::kTooBig, "collective: too many files");
  if (r.budget_ms() > kMaxCollectiveBudgetMs) return Invalid("collective: budget past one hour");
  for (const v1::CollFile& f : r.files()) {
    CLF_RETURN_IF_ERROR(CheckHandle(f.handle(), v, "collective file"));
    Status s = ValidateLayout(FromProto(f.layout()), v.servers);
    if (!s.ok()) return s.WithContext("collective file " + Hex(f.handle()));
    if (f.size() > kMaxFileSize) return Status(Code::kFileTooBig, "collective: size past 2^60");
  }
  return Status::Ok();
}

Status Validate(const v1::MakeDirRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckHandle(r.parent(), v, "makedir: parent"));
  const v1::Attr& a = r.attr();
  if (a.handle() != 0) return Invalid("makedir: the handle is chosen by the receiver");
  if (a.type() != v1::FT_DIRECTORY) return Invalid("makedir: not a directory");
  CLF_RETURN_IF_ERROR(CheckMode(a.mode()));
  return Status::Ok();
}

Status Validate(const v1::RemoveDirRequest& r, const ClusterView& v) {
  return CheckLocal(r.handle(), v, "removedir");
}

Status Validate(const v1::AdjustLinkRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "adjustlink"));
  if (r.delta() != 1 && r.delta() != -1) return Invalid("adjustlink: delta must be +1 or -1");
  if (r.op_id() != 0 && ServerOf(r.op_id()) >= v.servers) {
    return Invalid("adjustlink: op id names no server of this cluster");
  }
  return Status::Ok();
}

Status Validate(const v1::GetAttrsRequest& r, const ClusterView& v) {
  if (r.handles_size() > kMaxGetAttrsHandles)
    return Status(Code::kTooBig, "getattrs: too many handles");
  return Status::Ok();
}

Status Validate(const v1::InsertEntryRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.parent(), v, "insertentry: directory"));
  CLF_RETURN_IF_ERROR(CheckNamed(r.name(), "insertentry"));
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle(), v, "insertentry: file"));
  CLF_RETURN_IF_ERROR(CheckType(r.type()));
  if (r.flags() & ~1u) return Invalid("insertentry: unknown flags");
  // An intent id names the source server that recorded it (a handle-shaped id).
  if (r.intent_id() != 0 && ServerOf(r.intent_id()) >= v.servers) {
    return Invalid("insertentry: intent id names no server of this cluster");
  }
  return CheckCaller(r.caller());
}

Status Validate(const v1::ResolveRenameRequest& r, const ClusterView& v) {
  if (r.intent_id() == 0) return Invalid("resolverename: intent id 0");
  if (ServerOf(r.intent_id()) >= v.servers || ServerOf(r.intent_id()) == v.self) {
    return Invalid("resolverename: intent id names no other server of this cluster");
  }
  return Status::Ok();
}

Status Validate(const v1::ForgetRenamesRequest& r, const ClusterView& v) {
  // The sender's own intent ids: handle-shaped, naming another server than the receiver.
  if (ServerOf(r.settled_below()) >= v.servers || ServerOf(r.settled_below()) == v.self) {
    return Invalid("forgetrenames: the mark names no other server of this cluster");
  }
  if ((r.settled_below() & kCounterMask) == 0) return Invalid("forgetrenames: mark 0");
  return Status::Ok();
}

Status Validate(const v1::ReplicasRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "replicas: file"));
  if (!v1::ReplicasOp_IsValid(r.op())) return Invalid("replicas: unknown op");
  if (r.op() == v1::REPLICAS_GET) return Status::Ok();
  if (!r.has_copy()) return Invalid("replicas: a mark names no copy");
  if (r.copy().primary() >= v.servers) return Invalid("replicas: the copy's server is not in the cluster");
  if (r.copy().slot() >= kMaxReplicas) return Invalid("replicas: copy slot out of range");
  return Status::Ok();
}

Status Validate(const v1::ReplicasChangedRequest& r, const ClusterView& v) {
  return CheckHandle(r.handle(), v, "replicaschanged");
}

Status Validate(const v1::AnnounceStoreRequest& r, const ClusterView& v) {
  if (r.server() >= v.servers || r.server() == v.self) {
    return Invalid("announcestore: names no other server of this cluster");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- Baseline

Status Validate(const v1::ReserveRequest& r, const ClusterView& v) {
  CLF_RETURN_IF_ERROR(CheckLocal(r.parent(), v, "reserve: directory"));
  return CheckCaller(r.caller());
}

Status ValidateBaselineCreate(const v1::CreateRequest& r, const ClusterView& v) {
  if (r.type() != v1::FT_REGULAR) return Invalid("baseline create: only regular files");
  CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "baseline create: reserved handle"));
  if (r.has_time()) return Invalid("baseline create: a preassigned time is only valid inside Meta.Commit");
  v1::CreateRequest plain = r;
  plain.set_handle(0);
  return Validate(plain, v);
}

Status Validate(const v1::ObjectRequest& r, const ClusterView& v) {
  if (!r.has_cap()) return Invalid("object request without a capability");
  const v1::Capability& c = r.cap();
  CLF_RETURN_IF_ERROR(CheckHandle(c.handle(), v, "object capability"));
  if (c.op() != v1::CAP_CREATE && c.op() != v1::CAP_REMOVE) {
    return Invalid("object capability: unknown op " + std::to_string(c.op()));
  }
  if (c.mac().size() != 32) return Invalid("object capability: the signature must be 32 bytes");
  return Status::Ok();
}

Status Validate(const v1::StatObjectRequest& r, const ClusterView& v) {
  return CheckHandle(r.handle(), v, "statobject");
}

// ---------------------------------------------------------------- Admin

Status Validate(const v1::StatusRequest&, const ClusterView&) { return Status::Ok(); }
Status Validate(const v1::ListObjectsRequest&, const ClusterView&) { return Status::Ok(); }

Status Validate(const v1::RemoveObjectRequest& r, const ClusterView& v) {
  return CheckHandle(r.handle(), v, "removeobject");
}

Status Validate(const v1::FsckScanRequest& r, const ClusterView&) {
  if (r.kind() <= v1::FSCK_SCAN_NONE || r.kind() > v1::FSCK_SCAN_RENAMES) {
    return Invalid("fsckscan: unknown kind " + std::to_string(r.kind()));
  }
  if (r.max() == 0 || r.max() > kMaxFsckPage) {
    return Invalid("fsckscan: max must be 1.." + std::to_string(kMaxFsckPage));
  }
  // The cursor is a position, not a file: any handle, but names and folders in range.
  if (r.after().name().size() > kMaxNameBytes) {
    return Status(Code::kNameTooLong, "fsckscan: cursor name longer than 255 bytes");
  }
  if (r.kind() != v1::FSCK_SCAN_ENTRIES && !r.after().name().empty()) {
    return Invalid("fsckscan: a cursor name only pages entries");
  }
  if (r.after().folder() >= 256) return Invalid("fsckscan: cursor folder must be 0..255");
  if (r.kind() != v1::FSCK_SCAN_DATA && r.after().folder() != 0) {
    return Invalid("fsckscan: a cursor folder only pages data objects");
  }
  return Status::Ok();
}

Status Validate(const v1::FsckRepairRequest& r, const ClusterView& v) {
  switch (r.op()) {
    case v1::FSCK_REPAIR_REMOVE_ENTRY:
      CLF_RETURN_IF_ERROR(CheckLocal(r.parent(), v, "fsckrepair"));
      CLF_RETURN_IF_ERROR(CheckNamed(r.name(), "fsckrepair"));
      return CheckHandle(r.handle(), v, "fsckrepair");
    case v1::FSCK_REPAIR_ADD_ENTRY:
      CLF_RETURN_IF_ERROR(CheckLocal(r.parent(), v, "fsckrepair"));
      CLF_RETURN_IF_ERROR(CheckNamed(r.name(), "fsckrepair"));
      CLF_RETURN_IF_ERROR(CheckHandle(r.handle(), v, "fsckrepair"));
      if (r.handle() == kRootHandle) return Invalid("fsckrepair: the root cannot be linked");
      return CheckType(r.type());
    case v1::FSCK_REPAIR_SET_NLINK:
      CLF_RETURN_IF_ERROR(CheckLocal(r.handle(), v, "fsckrepair"));
      if (r.nlink() == 0) return Invalid("fsckrepair: nlink 0 is never set by a repair");
      return Status::Ok();
    case v1::FSCK_REPAIR_DROP_ORPHAN:
    case v1::FSCK_REPAIR_CLEAR_BLOCKS:
      return CheckLocal(r.handle(), v, "fsckrepair");
    case v1::FSCK_REPAIR_SETTLE_RENAME:
      // An intent id (handle-shaped: its source server); not found here is kStale.
      if (r.handle() == 0 || ServerOf(r.handle()) >= v.servers) {
        return Invalid("fsckrepair: the intent id names no server of this cluster");
      }
      return Status::Ok();
    default:
      return Invalid("fsckrepair: unknown op " + std::to_string(r.op()));
  }
}

}  // namespace clf::server
