#include "client/namespace_client.h"

#include "client/proto_convert.h"

namespace clf::client {

std::function<void(Status, v1::AttrReply&)> NamespaceClient::AttrDone(Callback<Attr> cb) {
  return [this, cb = std::move(cb)](Status s, v1::AttrReply& r) {
    if (!s.ok()) return cb(s);
    if (r.has_parent()) dirs_.Put(r.parent());
    dirs_.Put(r.attr());
    Attr out = FromProto(r.attr());
    out.existed = r.existed();  // set by Create only
    cb(std::move(out));
  };
}

void NamespaceClient::Lookup(Handle parent, std::string name, Caller caller, Callback<Attr> cb) {
  ServerId s;
  if (Status st = rpc_.Route(parent, &s); !st.ok()) return cb(st);
  if (Status st = ValidateName(name); !st.ok()) return cb(st);
  v1::LookupRequest r;
  r.set_parent(parent);
  r.set_name(std::move(name));
  ToProto(caller, r.mutable_caller());
  CLF_META_CALL(rpc_, s, Lookup, v1::LookupRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
}

void NamespaceClient::GetAttr(Handle h, Caller caller, Callback<Attr> cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  Attr cached;
  if (dirs_.Get(h, &cached)) return cb(cached);
  v1::GetAttrRequest r;
  r.set_handle(h);
  ToProto(caller, r.mutable_caller());
  if (baseline_) return baseline_->GetAttr(s, std::move(r), AttrDone(std::move(cb)));
  CLF_META_CALL(rpc_, s, GetAttr, v1::GetAttrRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
}

void NamespaceClient::SetAttr(Handle h, SetAttrArgs a, Caller caller, Callback<Attr> cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  v1::SetAttrRequest r;
  r.set_handle(h);
  ToProto(caller, r.mutable_caller());
  r.set_valid(a.valid);
  r.set_mode(a.mode);
  r.set_uid(a.uid);
  r.set_gid(a.gid);
  r.set_size(a.size);
  *r.mutable_atime() = ToProto(a.atime);
  *r.mutable_mtime() = ToProto(a.mtime);
  *r.mutable_layout() = ToProto(a.layout);
  dirs_.Forget(h);
  CLF_META_CALL(rpc_, s, SetAttr, v1::SetAttrRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
}

void NamespaceClient::Create(Handle parent, std::string name, CreateArgs a, Caller caller,
                             Callback<Attr> cb) {
  ServerId s;
  if (Status st = rpc_.Route(parent, &s); !st.ok()) return cb(st);
  if (Status st = ValidateName(name); !st.ok()) return cb(st);
  v1::CreateRequest r;
  r.set_parent(parent);
  r.set_name(std::move(name));
  ToProto(caller, r.mutable_caller());
  r.set_type(static_cast<v1::FileType>(a.type));
  r.set_mode(a.mode);
  r.set_rdev(a.rdev);
  r.set_symlink_target(std::move(a.symlink_target));
  r.set_exclusive(a.exclusive);
  r.set_open_for_write(a.open_for_write);
  if (baseline_ && a.type == FileType::kRegular) {
    return baseline_->Create(s, std::move(r), AttrDone(std::move(cb)));
  }
  CLF_META_CALL(rpc_, s, Create, v1::CreateRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
}

void NamespaceClient::ReportWrite(Handle h, ReportWriteArgs a, Caller caller, Callback<Attr> cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  if (a.size > kMaxFileSize)
    return cb(Status(Code::kFileTooBig, "size past the maximum file size"));
  v1::ReportWriteRequest r;
  r.set_handle(h);
  ToProto(caller, r.mutable_caller());
  r.set_wrote(a.wrote);
  r.set_size(a.size);
  r.set_writers_delta(a.writers_delta);
  r.set_refresh(a.refresh);
  CLF_META_CALL(rpc_, s, ReportWrite, v1::ReportWriteRequest, v1::AttrReply, r,
                AttrDone(std::move(cb)));
}

void NamespaceClient::Link(Handle h, Handle new_parent, std::string new_name, Caller caller,
                           Callback<Attr> cb) {
  ServerId s;
  if (Status st = rpc_.Route(new_parent, &s); !st.ok()) return cb(st);
  if (Status st = ValidateName(new_name); !st.ok()) return cb(st);
  v1::LinkRequest r;
  r.set_handle(h);
  r.set_new_parent(new_parent);
  r.set_new_name(std::move(new_name));
  ToProto(caller, r.mutable_caller());
  CLF_META_CALL(rpc_, s, Link, v1::LinkRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
}

void NamespaceClient::Remove(Handle parent, std::string name, bool directory, bool keep_orphan,
                             Caller caller, Callback<RemoveResult> cb) {
  ServerId s;
  if (Status st = rpc_.Route(parent, &s); !st.ok()) return cb(st);
  if (Status st = ValidateName(name); !st.ok()) return cb(st);
  v1::RemoveRequest r;
  r.set_parent(parent);
  r.set_name(std::move(name));
  r.set_directory(directory);
  r.set_keep_orphan(keep_orphan);
  ToProto(caller, r.mutable_caller());
  dirs_.Forget(parent);
  auto done = [this, cb = std::move(cb), directory](Status st, v1::RemoveReply& rep) {
    if (!st.ok()) return cb(st);
    if (rep.has_parent()) dirs_.Put(rep.parent());
    if (directory) dirs_.Forget(rep.handle());
    cb(RemoveResult{rep.handle(), rep.orphaned()});
  };
  if (baseline_ && !directory) return baseline_->Remove(s, std::move(r), std::move(done));
  CLF_META_CALL(rpc_, s, Remove, v1::RemoveRequest, v1::RemoveReply, r, std::move(done));
}

void NamespaceClient::Rename(Handle sp, std::string sn, Handle dp, std::string dn, uint32_t flags,
                             bool keep_orphan, Caller caller, Callback<RemoveResult> cb) {
  ServerId s, d;
  if (Status st = rpc_.Route(sp, &s); !st.ok()) return cb(st);
  if (Status st = rpc_.Route(dp, &d); !st.ok()) return cb(st);
  if (Status st = ValidateName(sn); !st.ok()) return cb(st);
  if (Status st = ValidateName(dn); !st.ok()) return cb(st);
  v1::RenameRequest r;
  r.set_src_parent(sp);
  r.set_src_name(std::move(sn));
  r.set_dst_parent(dp);
  r.set_dst_name(std::move(dn));
  r.set_flags(flags);
  r.set_keep_orphan(keep_orphan);
  ToProto(caller, r.mutable_caller());
  dirs_.Forget(sp);
  dirs_.Forget(dp);
  CLF_META_CALL(rpc_, s, Rename, v1::RenameRequest, v1::RenameReply, r,
                [cb = std::move(cb)](Status st, v1::RenameReply& rep) {
                  if (!st.ok()) return cb(st);
                  cb(RemoveResult{rep.replaced_handle(), rep.orphaned()});
                });
}

void NamespaceClient::ReadDir(Handle dir, std::string after, uint32_t max_entries, bool plus,
                              Caller caller, Callback<DirPage> cb) {
  ServerId s;
  if (Status st = rpc_.Route(dir, &s); !st.ok()) return cb(st);
  v1::ReadDirRequest r;
  r.set_handle(dir);
  r.set_after(std::move(after));
  r.set_max_entries(max_entries);
  r.set_plus(plus);
  ToProto(caller, r.mutable_caller());
  CLF_META_CALL(rpc_, s, ReadDir, v1::ReadDirRequest, v1::ReadDirReply, r,
                [cb = std::move(cb)](Status st, v1::ReadDirReply& rep) {
                  if (!st.ok()) return cb(st);
                  DirPage page;
                  page.eof = rep.eof();
                  page.parent = rep.parent();
                  page.entries.reserve(rep.entries_size());
                  for (v1::DirEntry& e : *rep.mutable_entries()) {
                    DirEntry d;
                    d.name = std::move(*e.mutable_name());
                    d.handle = e.handle();
                    d.type = static_cast<FileType>(e.type());
                    if (e.has_attr()) d.attr = FromProto(e.attr());
                    page.entries.push_back(std::move(d));
                  }
                  cb(std::move(page));
                });
}

void NamespaceClient::AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs,
                                      Caller caller, Callback<DirLeaseGrant> cb) {
  ServerId s;
  if (Status st = rpc_.Route(dir, &s); !st.ok()) return cb(st);
  v1::DirLeaseRequest r;
  r.set_dir(dir);
  r.set_op(v1::DirLeaseRequest::ACQUIRE);
  r.set_handles_wanted(handles_wanted);
  r.set_with_attrs(with_attrs);
  ToProto(caller, r.mutable_caller());
  CLF_META_CALL(rpc_, s, DirLease, v1::DirLeaseRequest, v1::DirLeaseReply, r,
                ([cb = std::move(cb)](Status st, v1::DirLeaseReply& rep) {
                  if (!st.ok()) return cb(st);
                  DirLeaseGrant g;
                  g.granted = rep.granted();
                  g.refused = rep.refused();
                  g.lease_ms = rep.lease_ms();
                  g.dir = FromProto(rep.dir());
                  g.with_attrs = rep.with_attrs();
                  g.entries.reserve(rep.entries_size());
                  for (v1::DirEntry& e : *rep.mutable_entries()) {
                    DirEntry d;
                    d.name = std::move(*e.mutable_name());
                    d.handle = e.handle();
                    d.type = static_cast<FileType>(e.type());
                    if (g.with_attrs && e.has_attr()) d.attr = FromProto(e.attr());
                    g.entries.push_back(std::move(d));
                  }
                  g.handle_first = rep.handle_first();
                  g.handle_count = rep.handle_count();
                  const v1::Layout& l = rep.file_layout();
                  g.file_layout = FromProto(l);  // with its schedule settings
                  g.file_layout.first_server = 0;  // each file's is chosen by hash
                  cb(std::move(g));
                }));
}

void NamespaceClient::ReleaseDirLease(Handle dir, StatusCallback cb) {
  ServerId s;
  if (Status st = rpc_.Route(dir, &s); !st.ok()) return cb(st);
  v1::DirLeaseRequest r;
  r.set_dir(dir);
  r.set_op(v1::DirLeaseRequest::RELEASE);
  CLF_META_CALL(rpc_, s, DirLease, v1::DirLeaseRequest, v1::DirLeaseReply, r,
                [cb = std::move(cb)](Status st, v1::DirLeaseReply&) { cb(st); });
}

void NamespaceClient::EndLeaseSession(ServerId s, StatusCallback cb) {
  if (s >= rpc_.cluster().size()) return cb(Status(Code::kInvalid, "no such server"));
  v1::DirLeaseRequest r;
  r.set_op(v1::DirLeaseRequest::END_SESSION);
  CLF_META_CALL(rpc_, s, DirLease, v1::DirLeaseRequest, v1::DirLeaseReply, r,
                [cb = std::move(cb)](Status st, v1::DirLeaseReply&) { cb(st); });
}

void NamespaceClient::LeaseEvents(ServerId s, uint32_t wait_ms, Callback<std::vector<Handle>> cb) {
  if (s >= rpc_.cluster().size()) return cb(Status(Code::kInvalid, "no such server"));
  v1::LeaseEventsRequest r;
  r.set_wait_ms(wait_ms);
  rpc_.Unary<v1::LeaseEventsRequest, v1::LeaseEventsReply>(
      [stub = rpc_.meta(s)](grpc::ClientContext* ctx, v1::LeaseEventsRequest* rq,
                            v1::LeaseEventsReply* rs, std::function<void(grpc::Status)> done) {
        stub->async()->LeaseEvents(ctx, rq, rs, std::move(done));
      },
      std::move(r),
      std::function<void(Status, v1::LeaseEventsReply&)>(
          [cb = std::move(cb)](Status st, v1::LeaseEventsReply& rep) {
            if (!st.ok()) return cb(st);
            cb(std::vector<Handle>(rep.recall().begin(), rep.recall().end()));
          }),
      wait_ms + rpc_.timeout_ms());
}

namespace {

// One queued change as the request the server applies; the op's strings are
// moved out.
void EncodeCreate(CommitOp& op, v1::CreateRequest* c) {
  c->set_parent(op.parent);
  c->set_name(std::move(op.name));
  ToProto(op.caller, c->mutable_caller());
  c->set_type(static_cast<v1::FileType>(op.create.type));
  c->set_mode(op.create.mode);
  c->set_exclusive(true);
  c->set_open_for_write(op.create.open_for_write);
  if (op.create.type == FileType::kSymlink) {
    c->set_symlink_target(std::move(op.create.symlink_target));
  }
  c->set_handle(op.handle);
  *c->mutable_time() = ToProto(op.time);
}

void EncodeLink(CommitOp& op, v1::LinkRequest* k) {
  k->set_handle(op.handle);
  k->set_new_parent(op.parent);
  k->set_new_name(std::move(op.name));
  ToProto(op.caller, k->mutable_caller());
}

void EncodeRename(CommitOp& op, v1::RenameRequest* n) {
  n->set_src_parent(op.parent);
  n->set_src_name(std::move(op.name));
  n->set_dst_parent(op.new_parent);
  n->set_dst_name(std::move(op.new_name));
  n->set_flags(v1::RENAME_FLAG_NOREPLACE);
  ToProto(op.caller, n->mutable_caller());
}

void EncodeRemove(CommitOp& op, v1::RemoveRequest* m) {
  m->set_parent(op.parent);
  m->set_name(std::move(op.name));
  m->set_directory(op.directory);
  ToProto(op.caller, m->mutable_caller());
}

void EncodeSetAttr(const CommitOp& op, v1::SetAttrRequest* a) {
  const SetAttrArgs& sa = op.setattr;
  a->set_handle(op.handle);
  ToProto(op.caller, a->mutable_caller());
  a->set_valid(sa.valid);
  a->set_mode(sa.mode);
  a->set_uid(sa.uid);
  a->set_gid(sa.gid);
  a->set_size(sa.size);
  *a->mutable_atime() = ToProto(sa.atime);
  *a->mutable_mtime() = ToProto(sa.mtime);
}

void EncodeReport(const CommitOp& op, v1::ReportWriteRequest* w) {
  w->set_handle(op.handle);
  ToProto(op.caller, w->mutable_caller());
  w->set_wrote(op.report.wrote);
  w->set_size(op.report.size);
  w->set_writers_delta(op.report.writers_delta);
  w->set_refresh(op.report.refresh);
}

void EncodeCommitOp(CommitOp& op, v1::CommitOp* o) {
  switch (op.kind) {
    case CommitOp::kCreate:
      return EncodeCreate(op, o->mutable_create());
    case CommitOp::kLink:
      return EncodeLink(op, o->mutable_link());
    case CommitOp::kSync:
      o->mutable_sync();
      return;
    case CommitOp::kRename:
      return EncodeRename(op, o->mutable_rename());
    case CommitOp::kRemove:
      return EncodeRemove(op, o->mutable_remove());
    case CommitOp::kSetAttr:
      return EncodeSetAttr(op, o->mutable_setattr());
    case CommitOp::kReport:
      return EncodeReport(op, o->mutable_report());
  }
}

// Each of the `n` ops' outcome from the reply.
Result<std::vector<Status>> OutcomesOf(const v1::CommitReply& rep, int n) {
  if (rep.code_size() != n || rep.message_size() != n) {
    return Status(Code::kInternal, "commit reply does not match its request");
  }
  std::vector<Status> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    out.push_back(rep.code(i) == 0 ? Status::Ok()
                                   : Status(static_cast<Code>(rep.code(i)), rep.message(i)));
  }
  return out;
}

}  // namespace

void NamespaceClient::Commit(ServerId s, std::vector<CommitOp> ops,
                             Callback<std::vector<Status>> cb) {
  if (s >= rpc_.cluster().size()) return cb(Status(Code::kInvalid, "no such server"));
  v1::CommitRequest r;
  // Directories whose attributes the commit changes (a setattr's file, a
  // create's or remove's parent): the cached ones are from before it.
  std::vector<Handle> changed;
  changed.reserve(ops.size());
  for (CommitOp& op : ops) {
    changed.push_back(op.kind == CommitOp::kSetAttr ? op.handle : op.parent);
    EncodeCommitOp(op, r.add_ops());
  }
  const int n = r.ops_size();
  CLF_META_CALL(rpc_, s, Commit, v1::CommitRequest, v1::CommitReply, r,
                ([this, cb = std::move(cb), n, changed = std::move(changed)](Status st,
                                                                             v1::CommitReply& rep) {
                  for (Handle h : changed) dirs_.Forget(h);
                  if (!st.ok()) return cb(st);
                  cb(OutcomesOf(rep, n));
                }));
}

void NamespaceClient::Readlink(Handle h, Caller caller, Callback<std::string> cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  v1::GetAttrRequest r;
  r.set_handle(h);
  ToProto(caller, r.mutable_caller());
  CLF_META_CALL(rpc_, s, Readlink, v1::GetAttrRequest, v1::ReadlinkReply, r,
                [cb = std::move(cb)](Status st, v1::ReadlinkReply& rep) {
                  if (!st.ok()) return cb(st);
                  cb(std::move(*rep.mutable_target()));
                });
}

v1::XattrRequest NamespaceClient::XReq(Handle h, std::string name, const Caller& caller) {
  v1::XattrRequest r;
  r.set_handle(h);
  r.set_name(std::move(name));
  ToProto(caller, r.mutable_caller());
  return r;
}

void NamespaceClient::GetXattr(Handle h, std::string name, Caller caller,
                               Callback<std::string> cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  v1::XattrRequest r = XReq(h, std::move(name), caller);
  CLF_META_CALL(rpc_, s, GetXattr, v1::XattrRequest, v1::XattrReply, r,
                [cb = std::move(cb)](Status st, v1::XattrReply& rep) {
                  if (!st.ok()) return cb(st);
                  cb(std::move(*rep.mutable_value()));
                });
}

void NamespaceClient::SetXattr(Handle h, std::string name, std::string value, uint32_t flags,
                               Caller caller, StatusCallback cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  v1::XattrRequest r = XReq(h, std::move(name), caller);
  r.set_value(std::move(value));
  r.set_flags(flags);
  CLF_META_CALL(rpc_, s, SetXattr, v1::XattrRequest, v1::XattrReply, r,
                [cb = std::move(cb)](Status st, v1::XattrReply&) { cb(st); });
}

void NamespaceClient::ListXattr(Handle h, Caller caller, Callback<std::vector<std::string>> cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  v1::XattrRequest r = XReq(h, "", caller);
  CLF_META_CALL(rpc_, s, ListXattr, v1::XattrRequest, v1::XattrReply, r,
                [cb = std::move(cb)](Status st, v1::XattrReply& rep) {
                  if (!st.ok()) return cb(st);
                  cb(std::vector<std::string>(rep.names().begin(), rep.names().end()));
                });
}

void NamespaceClient::RemoveXattr(Handle h, std::string name, Caller caller, StatusCallback cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  v1::XattrRequest r = XReq(h, std::move(name), caller);
  CLF_META_CALL(rpc_, s, RemoveXattr, v1::XattrRequest, v1::XattrReply, r,
                [cb = std::move(cb)](Status st, v1::XattrReply&) { cb(st); });
}

void NamespaceClient::Destroy(Handle h, StatusCallback cb) {
  ServerId s;
  if (Status st = rpc_.Route(h, &s); !st.ok()) return cb(st);
  v1::DestroyRequest r;
  r.set_handle(h);
  CLF_META_CALL(rpc_, s, Destroy, v1::DestroyRequest, v1::DestroyReply, r,
                [cb = std::move(cb)](Status st, v1::DestroyReply&) { cb(st); });
}

}  // namespace clf::client
