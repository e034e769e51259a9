// Malformed requests sent to real servers over raw gRPC (the generated stubs
// with the cluster secret, not libclf, whose own checks would hide them):
// every one is refused with a clear error, no server dies, and a file written
// before reads back byte for byte.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "clf/client.h"
#include "clf/v1/admin.grpc.pb.h"
#include "clf/v1/data.grpc.pb.h"
#include "clf/v1/meta.grpc.pb.h"
#include "clf/v1/peer.grpc.pb.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/status_grpc.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

class RawGrpcTest : public ::testing::Test {
 protected:
  static constexpr int kServers = 3;

  static void SetUpTestSuite() {
    ClusterOptions o;
    o.servers = kServers;
    o.stripe_size = 64 * 1024;
    cluster_ = new TestCluster(o);
    Status st = cluster_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    Result<std::string> secret = ReadSecret(cluster_->config().secret_file);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    secret_ = new std::string(*secret);
    Result<std::string> peer_secret = ReadSecret(cluster_->config().peer_secret_file);
    ASSERT_TRUE(peer_secret.ok()) << peer_secret.status().ToString();
    peer_secret_ = new std::string(*peer_secret);
    for (int k = 0; k < kServers; ++k) {
      auto ch =
          grpc::CreateCustomChannel(cluster_->config().servers[static_cast<size_t>(k)].address,
                                    grpc::InsecureChannelCredentials(), ClfChannelArgs());
      stubs_.push_back(Stubs{v1::Meta::NewStub(ch), v1::Data::NewStub(ch), v1::Peer::NewStub(ch),
                             v1::Admin::NewStub(ch)});
    }
    // The known file (written through libclf: setup, not under test).
    client::Client& c = cluster_->client();
    Result<client::Attr> a = c.CreateSync(c.root(), "keep", client::CreateArgs{});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    keep_ = new client::Attr(*a);
    ASSERT_OK(c.WriteSync(a->handle, a->layout, 0, Content()));
    ASSERT_OK(c.SyncSync(a->handle, a->layout));
  }
  static void TearDownTestSuite() {
    stubs_.clear();
    delete keep_;
    keep_ = nullptr;
    delete secret_;
    secret_ = nullptr;
    delete peer_secret_;
    peer_secret_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }
  static std::string Content() { return PatternBytes(11, 0, 200 * 1024); }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    ASSERT_NE(keep_, nullptr);
  }

  // After every test: each server process alive and answering Admin.Status
  // over raw gRPC, the known file intact.
  void TearDown() override {
    if (cluster_ == nullptr || keep_ == nullptr) return;
    for (int k = 0; k < kServers; ++k) {
      EXPECT_TRUE(cluster_->server_running(k)) << "clfd " << k << " died:\n"
                                               << cluster_->LogTail(k);
      v1::StatusRequest req;
      v1::StatusReply rep;
      Status s =
          Call(k, [&](grpc::ClientContext* ctx) { return admin(k)->Status(ctx, req, &rep); });
      EXPECT_TRUE(s.ok()) << "server " << k << ": " << s.ToString() << "\n" << cluster_->LogTail(k);
    }
    client::Client& c = cluster_->client();
    Result<client::Attr> a = c.LookupSync(c.root(), "keep");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->size, Content().size());
    Result<std::string> r = c.ReadSync(a->handle, a->layout, 0, Content().size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(FirstDifference(*r, Content()), -1);
  }

  // One call with the servers' peer secret, which may call every method (or
  // `secret` instead), and a 5 s deadline.
  template <typename Fn>
  static Status Call(int k, Fn fn, const std::string* secret = nullptr) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kSecretHeader, secret ? *secret : *peer_secret_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return FromGrpc(fn(&ctx));
  }

  static v1::Meta::Stub* meta(int k) { return stubs_[static_cast<size_t>(k)].meta.get(); }
  static v1::Data::Stub* data(int k) { return stubs_[static_cast<size_t>(k)].data.get(); }
  static v1::Peer::Stub* peer(int k) { return stubs_[static_cast<size_t>(k)].peer.get(); }
  static v1::Admin::Stub* admin(int k) { return stubs_[static_cast<size_t>(k)].admin.get(); }

  static Status Rename(int k, const v1::RenameRequest& r) {
    v1::RenameReply rep;
    return Call(k, [&](grpc::ClientContext* ctx) { return meta(k)->Rename(ctx, r, &rep); });
  }
  static Status Collective(int k, const v1::CollectiveRequest& r) {
    v1::CollectiveReply rep;
    return Call(k, [&](grpc::ClientContext* ctx) { return peer(k)->Collective(ctx, r, &rep); });
  }
  static Status SetAttr(int k, const v1::SetAttrRequest& r) {
    v1::AttrReply rep;
    return Call(k, [&](grpc::ClientContext* ctx) { return meta(k)->SetAttr(ctx, r, &rep); });
  }
  static Status Create(int k, const v1::CreateRequest& r) {
    v1::AttrReply rep;
    return Call(k, [&](grpc::ClientContext* ctx) { return meta(k)->Create(ctx, r, &rep); });
  }
  static Status GetAttr(int k, Handle h) {
    v1::GetAttrRequest r;
    r.set_handle(h);
    v1::AttrReply rep;
    return Call(k, [&](grpc::ClientContext* ctx) { return meta(k)->GetAttr(ctx, r, &rep); });
  }
  static Status Write(int k, const v1::WriteRequest& r) {
    v1::WriteReply rep;
    return Call(k, [&](grpc::ClientContext* ctx) { return data(k)->Write(ctx, r, &rep); });
  }
  static Status Read(int k, const v1::ReadRequest& r) {
    v1::ReadReply rep;
    return Call(k, [&](grpc::ClientContext* ctx) { return data(k)->Read(ctx, r, &rep); });
  }

  // A valid truncate collective for the known file, sent to server k.
  static v1::CollectiveRequest KeepCollective(int k) {
    v1::CollectiveRequest r;
    r.set_op(v1::COLL_STAT);
    r.set_server_count(kServers);
    r.add_targets(static_cast<uint32_t>(k));
    v1::CollFile* f = r.add_files();
    f->set_handle(keep_->handle);
    f->mutable_layout()->set_stripe_size(keep_->layout.stripe_size);
    f->mutable_layout()->set_stripe_count(keep_->layout.stripe_count);
    f->mutable_layout()->set_first_server(keep_->layout.first_server);
    f->mutable_layout()->set_replicas(keep_->layout.replicas);
    f->set_size(Content().size());
    return r;
  }

  struct Stubs {
    std::unique_ptr<v1::Meta::Stub> meta;
    std::unique_ptr<v1::Data::Stub> data;
    std::unique_ptr<v1::Peer::Stub> peer;
    std::unique_ptr<v1::Admin::Stub> admin;
  };
  static TestCluster* cluster_;
  static std::string* secret_;       // the clients' secret
  static std::string* peer_secret_;  // the servers' secret
  static client::Attr* keep_;
  static std::vector<Stubs> stubs_;
};

