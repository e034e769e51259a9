// MetaOps on a real RocksDB and object directory, one-server cluster (every
// collective is local), no gRPC.
#include <sys/stat.h>

#include "server/data/object_store.h"
#include "server/ops/data_ops.h"
#include "server/ops/meta_ops.h"
#include "server/store/meta_store.h"
#include "test/support/no_peers.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

class MetaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    ServerConfig server;  // fields by name: ServerConfig grows (metrics_address, ...)
    server.id = 0;
    server.address = "127.0.0.1:1";
    server.data_dir = dir_.str();
    cluster_.servers = {server};
    cluster_.default_layout = Layout{4096, 1, 0, 1};
    auto s = RocksMetaStore::Open(dir_.str() + "/meta", false);
    ASSERT_OK(s);
    store_ = std::move(*s);
    auto o = ObjectStore::Open(dir_.str() + "/objects");
    ASSERT_OK(o);
    objects_ = std::move(*o);
    ops_ = std::make_unique<MetaOps>(cluster_, 0, store_.get(), objects_.get(), &peers_);
    data_ = std::make_unique<DataOps>(objects_.get());
    ASSERT_OK(ops_->Init());
  }
  void Reopen() {
    data_.reset();
    ops_.reset();
    objects_.reset();
    store_.reset();
    Open();
  }

  Result<v1::Attr> Create(Handle parent, const std::string& name, v1::FileType t,
                          uint32_t uid = 0) {
    v1::CreateRequest r;
    r.set_parent(parent);
    r.set_name(name);
    r.set_type(t);
    r.set_mode(t == v1::FT_DIRECTORY ? 0755 : 0644);
    r.set_exclusive(true);
    r.mutable_caller()->set_uid(uid);
    r.mutable_caller()->set_gid(uid);
    if (t == v1::FT_SYMLINK) r.set_symlink_target("target");
    return ops_->Create(r);
  }
  Result<v1::RemoveReply> Remove(Handle parent, const std::string& name, bool dir) {
    v1::RemoveRequest r;
    r.set_parent(parent);
    r.set_name(name);
    r.set_directory(dir);
    return ops_->Remove(r);
  }
  // The data write alone, as a data server sees it.
  Status WriteRaw(Handle h, uint64_t off, const std::string& data) {
    v1::WriteRequest r;
    r.set_handle(h);
    v1::Extent* e = r.add_extents();
    e->set_offset(off);
    e->set_length(data.size());
    r.set_payload(data);
    return data_->Write(r);
  }
  // A client's write: the data, then the size report to M.
  Status Write(Handle h, uint64_t off, const std::string& data) {
    CLF_RETURN_IF_ERROR(WriteRaw(h, off, data));
    v1::ReportWriteRequest rw;
    rw.set_handle(h);
    rw.set_wrote(true);
    rw.set_size(off + data.size());
    return ops_->ReportWrite(rw).status();
  }

  clf::testing::TempDir dir_;
  ClusterConfig cluster_;
  NoPeers peers_;
  std::unique_ptr<RocksMetaStore> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<MetaOps> ops_;
  std::unique_ptr<DataOps> data_;
};

TEST_F(MetaOpsTest, CreateLookupRemove) {
  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  EXPECT_EQ(ServerOf(f->handle()), 0u);
  // One-hop create: no data object until the first write reaches this server.
  EXPECT_FALSE(objects_->Exists(f->handle()));
  EXPECT_STATUS(Code::kExists, Create(kRootHandle, "f", v1::FT_REGULAR));
  ASSERT_OK(WriteRaw(f->handle(), 10000, "hello"));
  EXPECT_TRUE(objects_->Exists(f->handle()));
  v1::LookupRequest lr;
  lr.set_parent(kRootHandle);
  lr.set_name("f");
  // Sizes live on M: an unreported write by a client that never opened the
  // file for writing is not seen...
  auto a = ops_->Lookup(lr);
  ASSERT_OK(a);
  EXPECT_EQ(a->size(), 0u);
  // ...while an open writer makes stat gather the size from the objects...
  v1::ReportWriteRequest rw;
  rw.set_handle(f->handle());
  rw.set_writers_delta(1);
  ASSERT_OK(ops_->ReportWrite(rw));
  a = ops_->Lookup(lr);
  ASSERT_OK(a);
  EXPECT_EQ(a->size(), 10005u);
  EXPECT_EQ(a->writers(), 1u);
  // ...and the writer's report at close stores it: exact with no writer left.
  rw.set_writers_delta(-1);
  rw.set_wrote(true);
  rw.set_size(10005);
  ASSERT_OK(ops_->ReportWrite(rw));
  a = ops_->Lookup(lr);
  ASSERT_OK(a);
  EXPECT_EQ(a->size(), 10005u);
  EXPECT_EQ(a->writers(), 0u);
  rw.set_writers_delta(7);
  EXPECT_STATUS(Code::kInvalid, ops_->ReportWrite(rw));
  ASSERT_OK(Remove(kRootHandle, "f", false));
  EXPECT_STATUS(Code::kNotFound, ops_->Lookup(lr));
  EXPECT_TRUE(ops_->CollectGarbage());
  EXPECT_FALSE(objects_->Exists(f->handle()));
  EXPECT_TRUE(store_->Garbage().empty());
}

