#include "common/layout.h"
#include "common/log.h"
#include "server/ops/capability.h"
#include "server/ops/client_mode_ops.h"
#include "server/ops/meta_ops.h"
#include "server/ops/ops_internal.h"
#include "server/ops/permissions.h"

namespace clf::server {

// ---- ClientModeOps ----

Status ClientModeOps::CheckMode() const {
  if (cluster_.metadata_mode != MetadataMode::kClient) {
    return Status(Code::kNotSupported,
                  std::string("client-driven metadata calls need metadata_mode = \"client\"; this "
                              "cluster runs \"") +
                      MetadataModeName(cluster_.metadata_mode) + "\"");
  }
  return Status::Ok();
}

v1::Capability ClientModeOps::Sign(Handle h, v1::CapOp op) const {
  v1::Capability c;
  c.set_handle(h);
  c.set_op(op);
  c.set_expires_ms(static_cast<uint64_t>(NowMs()) + capability_ttl_ms());
  c.set_mac(CapabilityMac(cap_key_, h, op, c.expires_ms()));
  return c;
}

Result<v1::ReserveReply> ClientModeOps::Reserve(const v1::ReserveRequest& r) {
  CLF_RETURN_IF_ERROR(CheckMode());
  if (cap_key_.empty()) return Internal("no capability key");
  CLF_ASSIGN_OR_RETURN(MetaOps::Reserved res, meta_->ReserveForCreate(r));
  v1::ReserveReply rep;
  rep.set_handle(res.handle);
  *rep.mutable_layout() = ToProto(res.layout);
  *rep.mutable_create() = Sign(res.handle, v1::CAP_CREATE);
  *rep.mutable_undo() = Sign(res.handle, v1::CAP_REMOVE);
  return rep;
}

Result<v1::Attr> ClientModeOps::Create(const v1::CreateRequest& r, v1::Attr* parent_out) {
  CLF_RETURN_IF_ERROR(CheckMode());
  if (r.type() != v1::FT_REGULAR || r.handle() == 0) {
    return Invalid("a client-mode create names a regular file and its reserved handle");
  }
  return meta_->Create(r, parent_out);
}

Result<v1::UnlinkReply> ClientModeOps::Unlink(const v1::RemoveRequest& r) {
  CLF_RETURN_IF_ERROR(CheckMode());
  if (cap_key_.empty()) return Internal("no capability key");
  CLF_RETURN_IF_ERROR(ValidateName(r.name()));
  v1::UnlinkReply out;
  CLF_ASSIGN_OR_RETURN(std::optional<MetaOps::Unlinked> here, meta_->UnlinkHere(r));
  if (!here) {
    // Directories, hard links to files of other servers, open files: the usual path.
    CLF_ASSIGN_OR_RETURN(*out.mutable_remove(), meta_->Remove(r));
    return out;
  }
  if (here->file_gone) {
    out.set_destroyed(true);
    *out.mutable_layout() = here->layout;
    *out.mutable_cap() = Sign(here->remove.handle(), v1::CAP_REMOVE);
  }
  *out.mutable_remove() = std::move(here->remove);
  return out;
}

Status ClientModeOps::Object(const v1::ObjectRequest& r, v1::CapOp op) {
  CLF_RETURN_IF_ERROR(CheckMode());
  CLF_RETURN_IF_ERROR(CheckCapability(cap_key_, r.cap(), op, static_cast<uint64_t>(NowMs())));
  if (op == v1::CAP_CREATE) return objects_->Create(r.cap().handle());
  if (op == v1::CAP_REMOVE) return objects_->Remove(r.cap().handle());
  return Invalid("unknown object operation");
}

Result<v1::ObjectReply> ClientModeOps::StatObject(Handle h) {
  CLF_RETURN_IF_ERROR(CheckMode());
  CLF_ASSIGN_OR_RETURN(ObjectSize sz, objects_->Size(h));
  v1::ObjectReply rep;
  rep.set_size(sz.size);
  rep.set_blocks(sz.blocks);
  return rep;
}

// ---- MetaOps' steps of it ----

Result<MetaOps::Reserved> MetaOps::ReserveForCreate(const v1::ReserveRequest& r) {
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.parent()));
  if (dir.nlink() == 0) return NotFound("directory was removed");
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kW | kX));
  CLF_ASSIGN_OR_RETURN(const Handle h, ReserveHandles(1));
  // The layout Create will give this handle in this directory (see Create).
  Layout l = cluster_.default_layout;
  if (dir.has_layout() && dir.layout().stripe_count() > 0) l = FromProto(dir.layout());
  l.first_server = FirstServerFor(h, n());
  return Reserved{h, l};
}

Result<std::optional<MetaOps::Unlinked>> MetaOps::UnlinkHere(const v1::RemoveRequest& r) {
  std::unique_lock<std::recursive_mutex> dl(DirLock(r.parent()));
  CLF_RETURN_IF_ERROR(SettlePendingFor({{r.parent(), r.name()}}, {&dl}));  // rename_intent.cc
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kW | kX));
  CLF_ASSIGN_OR_RETURN(EntryValue e, store_->GetEntry(r.parent(), r.name()));
  if (r.directory() || e.type == v1::FT_DIRECTORY || ServerOf(e.handle) != self_ ||
      r.keep_orphan()) {
    return std::optional<Unlinked>();
  }
  // Remove's one-batch path (M = P) without the garbage record: the client
  // frees the objects with the capability in the reply.
  CLF_RETURN_IF_ERROR(CheckStickyOf(dir, e.handle, r.caller()));
  RocksMetaStore::Batch b;
  b.DeleteEntry(r.parent(), r.name());
  *dir.mutable_mtime() = *dir.mutable_ctime() = Now();
  b.PutAttr(dir);
  std::lock_guard<std::mutex> il(InodeLock(e.handle));
  CLF_ASSIGN_OR_RETURN(v1::AdjustLinkReply adj, AdjustLinkInBatch(e.handle, -1, false, &b));
  const bool file_gone = adj.destroyed() && adj.attr().type() == v1::FT_REGULAR;
  if (file_gone) b.DeleteGarbage(e.handle);  // after AdjustLinkInBatch's PutGarbage: wins
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  Unlinked out;
  out.file_gone = file_gone;
  if (file_gone) {
    --inodes_;
    out.layout = adj.attr().layout();
  } else {
    AfterLinkCommit(adj);
  }
  out.remove.set_handle(e.handle);
  *out.remove.mutable_parent() = dir;
  return std::optional<Unlinked>(std::move(out));
}

}  // namespace clf::server