TestCluster* RawGrpcTest::cluster_ = nullptr;
std::string* RawGrpcTest::secret_ = nullptr;
std::string* RawGrpcTest::peer_secret_ = nullptr;
client::Attr* RawGrpcTest::keep_ = nullptr;
std::vector<RawGrpcTest::Stubs> RawGrpcTest::stubs_;

TEST_F(RawGrpcTest, SecretRequired) {
  v1::StatusRequest req;
  v1::StatusReply rep;
  const std::string wrong(secret_->size(), 'x');
  const std::string prefix = secret_->substr(0, secret_->size() - 1);
  const std::string empty;
  for (const std::string* s : {&wrong, &prefix, &empty}) {
    EXPECT_STATUS(
        Code::kUnauthenticated,
        Call(
            0, [&](grpc::ClientContext* ctx) { return admin(0)->Status(ctx, req, &rep); }, s));
  }
  v1::RemoveObjectRequest ro;
  ro.set_handle(keep_->handle);
  v1::RemoveObjectReply rr;
  for (int k = 0; k < kServers; ++k) {
    EXPECT_STATUS(
        Code::kUnauthenticated,
        Call(
            k, [&](grpc::ClientContext* ctx) { return admin(k)->RemoveObject(ctx, ro, &rr); },
            &wrong));
  }
}

