// Request validation (server/service/validate.h): each malformed field is
// refused with the documented code; well-formed requests pass.
#include "server/service/auth.h"
#include "server/service/validate.h"

#include "common/config.h"
#include "common/layout.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

constexpr ClusterView kView{3, 1};  // three servers; this is server 1
const Handle kMine = MakeHandle(1, 7);
const Handle kOther = MakeHandle(2, 7);
const Handle kNoServer = MakeHandle(3, 7);
const Handle kFarServer = MakeHandle(0xFFFF, 7);

v1::Layout GoodLayout() {
  v1::Layout l;
  l.set_stripe_size(65536);
  l.set_stripe_count(2);
  l.set_first_server(1);
  l.set_replicas(1);
  return l;
}

v1::CollectiveRequest GoodCollective() {
  v1::CollectiveRequest r;
  r.set_op(v1::COLL_TRUNCATE);
  r.set_server_count(3);
  r.add_targets(1);
  r.add_targets(2);
  v1::CollFile* f = r.add_files();
  f->set_handle(kOther);
  *f->mutable_layout() = GoodLayout();
  f->set_size(12345);
  return r;
}

TEST(AuthTest, ServerOnlyMethods) {
  for (const char* m : {"Peer.Collective", "Peer.MakeDir", "Peer.RemoveDir", "Peer.AdjustLink",
                        "Peer.GetAttrs", "Peer.InsertEntry", "Admin.RemoveObject"}) {
    EXPECT_EQ(RequiredRole(m), Role::kServer) << m;
  }
  for (const char* m :
       {"Meta.Lookup", "Meta.Create", "Data.Write", "Admin.Status", "Admin.ListObjects", "Lock"}) {
    EXPECT_EQ(RequiredRole(m), Role::kClient) << m;
  }
}

TEST(ValidateTest, SecretComparison) {
  EXPECT_TRUE(SecretMatches("s3cret", "s3cret"));
  EXPECT_FALSE(SecretMatches("s3cres", "s3cret"));
  EXPECT_FALSE(SecretMatches("s3cre", "s3cret"));
  EXPECT_FALSE(SecretMatches("s3crett", "s3cret"));
  EXPECT_FALSE(SecretMatches("", "s3cret"));
  EXPECT_FALSE(SecretMatches(std::string("s3cret\0", 7), "s3cret"));
}

TEST(ValidateTest, CollectiveTargets) {
  EXPECT_OK(Validate(GoodCollective(), kView));
  v1::CollectiveRequest r = GoodCollective();
  r.add_targets(3);  // a later target outside the cluster (once reached the reactor's stubs_.at)
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.set_targets(1, 0xFFFFFFFFu);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.add_targets(2);  // twice
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.clear_targets();
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.set_targets(0, 0);  // not the receiver first
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.set_server_count(4);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.set_op(v1::COLL_UNKNOWN);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.set_budget_ms(3'600'001);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_budget_ms(3'600'000);
  EXPECT_OK(Validate(r, kView));
}

TEST(ValidateTest, CollectiveFiles) {
  v1::CollectiveRequest r = GoodCollective();
  r.mutable_files(0)->mutable_layout()->set_stripe_size(0);  // once divided by zero in LocalSizeFor
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.mutable_files(0)->mutable_layout()->set_stripe_count(0);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.mutable_files(0)->mutable_layout()->set_stripe_count(4);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.mutable_files(0)->mutable_layout()->set_first_server(3);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.mutable_files(0)->mutable_layout()->set_replicas(0);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r = GoodCollective();
  r.mutable_files(0)->set_handle(kNoServer);
  EXPECT_STATUS(Code::kStale, Validate(r, kView));
  r = GoodCollective();
  r.mutable_files(0)->set_size(kMaxFileSize + 1);
  EXPECT_STATUS(Code::kFileTooBig, Validate(r, kView));
  r = GoodCollective();
  for (int i = 0; i < kMaxCollectiveFiles; ++i) *r.add_files() = r.files(0);
  EXPECT_STATUS(Code::kTooBig, Validate(r, kView));
}

TEST(ValidateTest, RenameDestinationOutsideTheCluster) {
  v1::RenameRequest r;
  r.set_src_parent(kMine);
  r.set_src_name("a");
  r.set_dst_parent(kOther);
  r.set_dst_name("b");
  EXPECT_OK(Validate(r, kView));
  r.set_dst_parent(kNoServer);
  EXPECT_STATUS(Code::kStale, Validate(r, kView));
  r.set_dst_parent(kFarServer);
  EXPECT_STATUS(Code::kStale, Validate(r, kView));
  r.set_dst_parent(kOther);
  r.set_src_parent(kOther);  // the source directory lives elsewhere
  EXPECT_STATUS(Code::kStale, Validate(r, kView));
  r.set_src_parent(kMine);
  r.set_flags(4);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_flags(3);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_flags(0);
  r.set_dst_name(std::string(256, 'n'));
  EXPECT_STATUS(Code::kNameTooLong, Validate(r, kView));
  r.set_dst_name("");
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
}