TEST_F(MetaOpsTest, DirectoriesCountLinksAndRefuseRemovalWhenNotEmpty) {
  auto d = Create(kRootHandle, "d", v1::FT_DIRECTORY);
  ASSERT_OK(d);
  ASSERT_OK(Create(d->handle(), "sub", v1::FT_DIRECTORY));
  ASSERT_OK(Create(d->handle(), "file", v1::FT_REGULAR));
  EXPECT_EQ(ops_->GetAttr(d->handle(), {})->nlink(), 3u);
  EXPECT_STATUS(Code::kNotEmpty, Remove(kRootHandle, "d", true));
  EXPECT_STATUS(Code::kIsDir, Remove(d->handle(), "sub", false));
  EXPECT_STATUS(Code::kNotDir, Remove(d->handle(), "file", true));
  ASSERT_OK(Remove(d->handle(), "sub", true));
  ASSERT_OK(Remove(d->handle(), "file", false));
  EXPECT_EQ(ops_->GetAttr(d->handle(), {})->nlink(), 2u);
  ASSERT_OK(Remove(kRootHandle, "d", true));
  EXPECT_EQ(ops_->GetAttr(kRootHandle, {})->nlink(), 2u);
}

TEST_F(MetaOpsTest, RenameReplacesAndHonoursNoReplace) {
  auto a = Create(kRootHandle, "a", v1::FT_REGULAR);
  auto b = Create(kRootHandle, "b", v1::FT_REGULAR);
  ASSERT_OK(a);
  ASSERT_OK(b);
  v1::RenameRequest r;
  r.set_src_parent(kRootHandle);
  r.set_src_name("a");
  r.set_dst_parent(kRootHandle);
  r.set_dst_name("b");
  r.set_flags(1);
  EXPECT_STATUS(Code::kExists, ops_->Rename(r));
  r.set_flags(0);
  auto rep = ops_->Rename(r);
  ASSERT_OK(rep);
  EXPECT_EQ(rep->replaced_handle(), b->handle());
  v1::LookupRequest lr;
  lr.set_parent(kRootHandle);
  lr.set_name("b");
  EXPECT_EQ(ops_->Lookup(lr)->handle(), a->handle());
  EXPECT_STATUS(Code::kStale, ops_->GetAttr(b->handle(), {}));
}

TEST_F(MetaOpsTest, HardLinksKeepTheFileUntilTheLastName) {
  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  v1::LinkRequest lr;
  lr.set_handle(f->handle());
  lr.set_new_parent(kRootHandle);
  lr.set_new_name("g");
  auto l = ops_->Link(lr);
  ASSERT_OK(l);
  EXPECT_EQ(l->nlink(), 2u);
  ASSERT_OK(Remove(kRootHandle, "f", false));
  EXPECT_EQ(ops_->GetAttr(f->handle(), {})->nlink(), 1u);
  ASSERT_OK(Remove(kRootHandle, "g", false));
  EXPECT_STATUS(Code::kStale, ops_->GetAttr(f->handle(), {}));
}

TEST_F(MetaOpsTest, OrphanKeptUntilDestroy) {
  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  ASSERT_OK(Write(f->handle(), 0, "data"));
  v1::RemoveRequest r;
  r.set_parent(kRootHandle);
  r.set_name("f");
  r.set_keep_orphan(true);
  auto rep = ops_->Remove(r);
  ASSERT_OK(rep);
  EXPECT_TRUE(rep->orphaned());
  v1::ReadRequest rr;
  rr.set_handle(f->handle());
  rr.add_extents()->set_length(4);
  EXPECT_EQ(*data_->Read(rr), "data");
  ASSERT_OK(ops_->Destroy(f->handle()));
  EXPECT_STATUS(Code::kStale, ops_->GetAttr(f->handle(), {}));
}