// The clients' secret opens the client-facing services only: every Peer method
// and Admin.RemoveObject answer PERMISSION_DENIED, and nothing changes (the
// fixture's TearDown reads the known file back; its data object is still there).
TEST_F(RawGrpcTest, ClientSecretCannotCallServerMethods) {
  for (int k = 0; k < kServers; ++k) {
    v1::CollectiveRequest coll = KeepCollective(k);
    coll.set_op(v1::COLL_REMOVE);
    v1::CollectiveReply crep;
    EXPECT_STATUS(
        Code::kPermission,
        Call(
            k, [&](grpc::ClientContext* ctx) { return peer(k)->Collective(ctx, coll, &crep); },
            secret_));
    v1::RemoveObjectRequest ro;
    ro.set_handle(keep_->handle);
    v1::RemoveObjectReply rorep;
    EXPECT_STATUS(
        Code::kPermission,
        Call(
            k, [&](grpc::ClientContext* ctx) { return admin(k)->RemoveObject(ctx, ro, &rorep); },
            secret_));
    v1::GetAttrsRequest ga;
    ga.add_handles(keep_->handle);
    v1::GetAttrsReply garep;
    EXPECT_STATUS(
        Code::kPermission,
        Call(
            k, [&](grpc::ClientContext* ctx) { return peer(k)->GetAttrs(ctx, ga, &garep); },
            secret_));
    // The same secret may read: Admin.Status and Meta.GetAttr answer.
    v1::StatusRequest sr;
    v1::StatusReply srep;
    EXPECT_OK(Call(
        k, [&](grpc::ClientContext* ctx) { return admin(k)->Status(ctx, sr, &srep); }, secret_));
  }
  v1::GetAttrRequest gr;
  gr.set_handle(keep_->handle);
  v1::AttrReply arep;
  const int owner = static_cast<int>(ServerOf(keep_->handle));
  EXPECT_OK(Call(
      owner, [&](grpc::ClientContext* ctx) { return meta(owner)->GetAttr(ctx, gr, &arep); },
      secret_));
}

// A Data request naming a forwarded copy (the acting primary's forwarded
// write or sync) is taken from a server only: with the clients' secret it is
// refused; with the servers' the same sync is served.
TEST_F(RawGrpcTest, ForwardedCopiesAreForServersOnly) {
  const int k = static_cast<int>(ServerOf(keep_->handle));
  auto forwarded = [&](auto* req) {
    req->set_handle(keep_->handle);
    req->mutable_copy()->set_slot(1);
    req->mutable_copy()->set_replicas(2);
    req->mutable_copy()->set_forwarded(true);
    req->mutable_copy()->set_orderer(0);
  };
  v1::WriteRequest w;
  forwarded(&w);
  v1::Extent* e = w.add_extents();
  e->set_offset(0);
  e->set_length(4);
  w.set_payload("fwd!");
  v1::WriteReply wrep;
  EXPECT_STATUS(Code::kPermission,
                Call(k, [&](grpc::ClientContext* ctx) { return data(k)->Write(ctx, w, &wrep); },
                     secret_));
  v1::SyncRequest sy;
  forwarded(&sy);
  v1::SyncReply srep;
  EXPECT_STATUS(Code::kPermission,
                Call(k, [&](grpc::ClientContext* ctx) { return data(k)->Sync(ctx, sy, &srep); },
                     secret_));
  EXPECT_OK(Call(k, [&](grpc::ClientContext* ctx) { return data(k)->Sync(ctx, sy, &srep); }));
}

