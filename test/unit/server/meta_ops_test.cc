// MetaOps on a real RocksDB and object directory, one-server cluster (every
// collective is local), no gRPC.
#include <sys/stat.h>

#include "server/data/object_store.h"
#include "server/ops/data_ops.h"
#include "server/ops/meta_ops.h"
#include "server/store/meta_store.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

// A cluster of one has no peers: any call to one is a bug in the test setup.
class NoPeers final : public Peers {
 public:
  void Collective(ServerId, const v1::CollectiveRequest&,
                  std::function<void(Status, v1::CollectiveReply)> cb) override {
    cb(Unavailable("no peers"), {});
  }
  Result<v1::Attr> MakeDir(ServerId, const v1::MakeDirRequest&) override { return Unavailable("no peers"); }
  Status RemoveDir(ServerId, Handle) override { return Unavailable("no peers"); }
  Result<v1::AdjustLinkReply> AdjustLink(ServerId, const v1::AdjustLinkRequest&) override {
    return Unavailable("no peers");
  }
  Result<std::vector<v1::Attr>> GetAttrs(ServerId, const std::vector<Handle>&) override {
    return Unavailable("no peers");
  }
  Result<v1::InsertEntryReply> InsertEntry(ServerId, const v1::InsertEntryRequest&) override {
    return Unavailable("no peers");
  }
};

class MetaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    cluster_.servers = {ServerConfig{0, "127.0.0.1:1", "", dir_.str(), ""}};
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
  Status Write(Handle h, uint64_t off, const std::string& data) {
    v1::WriteRequest r;
    r.set_handle(h);
    v1::Extent* e = r.add_extents();
    e->set_offset(off);
    e->set_length(data.size());
    r.set_payload(data);
    return data_->Write(r);
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
  EXPECT_TRUE(objects_->Exists(f->handle()));
  EXPECT_STATUS(Code::kExists, Create(kRootHandle, "f", v1::FT_REGULAR));
  ASSERT_OK(Write(f->handle(), 10000, "hello"));
  v1::LookupRequest lr;
  lr.set_parent(kRootHandle);
  lr.set_name("f");
  auto a = ops_->Lookup(lr);
  ASSERT_OK(a);
  EXPECT_EQ(a->size(), 10005u);
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

}  // namespace
}  // namespace clf::server