TEST_F(MetaOpsTest, PermissionsAndBadInput) {
  auto d = Create(kRootHandle, "d", v1::FT_DIRECTORY);
  ASSERT_OK(d);
  EXPECT_STATUS(Code::kPermission, Create(d->handle(), "x", v1::FT_REGULAR, /*uid=*/1000));
  EXPECT_STATUS(Code::kNameTooLong, Create(kRootHandle, std::string(256, 'n'), v1::FT_REGULAR));
  EXPECT_STATUS(Code::kInvalid, Create(kRootHandle, "a/b", v1::FT_REGULAR));
  EXPECT_STATUS(Code::kInvalid, Create(kRootHandle, "..", v1::FT_DIRECTORY));
  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  v1::WriteRequest w;
  w.set_handle(f->handle());
  v1::Extent* e = w.add_extents();
  e->set_offset(~uint64_t{0} - 2);
  e->set_length(10);
  w.set_payload(std::string(10, 'x'));
  EXPECT_STATUS(Code::kFileTooBig, data_->Write(w));
  e->set_offset(0);
  w.set_payload("short");
  EXPECT_STATUS(Code::kInvalid, data_->Write(w));
  v1::SetAttrRequest t;
  t.set_handle(f->handle());
  t.set_valid(8);
  t.set_size(uint64_t{1} << 62);
  EXPECT_STATUS(Code::kFileTooBig, ops_->SetAttr(t));
}

TEST_F(MetaOpsTest, XattrsTrackedAndRemovedWithTheFile) {
  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  EXPECT_FALSE(ops_->GetAttr(f->handle(), {})->has_xattrs());
  v1::XattrRequest x;
  x.set_handle(f->handle());
  x.set_name("user.a");
  x.set_value("1");
  ASSERT_OK(ops_->SetXattr(x));
  EXPECT_TRUE(ops_->GetAttr(f->handle(), {})->has_xattrs());
  ASSERT_OK(ops_->RemoveXattr(x));
  EXPECT_FALSE(ops_->GetAttr(f->handle(), {})->has_xattrs());
  ASSERT_OK(ops_->SetXattr(x));
  ASSERT_OK(Remove(kRootHandle, "f", false));
  EXPECT_STATUS(Code::kNoData, store_->GetXattr(f->handle(), "user.a"));
}