TEST_F(RawGrpcTest, RenameToAServerOutsideTheCluster) {
  v1::CreateRequest cr;
  cr.set_parent(kRootHandle);
  cr.set_name("src");
  cr.set_type(v1::FT_REGULAR);
  cr.set_mode(0644);
  ASSERT_OK(Create(0, cr));
  for (Handle dst : {MakeHandle(kServers, 1), MakeHandle(0xFFFF, 1), MakeHandle(1000, 0)}) {
    v1::RenameRequest r;
    r.set_src_parent(kRootHandle);
    r.set_src_name("src");
    r.set_dst_parent(dst);
    r.set_dst_name("dst");
    EXPECT_STATUS(Code::kStale, Rename(0, r));
  }
  // Source directory on another server than the receiver, unknown flags, bad names.
  v1::RenameRequest r;
  r.set_src_parent(kRootHandle);
  r.set_src_name("src");
  r.set_dst_parent(kRootHandle);
  r.set_dst_name("dst");
  EXPECT_STATUS(Code::kStale, Rename(1, r));
  r.set_flags(0x80000000u);
  EXPECT_STATUS(Code::kInvalid, Rename(0, r));
  r.set_flags(0);
  r.set_dst_name(std::string(1 << 20, 'n'));
  EXPECT_STATUS(Code::kNameTooLong, Rename(0, r));
  r.set_dst_name("");
  EXPECT_STATUS(Code::kInvalid, Rename(0, r));
  r.set_dst_name("a/b");
  EXPECT_STATUS(Code::kInvalid, Rename(0, r));
}

TEST_F(RawGrpcTest, CollectiveTargetLists) {
  for (int k = 0; k < kServers; ++k) {
    ASSERT_OK(Collective(k, KeepCollective(k)));
    v1::CollectiveRequest r = KeepCollective(k);
    r.add_targets(kServers);  // a later target outside the cluster (once thrown on the reactor)
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r = KeepCollective(k);
    r.add_targets((static_cast<uint32_t>(k) + 1) % kServers);
    r.add_targets(0xFFFFFFFFu);
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r = KeepCollective(k);
    r.add_targets((static_cast<uint32_t>(k) + 1) % kServers);
    r.add_targets((static_cast<uint32_t>(k) + 1) % kServers);  // twice
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r = KeepCollective(k);
    r.set_targets(0, (static_cast<uint32_t>(k) + 1) % kServers);  // not the receiver
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r = KeepCollective(k);
    r.clear_targets();
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r = KeepCollective(k);
    r.set_server_count(kServers + 1);
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r = KeepCollective(k);
    r.set_op(static_cast<v1::CollectiveOp>(77));
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
  }
}

TEST_F(RawGrpcTest, CollectiveLayouts) {
  for (int k = 0; k < kServers; ++k) {
    v1::CollectiveRequest r = KeepCollective(k);
    r.set_op(v1::COLL_TRUNCATE);
    r.mutable_files(0)->mutable_layout()->set_stripe_size(0);  // once a division by zero
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r.mutable_files(0)->mutable_layout()->set_stripe_size(keep_->layout.stripe_size);
    r.mutable_files(0)->mutable_layout()->set_stripe_count(0);
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r.mutable_files(0)->mutable_layout()->set_stripe_count(kServers + 5);
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r.mutable_files(0)->mutable_layout()->set_stripe_count(keep_->layout.stripe_count);
    r.mutable_files(0)->mutable_layout()->set_first_server(0xFFFFFFFFu);
    EXPECT_STATUS(Code::kInvalid, Collective(k, r));
    r.mutable_files(0)->mutable_layout()->set_first_server(keep_->layout.first_server);
    r.mutable_files(0)->set_size(~uint64_t{0});
    EXPECT_STATUS(Code::kFileTooBig, Collective(k, r));
    r.mutable_files(0)->set_size(0);
    r.mutable_files(0)->set_handle(MakeHandle(0xFFFF, 1));
    EXPECT_STATUS(Code::kStale, Collective(k, r));
  }
}