TEST(ValidateTest, DirectoryLayout) {
  v1::SetAttrRequest r;
  r.set_handle(kMine);
  r.set_valid(256);
  *r.mutable_layout() = GoodLayout();
  r.mutable_layout()->set_first_server(0);
  EXPECT_OK(Validate(r, kView));
  r.mutable_layout()->set_stripe_count(0);  // all servers
  EXPECT_OK(Validate(r, kView));
  r.mutable_layout()->set_replicas(0);  // once silently made 1
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.mutable_layout()->set_replicas(3);  // as many copies as servers
  EXPECT_OK(Validate(r, kView));
  r.mutable_layout()->set_replicas(4);  // more copies than servers (and than kMaxReplicas)
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.mutable_layout()->set_replicas(1);
  r.mutable_layout()->set_first_server(2);  // once silently overwritten
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.mutable_layout()->set_first_server(0);
  r.mutable_layout()->set_stripe_size(0);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  // The layout is not looked at unless its bit is set.
  r.set_valid(0);
  EXPECT_OK(Validate(r, kView));
}

TEST(ValidateTest, SetAttrFields) {
  v1::SetAttrRequest r;
  r.set_handle(kMine);
  r.set_valid(1 | 8 | 16 | 128);
  r.set_mode(04755);
  r.set_size(kMaxFileSize);
  EXPECT_OK(Validate(r, kView));
  r.set_valid(1u << 13);  // past SETATTR_CHOWN_NOTHING (4096)
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_valid(1);
  r.set_mode(010000);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_valid(8);
  r.set_size(kMaxFileSize + 1);
  EXPECT_STATUS(Code::kFileTooBig, Validate(r, kView));
  r.set_valid(16);
  r.mutable_atime()->set_nsec(1000000000);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_valid(0);
  r.set_handle(0);
  EXPECT_STATUS(Code::kStale, Validate(r, kView));
  r.set_handle(kFarServer);
  EXPECT_STATUS(Code::kStale, Validate(r, kView));
}

TEST(ValidateTest, XattrFlagsAndSizes) {
  v1::XattrRequest r;
  r.set_handle(kMine);
  r.set_name("user.a");
  r.set_value("v");
  r.set_flags(1);
  EXPECT_OK(Validate(r, XattrCall::kSet, kView));
  r.set_flags(4);  // unknown bits were once ignored
  EXPECT_STATUS(Code::kInvalid, Validate(r, XattrCall::kSet, kView));
  r.set_flags(3);
  EXPECT_STATUS(Code::kInvalid, Validate(r, XattrCall::kSet, kView));
  r.set_flags(0);
  r.set_value(std::string(kMaxXattrValueBytes + 1, 'v'));
  EXPECT_STATUS(Code::kTooBig, Validate(r, XattrCall::kSet, kView));
  r.set_value("");
  r.set_name(std::string(256, 'x'));
  EXPECT_STATUS(Code::kRange, Validate(r, XattrCall::kGet, kView));
  r.set_name("");
  EXPECT_STATUS(Code::kInvalid, Validate(r, XattrCall::kRemove, kView));
  EXPECT_OK(Validate(r, XattrCall::kList, kView));
  r.set_flags(1);
  EXPECT_STATUS(Code::kInvalid, Validate(r, XattrCall::kList, kView));
}

TEST(ValidateTest, DataExtents) {
  v1::WriteRequest w;
  w.set_handle(kOther);  // data objects of any server's files
  v1::Extent* e = w.add_extents();
  e->set_offset(kMaxFileSize - 4);
  e->set_length(4);
  w.set_payload("abcd");
  EXPECT_OK(Validate(w, kView));
  e->set_length(5);
  w.set_payload("abcde");
  EXPECT_STATUS(Code::kFileTooBig, Validate(w, kView));
  e->set_offset(~uint64_t{0});
  e->set_length(~uint64_t{0});
  EXPECT_STATUS(Code::kFileTooBig, Validate(w, kView));
  e->set_offset(0);
  e->set_length(4);
  EXPECT_STATUS(Code::kInvalid, Validate(w, kView));  // payload 5 bytes, extent 4
  w.set_handle(kNoServer);
  w.set_payload("abcd");
  EXPECT_STATUS(Code::kStale, Validate(w, kView));
  v1::ReadRequest r;
  r.set_handle(kOther);
  r.add_extents()->set_length(kMaxIoBytes);
  EXPECT_OK(Validate(r, kView));
  r.add_extents()->set_length(1);
  EXPECT_STATUS(Code::kTooBig, Validate(r, kView));
}