TEST_F(MetaOpsTest, SurvivesReopen) {
  auto d = Create(kRootHandle, "d", v1::FT_DIRECTORY);
  ASSERT_OK(d);
  auto f = Create(d->handle(), "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  ASSERT_OK(Write(f->handle(), 0, "persist"));
  Reopen();
  v1::LookupRequest lr;
  lr.set_parent(d->handle());
  lr.set_name("f");
  auto a = ops_->Lookup(lr);
  ASSERT_OK(a);
  EXPECT_EQ(a->size(), 7u);
  // New handles never reuse old ones.
  auto g = Create(d->handle(), "g", v1::FT_REGULAR);
  ASSERT_OK(g);
  EXPECT_GT(g->handle(), f->handle());
}

TEST_F(MetaOpsTest, TruncateGrowsAndShrinks) {
  cluster_.default_layout = Layout{4096, 1, 0, 1};
  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  ASSERT_OK(Write(f->handle(), 0, std::string(10000, 'a')));
  v1::SetAttrRequest t;
  t.set_handle(f->handle());
  t.set_valid(8);
  t.set_size(5000);
  EXPECT_EQ(ops_->SetAttr(t)->size(), 5000u);
  t.set_size(1 << 20);
  EXPECT_EQ(ops_->SetAttr(t)->size(), uint64_t{1} << 20);
  v1::ReadRequest rr;
  rr.set_handle(f->handle());
  v1::Extent* e = rr.add_extents();
  e->set_offset(4990);
  e->set_length(20);
  EXPECT_EQ(*data_->Read(rr), std::string(10, 'a') + std::string(10, '\0'));
}

// Requests the service validation refuses, sent to the ops layer directly:
// ops itself refuses or survives them (it is also reached by the fuzzers).
TEST_F(MetaOpsTest, DegenerateRequestsRefusedOrHarmless) {
  auto d = Create(kRootHandle, "d", v1::FT_DIRECTORY);
  ASSERT_OK(d);
  v1::SetAttrRequest s;
  s.set_handle(d->handle());
  s.set_valid(256);
  s.mutable_layout()->set_stripe_size(65536);
  s.mutable_layout()->set_stripe_count(1);
  s.mutable_layout()->set_replicas(1);
  ASSERT_OK(ops_->SetAttr(s));
  const v1::Layout before = ops_->GetAttr(d->handle(), {})->layout();
  s.mutable_layout()->set_replicas(0);  // once silently made 1
  EXPECT_STATUS(Code::kInvalid, ops_->SetAttr(s));
  s.mutable_layout()->set_replicas(1);
  s.mutable_layout()->set_first_server(0);
  s.mutable_layout()->set_stripe_size(4096 * 3);
  ASSERT_OK(ops_->SetAttr(s));
  s.mutable_layout()->set_first_server(5);  // once silently overwritten with 0
  EXPECT_STATUS(Code::kInvalid, ops_->SetAttr(s));
  EXPECT_EQ(ops_->GetAttr(d->handle(), {})->layout().stripe_size(), 4096u * 3);
  EXPECT_NE(before.stripe_size(), 4096u * 3);

  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  v1::XattrRequest x;
  x.set_handle(f->handle());
  x.set_name("user.a");
  x.set_flags(8);  // unknown bits were once ignored
  EXPECT_STATUS(Code::kInvalid, ops_->SetXattr(x));

  // A truncate collective whose layout has stripe size 0 (once a division by
  // zero) and one naming a server outside the cluster: answered, not fatal.
  v1::CollectiveRequest c;
  c.set_op(v1::COLL_TRUNCATE);
  c.set_server_count(1);
  c.add_targets(0);
  v1::CollFile* cf = c.add_files();
  cf->set_handle(f->handle());
  cf->mutable_layout()->set_stripe_count(1);
  cf->set_size(100);
  bool called = false;
  ops_->RunCollective(c, [&called](v1::CollectiveReply) { called = true; });
  EXPECT_TRUE(called);
  c.add_targets(7);
  called = false;
  v1::CollectiveReply got;
  ops_->RunCollective(c, [&](v1::CollectiveReply r) {
    called = true;
    got = r;
  });
  EXPECT_TRUE(called);
  EXPECT_NE(got.code(), 0);

  v1::RenameRequest r;
  r.set_src_parent(kRootHandle);
  r.set_src_name("f");
  r.set_dst_parent(MakeHandle(9, 1));
  r.set_dst_name("g");
  EXPECT_STATUS(Code::kStale, ops_->Rename(r));
}

// Setattr by someone who is not the owner: the kernel's kill-priv (clearing
// setuid/setgid after a write) needs write permission, a truncate through a
// descriptor open for writing needs none, anything else stays owner-only.
TEST_F(MetaOpsTest, SetAttrKillPrivAndOpenDescriptor) {
  auto f = Create(kRootHandle, "f", v1::FT_REGULAR);
  ASSERT_OK(f);
  v1::SetAttrRequest s;
  s.set_handle(f->handle());
  s.set_valid(1);
  s.set_mode(06666);
  ASSERT_OK(ops_->SetAttr(s));  // root
  s.mutable_caller()->set_uid(1000);
  s.mutable_caller()->set_gid(1000);
  s.set_mode(06777);  // adds bits: a chmod
  EXPECT_STATUS(Code::kNotPermitted, ops_->SetAttr(s));
  s.set_mode(0666);  // drops only setuid and setgid: kill-priv
  ASSERT_OK(ops_->SetAttr(s));
  EXPECT_EQ(ops_->GetAttr(f->handle(), {})->mode(), 0666u);
  s.set_mode(0644);
  EXPECT_STATUS(Code::kNotPermitted, ops_->SetAttr(s));
  // No write permission: not even kill-priv.
  s.mutable_caller()->set_uid(0);
  s.set_mode(04644);
  ASSERT_OK(ops_->SetAttr(s));
  s.mutable_caller()->set_uid(1000);
  s.set_mode(0644);
  EXPECT_STATUS(Code::kNotPermitted, ops_->SetAttr(s));

  // Mode 0, owned by the caller: truncate only through the open descriptor.
  auto open_dir = Create(kRootHandle, "open", v1::FT_DIRECTORY);
  ASSERT_OK(open_dir);
  v1::SetAttrRequest om;
  om.set_handle(open_dir->handle());
  om.set_valid(1);
  om.set_mode(0777);
  ASSERT_OK(ops_->SetAttr(om));
  v1::CreateRequest cr;
  cr.set_parent(open_dir->handle());
  cr.set_name("zero");
  cr.set_type(v1::FT_REGULAR);
  cr.set_mode(0);
  cr.mutable_caller()->set_uid(1000);
  auto z = ops_->Create(cr);
  ASSERT_OK(z);
  v1::SetAttrRequest t;
  t.set_handle(z->handle());
  t.mutable_caller()->set_uid(1000);
  t.set_valid(8);
  t.set_size(100);
  EXPECT_STATUS(Code::kPermission, ops_->SetAttr(t));
  t.set_valid(8 | 512);
  auto a = ops_->SetAttr(t);
  ASSERT_OK(a);
  EXPECT_EQ(a->size(), 100u);
  // A truncate's explicit mtime (how the kernel sends it) is not a utimensat.
  s.mutable_caller()->set_uid(0);
  s.set_mode(0666);
  ASSERT_OK(ops_->SetAttr(s));
  v1::SetAttrRequest u;
  u.set_handle(f->handle());
  u.mutable_caller()->set_uid(1000);
  u.set_valid(8 | 32);
  u.set_size(3);
  ASSERT_OK(ops_->SetAttr(u));  // others may write f
  u.set_valid(32);
  EXPECT_STATUS(Code::kNotPermitted, ops_->SetAttr(u));
}

}  // namespace
}  // namespace clf::server