TEST_F(RawGrpcTest, DirectoryLayouts) {
  v1::SetAttrRequest ok;
  ok.set_handle(kRootHandle);
  ok.set_valid(256);
  ok.mutable_layout()->set_stripe_size(128 * 1024);
  ok.mutable_layout()->set_stripe_count(2);
  ok.mutable_layout()->set_replicas(1);
  v1::CreateRequest dr;
  dr.set_parent(kRootHandle);
  dr.set_name("layouts");
  dr.set_type(v1::FT_DIRECTORY);
  dr.set_mode(0755);
  v1::AttrReply made;
  ASSERT_OK(Call(0, [&](grpc::ClientContext* ctx) { return meta(0)->Create(ctx, dr, &made); }));
  const Handle d = made.attr().handle();
  const int owner = static_cast<int>(ServerOf(d));
  ok.set_handle(d);
  ASSERT_OK(SetAttr(owner, ok));
  std::vector<v1::SetAttrRequest> bad(5, ok);
  bad[0].mutable_layout()->set_replicas(0);      // once silently made 1
  bad[1].mutable_layout()->set_first_server(2);  // once silently overwritten
  bad[2].mutable_layout()->set_stripe_size(0);
  bad[3].mutable_layout()->set_stripe_size(4097);
  bad[4].mutable_layout()->set_stripe_count(kServers + 1);
  for (const v1::SetAttrRequest& b : bad) {
    SCOPED_TRACE(b.layout().ShortDebugString());
    EXPECT_STATUS(Code::kInvalid, SetAttr(owner, b));
  }
  v1::GetAttrRequest g;
  g.set_handle(d);
  v1::AttrReply after;
  ASSERT_OK(
      Call(owner, [&](grpc::ClientContext* ctx) { return meta(owner)->GetAttr(ctx, g, &after); }));
  EXPECT_EQ(after.attr().layout().stripe_size(), 128u * 1024);
  EXPECT_EQ(after.attr().layout().stripe_count(), 2u);
  EXPECT_EQ(after.attr().layout().replicas(), 1u);
  // Other setattr fields.
  v1::SetAttrRequest s;
  s.set_handle(keep_->handle);
  s.set_valid(1u << 20);
  const int m = static_cast<int>(ServerOf(keep_->handle));
  EXPECT_STATUS(Code::kInvalid, SetAttr(m, s));
  s.set_valid(1);
  s.set_mode(0170644);
  EXPECT_STATUS(Code::kInvalid, SetAttr(m, s));
  s.set_valid(8);
  s.set_size(~uint64_t{0});
  EXPECT_STATUS(Code::kFileTooBig, SetAttr(m, s));
  s.set_valid(32);
  s.mutable_mtime()->set_nsec(0xFFFFFFFFu);
  EXPECT_STATUS(Code::kInvalid, SetAttr(m, s));
}

TEST_F(RawGrpcTest, BadHandles) {
  for (int k = 0; k < kServers; ++k) {
    EXPECT_STATUS(Code::kStale, GetAttr(k, 0));
    EXPECT_STATUS(Code::kStale, GetAttr(k, MakeHandle(kServers, 1)));
    EXPECT_STATUS(Code::kStale, GetAttr(k, ~uint64_t{0}));
    EXPECT_STATUS(Code::kStale,
                  GetAttr(k, MakeHandle((static_cast<uint32_t>(k) + 1) % kServers, 1)));
    v1::LookupRequest l;
    l.set_parent(MakeHandle(0xFFFF, 1));
    l.set_name("x");
    v1::AttrReply rep;
    EXPECT_STATUS(Code::kStale,
                  Call(k, [&](grpc::ClientContext* ctx) { return meta(k)->Lookup(ctx, l, &rep); }));
    v1::DestroyRequest dr;
    dr.set_handle(MakeHandle(4242, 1));
    v1::DestroyReply drep;
    EXPECT_STATUS(Code::kStale, Call(k, [&](grpc::ClientContext* ctx) {
                    return meta(k)->Destroy(ctx, dr, &drep);
                  }));
    v1::LinkRequest lr;
    lr.set_handle(MakeHandle(9999, 3));
    lr.set_new_parent(kRootHandle);
    lr.set_new_name("ln");
    EXPECT_STATUS(Code::kStale,
                  Call(k, [&](grpc::ClientContext* ctx) { return meta(k)->Link(ctx, lr, &rep); }));
    v1::InsertEntryRequest ie;
    ie.set_parent(MakeHandle(static_cast<uint32_t>(k), 1));
    ie.set_name("ie");
    ie.set_handle(MakeHandle(9999, 3));  // would later send AdjustLink to server 9999
    ie.set_type(v1::FT_REGULAR);
    v1::InsertEntryReply irep;
    EXPECT_STATUS(Code::kStale, Call(k, [&](grpc::ClientContext* ctx) {
                    return peer(k)->InsertEntry(ctx, ie, &irep);
                  }));
    v1::AdjustLinkRequest al;
    al.set_handle(keep_->handle);
    al.set_delta(-100);
    v1::AdjustLinkReply arep;
    EXPECT_FALSE(Call(k, [&](grpc::ClientContext* ctx) {
                   return peer(k)->AdjustLink(ctx, al, &arep);
                 }).ok());
    v1::RemoveObjectRequest ro;
    ro.set_handle(MakeHandle(0xFFFF, 1));
    v1::RemoveObjectReply rorep;
    EXPECT_STATUS(Code::kStale, Call(k, [&](grpc::ClientContext* ctx) {
                    return admin(k)->RemoveObject(ctx, ro, &rorep);
                  }));
    v1::GetAttrsRequest ga;
    for (int i = 0; i < 70000; ++i) ga.add_handles(~uint64_t{0});
    v1::GetAttrsReply garep;
    EXPECT_STATUS(Code::kTooBig, Call(k, [&](grpc::ClientContext* ctx) {
                    return peer(k)->GetAttrs(ctx, ga, &garep);
                  }));
    v1::MakeDirRequest md;
    md.set_parent(kRootHandle);
    md.mutable_attr()->set_type(v1::FT_REGULAR);
    v1::AttrOnly mrep;
    EXPECT_STATUS(Code::kInvalid, Call(k, [&](grpc::ClientContext* ctx) {
                    return peer(k)->MakeDir(ctx, md, &mrep);
                  }));
  }
}