TEST(ValidateTest, CreateFields) {
  v1::CreateRequest r;
  r.set_parent(kMine);
  r.set_name("f");
  r.set_type(v1::FT_REGULAR);
  r.set_mode(0644);
  EXPECT_OK(Validate(r, kView));
  r.set_type(static_cast<v1::FileType>(99));
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_type(v1::FT_REGULAR);
  r.set_rdev(5);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_rdev(0);
  r.set_symlink_target("t");
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_type(v1::FT_SYMLINK);
  EXPECT_OK(Validate(r, kView));
  r.set_symlink_target(std::string(kMaxSymlinkBytes + 1, 't'));
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
  r.set_type(v1::FT_REGULAR);
  r.clear_symlink_target();
  r.set_name(std::string(100000, 'n'));
  EXPECT_STATUS(Code::kNameTooLong, Validate(r, kView));
  r.set_name("f");
  r.set_parent(kOther);
  EXPECT_STATUS(Code::kStale, Validate(r, kView));
  r.set_parent(kMine);
  for (int i = 0; i <= kMaxCallerGroups; ++i) r.mutable_caller()->add_groups(1);
  EXPECT_STATUS(Code::kInvalid, Validate(r, kView));
}

TEST(ValidateTest, PeerRequests) {
  v1::AdjustLinkRequest a;
  a.set_handle(kMine);
  a.set_delta(-1);
  EXPECT_OK(Validate(a, kView));
  a.set_delta(-1000);
  EXPECT_STATUS(Code::kInvalid, Validate(a, kView));
  v1::InsertEntryRequest ie;
  ie.set_parent(kMine);
  ie.set_name("n");
  ie.set_handle(kOther);
  ie.set_type(v1::FT_REGULAR);
  EXPECT_OK(Validate(ie, kView));
  ie.set_handle(kNoServer);  // would later make AdjustLink reach a server that does not exist
  EXPECT_STATUS(Code::kStale, Validate(ie, kView));
  ie.set_handle(kOther);
  ie.set_flags(2);  // exchange is never forwarded
  EXPECT_STATUS(Code::kInvalid, Validate(ie, kView));
  v1::MakeDirRequest md;
  md.set_parent(kOther);
  md.mutable_attr()->set_type(v1::FT_DIRECTORY);
  md.mutable_attr()->set_mode(0755);
  EXPECT_OK(Validate(md, kView));
  md.mutable_attr()->set_handle(kMine);
  EXPECT_STATUS(Code::kInvalid, Validate(md, kView));
  v1::RemoveObjectRequest ro;
  ro.set_handle(kFarServer);
  EXPECT_STATUS(Code::kStale, Validate(ro, kView));
}

// The cross-server rename's pruning mark and fsck's pending-rename requests.
TEST(ValidateTest, RenameRecordRequests) {
  v1::ForgetRenamesRequest f;
  f.set_settled_below(MakeHandle(2, 7));  // another server's intents
  EXPECT_OK(Validate(f, kView));
  f.set_settled_below(MakeHandle(1, 7));  // the receiver's own
  EXPECT_STATUS(Code::kInvalid, Validate(f, kView));
  f.set_settled_below(MakeHandle(3, 7));  // no such server
  EXPECT_STATUS(Code::kInvalid, Validate(f, kView));
  f.set_settled_below(MakeHandle(2, 0));
  EXPECT_STATUS(Code::kInvalid, Validate(f, kView));
  v1::FsckScanRequest scan;
  scan.set_kind(v1::FSCK_SCAN_RENAMES);
  scan.set_max(10);
  EXPECT_OK(Validate(scan, kView));
  scan.set_kind(static_cast<v1::FsckScanKind>(v1::FSCK_SCAN_RENAMES + 1));
  EXPECT_STATUS(Code::kInvalid, Validate(scan, kView));
  v1::FsckRepairRequest settle;
  settle.set_op(v1::FSCK_REPAIR_SETTLE_RENAME);
  settle.set_handle(MakeHandle(0, 5));  // any server's intent id (link drops: another's)
  EXPECT_OK(Validate(settle, kView));
  settle.set_handle(0);
  EXPECT_STATUS(Code::kInvalid, Validate(settle, kView));
  settle.set_handle(MakeHandle(3, 5));
  EXPECT_STATUS(Code::kInvalid, Validate(settle, kView));
}

}  // namespace
}  // namespace clf::server
