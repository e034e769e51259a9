#include "server/ops/lease_commit.h"

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace clf::server {

Status RunCommit(MetaOps* ops, DirLeases* leases, uint64_t session, const v1::CommitRequest& r,
                 v1::CommitReply* out) {
  if (leases == nullptr || session == 0 || ops->cluster().root_squash) {
    return Invalid("commit: needs a session and directory leases (root_squash off)");
  }
  std::vector<Handle> refresh;
  auto lease_of = [&](Handle dir) {
    return leases->HoldsAndRenew(session, dir)
               ? Status::Ok()
               : Status(Code::kStale, "directory lease lost before the commit");
  };
  auto add_result = [out](const Status& s) {
    out->add_code(static_cast<uint32_t>(s.code()));
    out->add_message(s.ok() ? std::string() : s.message());
  };
  const int n = r.ops_size();
  for (int i = 0; i < n;) {
    const v1::CommitOp& op = r.ops(i);
    // A run of unlinks of files in one directory, names distinct: one group
    // commit, results as one by one.
    if (op.op_case() == v1::CommitOp::kRemove && !op.remove().directory()) {
      const Handle parent = op.remove().parent();
      std::vector<const v1::RemoveRequest*> group;
      std::unordered_set<std::string_view> names;
      int j = i;
      for (; j < n; ++j) {
        const v1::CommitOp& o = r.ops(j);
        if (o.op_case() != v1::CommitOp::kRemove || o.remove().directory() ||
            o.remove().parent() != parent || !names.insert(o.remove().name()).second) {
          break;
        }
        group.push_back(&o.remove());
      }
      if (group.size() > 1) {
        Status held = lease_of(parent);
        std::vector<Status> rs;
        if (held.ok()) rs = ops->RemoveFiles(group);
        for (size_t k = 0; k < group.size(); ++k) add_result(held.ok() ? rs[k] : held);
        i = j;
        continue;
      }
    }
    ++i;
    Status s;
    switch (op.op_case()) {
      case v1::CommitOp::kCreate:
        s = lease_of(op.create().parent());
        if (s.ok()) s = ops->Create(op.create()).status();
        break;
      case v1::CommitOp::kRemove:
        s = lease_of(op.remove().parent());
        if (s.ok()) s = ops->Remove(op.remove()).status();
        break;
      case v1::CommitOp::kLink:
        s = lease_of(op.link().new_parent());
        if (s.ok()) s = ops->Link(op.link()).status();
        break;
      case v1::CommitOp::kRename: {
        // Both leases: the destination's where this server holds it (the
        // destination server checks nothing more: the client's own lease
        // there is not recalled by its rename, InsertEntryRequest.session).
        const v1::RenameRequest& rn = op.rename();
        s = lease_of(rn.src_parent());
        if (s.ok() && ServerOf(rn.dst_parent()) == ServerOf(rn.src_parent())) {
          s = lease_of(rn.dst_parent());
        }
        if (s.ok()) s = ops->Rename(rn, session).status();
        break;
      }
      case v1::CommitOp::kSync:
        s = ops->SyncWal();
        break;
      case v1::CommitOp::kSetattr:
        s = ops->SetAttr(op.setattr(), false).status();
        break;
      case v1::CommitOp::kReport:
        if (op.report().refresh()) {
          // Gathered in the background (QueueRefresh below).
          v1::ReportWriteRequest w = op.report();
          w.set_refresh(false);
          s = ops->ReportWrite(w, true).status();
          if (s.ok()) refresh.push_back(w.handle());
        } else {
          s = ops->ReportWrite(op.report()).status();
        }
        break;
      default:
        s = Invalid("commit: empty op");
    }
    add_result(s);
  }
  // The exact allocation of the reported files is gathered in the background,
  // batched across commits (one stat collective per batch).
  ops->QueueRefresh(refresh);
  return Status::Ok();
}

}  // namespace clf::server