TEST_F(RawGrpcTest, NamesAndCreateFields) {
  v1::CreateRequest r;
  r.set_parent(kRootHandle);
  r.set_type(v1::FT_REGULAR);
  r.set_mode(0644);
  for (const std::string& name : {std::string(), std::string(256, 'n'), std::string(4 << 20, 'n'),
                                  std::string("a\0b", 3), std::string("."), std::string("..")}) {
    r.set_name(name);
    Status s = Create(0, r);
    EXPECT_TRUE(s.code() == Code::kInvalid || s.code() == Code::kNameTooLong) << s.ToString();
  }
  r.set_name("fields");
  r.set_type(static_cast<v1::FileType>(-3));
  EXPECT_STATUS(Code::kInvalid, Create(0, r));
  r.set_type(v1::FT_REGULAR);
  r.set_mode(0xFFFFFFFFu);
  EXPECT_STATUS(Code::kInvalid, Create(0, r));
  r.set_mode(0644);
  r.set_type(v1::FT_SYMLINK);
  r.set_symlink_target(std::string(1 << 20, 't'));
  EXPECT_STATUS(Code::kInvalid, Create(0, r));
  r.set_type(v1::FT_REGULAR);
  for (int i = 0; i < 100000; ++i) r.mutable_caller()->add_groups(static_cast<uint32_t>(i));
  EXPECT_STATUS(Code::kInvalid, Create(0, r));
  // Xattr flags and sizes.
  v1::XattrRequest x;
  x.set_handle(keep_->handle);
  x.set_name("user.k");
  x.set_flags(4);  // unknown bits were once ignored
  v1::XattrReply xr;
  const int m = static_cast<int>(ServerOf(keep_->handle));
  EXPECT_STATUS(Code::kInvalid,
                Call(m, [&](grpc::ClientContext* ctx) { return meta(m)->SetXattr(ctx, x, &xr); }));
  x.set_flags(0);
  x.set_value(std::string(1 << 20, 'v'));
  EXPECT_STATUS(Code::kTooBig,
                Call(m, [&](grpc::ClientContext* ctx) { return meta(m)->SetXattr(ctx, x, &xr); }));
  x.set_value("");
  x.set_name(std::string(1 << 16, 'u'));
  EXPECT_STATUS(Code::kRange,
                Call(m, [&](grpc::ClientContext* ctx) { return meta(m)->GetXattr(ctx, x, &xr); }));
  v1::ReadDirRequest rd;
  rd.set_handle(kRootHandle);
  rd.set_after(std::string(1 << 16, 'a'));
  rd.set_max_entries(0xFFFFFFFFu);
  v1::ReadDirReply rdr;
  EXPECT_STATUS(Code::kNameTooLong,
                Call(0, [&](grpc::ClientContext* ctx) { return meta(0)->ReadDir(ctx, rd, &rdr); }));
}

