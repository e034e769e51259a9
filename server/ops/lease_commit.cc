#include "server/ops/lease_commit.h"

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace clf::server {

namespace {

// One Meta.Commit: its ops run in order, each under the caller's lease of
// the directories it changes.
class CommitRun {
 public:
  CommitRun(MetaOps* ops, DirLeases* leases, uint64_t session, v1::CommitReply* out)
      : ops_(ops), leases_(leases), session_(session), out_(out) {}

  void Run(const v1::CommitRequest& r) {
    const int n = r.ops_size();
    for (int i = 0; i < n;) {
      const int group_end = UnlinkRunEnd(r, i);
      if (group_end - i > 1) {
        RunUnlinks(r, i, group_end);
        i = group_end;
        continue;
      }
      Add(RunOne(r.ops(i)));
      ++i;
    }
    // The exact allocation of the reported files is gathered in the background,
    // batched across commits (one stat collective per batch).
    ops_->QueueRefresh(refresh_);
  }

 private:
  Status LeaseOf(Handle dir) {
    return leases_->HoldsAndRenew(session_, dir)
               ? Status::Ok()
               : Status(Code::kStale, "directory lease lost before the commit");
  }
  void Add(const Status& s) {
    out_->add_code(static_cast<uint32_t>(s.code()));
    out_->add_message(s.ok() ? std::string() : s.message());
  }
  // The end of the run of unlinks of files in one directory, names distinct,
  // that starts at op i (i itself when op i is not such an unlink).
  static int UnlinkRunEnd(const v1::CommitRequest& r, int i) {
    const v1::CommitOp& op = r.ops(i);
    if (op.op_case() != v1::CommitOp::kRemove || op.remove().directory()) return i;
    const Handle parent = op.remove().parent();
    std::unordered_set<std::string_view> names;
    int j = i;
    for (; j < r.ops_size(); ++j) {
      const v1::CommitOp& o = r.ops(j);
      if (o.op_case() != v1::CommitOp::kRemove || o.remove().directory() ||
          o.remove().parent() != parent || !names.insert(o.remove().name()).second) {
        break;
      }
    }
    return j;
  }
  // Such a run: one group commit, results as one by one.
  void RunUnlinks(const v1::CommitRequest& r, int begin, int end) {
    std::vector<const v1::RemoveRequest*> group;
    for (int k = begin; k < end; ++k) group.push_back(&r.ops(k).remove());
    Status held = LeaseOf(group.front()->parent());
    std::vector<Status> rs;
    if (held.ok()) rs = ops_->RemoveFiles(group);
    for (size_t k = 0; k < group.size(); ++k) Add(held.ok() ? rs[k] : held);
  }
  Status RunOne(const v1::CommitOp& op) {
    switch (op.op_case()) {
      case v1::CommitOp::kCreate:
        CLF_RETURN_IF_ERROR(LeaseOf(op.create().parent()));
        return ops_->Create(op.create()).status();
      case v1::CommitOp::kRemove:
        CLF_RETURN_IF_ERROR(LeaseOf(op.remove().parent()));
        return ops_->Remove(op.remove()).status();
      case v1::CommitOp::kLink:
        CLF_RETURN_IF_ERROR(LeaseOf(op.link().new_parent()));
        return ops_->Link(op.link()).status();
      case v1::CommitOp::kRename: {
        // Both leases: the destination's where this server holds it (the
        // destination server checks nothing more: the client's own lease
        // there is not recalled by its rename, InsertEntryRequest.session).
        const v1::RenameRequest& rn = op.rename();
        CLF_RETURN_IF_ERROR(LeaseOf(rn.src_parent()));
        if (ServerOf(rn.dst_parent()) == ServerOf(rn.src_parent())) {
          CLF_RETURN_IF_ERROR(LeaseOf(rn.dst_parent()));
        }
        return ops_->Rename(rn, session_).status();
      }
      case v1::CommitOp::kSync:
        return ops_->SyncWal();
      case v1::CommitOp::kSetattr:
        return ops_->SetAttr(op.setattr(), false).status();
      case v1::CommitOp::kReport:
        return Report(op.report());
      default:
        return Invalid("commit: empty op");
    }
  }
  Status Report(const v1::ReportWriteRequest& report) {
    if (!report.refresh()) return ops_->ReportWrite(report).status();
    // Gathered in the background (QueueRefresh).
    v1::ReportWriteRequest w = report;
    w.set_refresh(false);
    CLF_RETURN_IF_ERROR(ops_->ReportWrite(w, true).status());
    refresh_.push_back(w.handle());
    return Status::Ok();
  }

  MetaOps* const ops_;
  DirLeases* const leases_;
  const uint64_t session_;
  v1::CommitReply* const out_;
  std::vector<Handle> refresh_;
};

}  // namespace

Status RunCommit(MetaOps* ops, DirLeases* leases, uint64_t session, const v1::CommitRequest& r,
                 v1::CommitReply* out) {
  if (leases == nullptr || session == 0 || ops->cluster().root_squash) {
    return Invalid("commit: needs a session and directory leases (root_squash off)");
  }
  CommitRun(ops, leases, session, out).Run(r);
  return Status::Ok();
}

}  // namespace clf::server