TEST_F(RawGrpcTest, HugeExtents) {
  for (int k = 0; k < kServers; ++k) {
    v1::WriteRequest w;
    w.set_handle(keep_->handle);
    v1::Extent* e = w.add_extents();
    e->set_offset(uint64_t{1} << 63);
    e->set_length(uint64_t{1} << 63);
    EXPECT_STATUS(Code::kFileTooBig, Write(k, w));
    e->set_offset(0);
    e->set_length(100);
    w.set_payload("short");
    EXPECT_STATUS(Code::kInvalid, Write(k, w));
    v1::ReadRequest r;
    r.set_handle(keep_->handle);
    r.add_extents()->set_length(kMaxIoBytes);
    r.add_extents()->set_length(kMaxIoBytes);
    EXPECT_STATUS(Code::kTooBig, Read(k, r));
    r.clear_extents();
    for (size_t i = 0; i <= kMaxExtents; ++i) r.add_extents()->set_length(0);
    EXPECT_STATUS(Code::kTooBig, Read(k, r));
    r.clear_extents();
    r.set_handle(MakeHandle(0xFFFF, 9));
    EXPECT_STATUS(Code::kStale, Read(k, r));
  }
}

// Peer.ResolveRename (the cross-server rename's fence): server role only,
// intent ids validated, and an intent resolved as not applied is refused by a
// later InsertEntry carrying it (nothing inserted).
TEST_F(RawGrpcTest, ResolveRenameIsServerOnlyValidatedAndFences) {
  const int k = 0;
  auto resolve = [&](uint64_t id, const std::string* secret, v1::ResolveRenameReply* rep) {
    v1::ResolveRenameRequest q;
    q.set_intent_id(id);
    return Call(
        k, [&](grpc::ClientContext* ctx) { return peer(k)->ResolveRename(ctx, q, rep); }, secret);
  };
  v1::ResolveRenameReply rep;
  const uint64_t id = MakeHandle(1, 424242);  // an intent of server 1
  EXPECT_STATUS(Code::kPermission, resolve(id, secret_, &rep));
  EXPECT_STATUS(Code::kInvalid, resolve(0, nullptr, &rep));
  EXPECT_STATUS(Code::kInvalid, resolve(MakeHandle(kServers, 1), nullptr, &rep));
  EXPECT_STATUS(Code::kInvalid, resolve(MakeHandle(0xFFFF, 1), nullptr, &rep));
  EXPECT_STATUS(Code::kInvalid, resolve(MakeHandle(k, 1), nullptr, &rep));  // its own id
  ASSERT_OK(resolve(id, nullptr, &rep));
  EXPECT_FALSE(rep.applied());
  ASSERT_OK(resolve(id, nullptr, &rep));  // asked again: the same answer
  EXPECT_FALSE(rep.applied());

  v1::InsertEntryRequest ie;
  ie.set_parent(kRootHandle);
  ie.set_name("fenced");
  ie.set_handle(keep_->handle);
  ie.set_type(v1::FT_REGULAR);
  ie.set_intent_id(id);
  v1::InsertEntryReply irep;
  EXPECT_STATUS(Code::kCancelled, Call(k, [&](grpc::ClientContext* ctx) {
                  return peer(k)->InsertEntry(ctx, ie, &irep);
                }));
  ie.set_intent_id(MakeHandle(9999, 1));
  EXPECT_STATUS(Code::kInvalid, Call(k, [&](grpc::ClientContext* ctx) {
                  return peer(k)->InsertEntry(ctx, ie, &irep);
                }));
  v1::LookupRequest l;
  l.set_parent(kRootHandle);
  l.set_name("fenced");
  v1::AttrReply arep;
  EXPECT_STATUS(Code::kNotFound,
                Call(k, [&](grpc::ClientContext* ctx) { return meta(k)->Lookup(ctx, l, &arep); }));

  v1::AdjustLinkRequest al;
  al.set_handle(keep_->handle);
  al.set_delta(-1);
  al.set_op_id(MakeHandle(9999, 1));
  v1::AdjustLinkReply alrep;
  const int owner = static_cast<int>(ServerOf(keep_->handle));
  EXPECT_STATUS(Code::kInvalid, Call(owner, [&](grpc::ClientContext* ctx) {
                  return peer(owner)->AdjustLink(ctx, al, &alrep);
                }));
}

}  // namespace
}  // namespace clf::testing
