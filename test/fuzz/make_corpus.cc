// Writes the seed corpus of the fuzz harnesses: one well-formed request per
// RPC (first byte: the harness's RPC selector), naming the handles of the
// tree fuzz_server.cc creates (1 root, 2 dir, 3 file, 4 dir/inner, 5
// dir/link). Usage: make_corpus OUTDIR (writes OUTDIR/<target>/<name>).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "clf/v1/admin.pb.h"
#include "clf/v1/baseline.pb.h"
#include "clf/v1/data.pb.h"
#include "clf/v1/lock.pb.h"
#include "clf/v1/meta.pb.h"
#include "clf/v1/peer.pb.h"
#include "common/datatype.h"
#include "common/handle.h"
#include "common/transport/tcp_protocol.h"

namespace {

std::filesystem::path g_out;

void Put(const char* target, const std::string& name, int selector,
         const google::protobuf::Message& m) {
  std::filesystem::create_directories(g_out / target);
  std::ofstream f(g_out / target / name, std::ios::binary);
  f.put(static_cast<char>(selector));
  f << m.SerializeAsString();
}

void SetCaller(clf::v1::Caller* c, uint32_t uid) {
  c->set_uid(uid);
  c->set_gid(uid);
  c->add_groups(uid + 1);
}

// lock_fuzz: a sequence of calls, [selector][length][request] each, after the
// mode byte (bit 0: grace period).
class LockSeq {
 public:
  explicit LockSeq(bool grace) { bytes_.push_back(grace ? 1 : 0); }
  // rpc as in lock_fuzz.cc; bind: 0 as is, 1 session A, 2 session B, 3 previous session 1.
  LockSeq& Add(int rpc, int bind, const google::protobuf::Message& m) {
    std::string b = m.SerializeAsString();
    if (b.size() > 255) std::abort();
    bytes_.push_back(static_cast<char>(bind * 16 + rpc));
    bytes_.push_back(static_cast<char>(b.size()));
    bytes_ += b;
    return *this;
  }
  void Put(const std::string& name) const {
    std::filesystem::create_directories(g_out / "lock");
    std::ofstream(g_out / "lock" / name, std::ios::binary) << bytes_;
  }

 private:
  std::string bytes_;
};

// frame_fuzz: data channel frames as a client sends them.
std::string Frame(uint16_t op, uint64_t handle, const std::vector<std::pair<uint64_t, uint64_t>>& ex,
                  const std::string& payload, uint32_t flags = 0, uint32_t tag = 0) {
  clf::transport::tcp::FrameHeader h;
  h.op = op;
  h.flags = flags;
  h.request_id = 7;
  h.handle = handle;
  h.extent_count = static_cast<uint32_t>(ex.size());
  h.aux = tag;
  h.payload_len = payload.size();
  clf::transport::tcp::HeaderBytes hb = clf::transport::tcp::Encode(h);
  std::string out(reinterpret_cast<const char*>(hb.data()), hb.size());
  for (auto [off, len] : ex) {
    out.append(reinterpret_cast<const char*>(&off), 8);
    out.append(reinterpret_cast<const char*>(&len), 8);
  }
  return out + payload;
}

void PutRaw(const char* target, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(g_out / target);
  std::ofstream(g_out / target / name, std::ios::binary) << bytes;
}

clf::v1::Layout Layout4k() {
  clf::v1::Layout l;
  l.set_stripe_size(4096);
  l.set_stripe_count(1);
  l.set_replicas(1);
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace clf::v1;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus OUTDIR\n");
    return 2;
  }
  g_out = argv[1];
  // Meta (selectors as in meta_fuzz.cc).
  LookupRequest lk;
  lk.set_parent(2);
  lk.set_name("inner");
  SetCaller(lk.mutable_caller(), 1000);
  Put("meta", "lookup", 0, lk);
  GetAttrRequest ga;
  ga.set_handle(3);
  Put("meta", "getattr", 1, ga);
  SetAttrRequest sa;
  sa.set_handle(3);
  sa.set_valid(1 | 8 | 64 | 128);
  sa.set_mode(04755);
  sa.set_size(10000);
  SetCaller(sa.mutable_caller(), 0);
  Put("meta", "setattr", 2, sa);
  SetAttrRequest sl;
  sl.set_handle(2);
  sl.set_valid(256);
  *sl.mutable_layout() = Layout4k();
  Put("meta", "setattr_layout", 2, sl);
  CreateRequest cr;
  cr.set_parent(2);
  cr.set_name("new");
  cr.set_type(FT_REGULAR);
  cr.set_mode(0644);
  Put("meta", "create", 3, cr);
  cr.set_type(FT_SYMLINK);
  cr.set_symlink_target("somewhere");
  Put("meta", "symlink", 3, cr);
  LinkRequest ln;
  ln.set_handle(3);
  ln.set_new_parent(2);
  ln.set_new_name("hard");
  Put("meta", "link", 4, ln);
  RemoveRequest rm;
  rm.set_parent(2);
  rm.set_name("inner");
  rm.set_keep_orphan(true);
  Put("meta", "remove", 5, rm);
  RenameRequest rn;
  rn.set_src_parent(1);
  rn.set_src_name("file");
  rn.set_dst_parent(2);
  rn.set_dst_name("moved");
  Put("meta", "rename", 6, rn);
  rn.set_flags(2);
  Put("meta", "rename_exchange", 6, rn);
  ReadDirRequest rd;
  rd.set_handle(1);
  rd.set_plus(true);
  rd.set_max_entries(10);
  Put("meta", "readdir", 7, rd);
  GetAttrRequest rl;
  rl.set_handle(5);
  Put("meta", "readlink", 8, rl);
  XattrRequest x;
  x.set_handle(3);
  x.set_name("user.k");
  Put("meta", "getxattr", 9, x);
  x.set_value("value");
  x.set_flags(1);
  Put("meta", "setxattr", 10, x);
  XattrRequest xl;
  xl.set_handle(3);
  Put("meta", "listxattr", 11, xl);
  x.clear_value();
  x.set_flags(0);
  Put("meta", "removexattr", 12, x);
  DestroyRequest ds;
  ds.set_handle(4);
  Put("meta", "destroy", 13, ds);
  // Data.
  WriteRequest w;
  w.set_handle(3);
  Extent* e = w.add_extents();
  e->set_offset(100);
  e->set_length(4);
  w.set_payload("abcd");
  w.set_sync(true);
  Put("data", "write", 0, w);
  ReadRequest r;
  r.set_handle(3);
  Extent* re = r.add_extents();
  re->set_offset(0);
  re->set_length(8192);
  Put("data", "read", 1, r);
  SyncRequest sy;
  sy.set_handle(3);
  Put("data", "sync", 2, sy);
  // Peer.
  for (int op = COLL_CREATE; op <= COLL_TRUNCATE; ++op) {
    CollectiveRequest c;
    c.set_op(static_cast<CollectiveOp>(op));
    c.add_targets(0);
    c.set_server_count(1);
    CollFile* f = c.add_files();
    f->set_handle(op == COLL_CREATE ? 77 : 3);
    *f->mutable_layout() = Layout4k();
    f->set_size(6000);
    Put("peer", "collective" + std::to_string(op), 0, c);
  }
  MakeDirRequest md;
  md.set_parent(1);
  md.mutable_attr()->set_type(FT_DIRECTORY);
  md.mutable_attr()->set_mode(0700);
  Put("peer", "makedir", 1, md);
  RemoveDirRequest rdr;
  rdr.set_handle(2);
  Put("peer", "removedir", 2, rdr);
  AdjustLinkRequest al;
  al.set_handle(3);
  al.set_delta(1);
  Put("peer", "adjustlink", 3, al);
  GetAttrsRequest gas;
  for (uint64_t h = 1; h <= 6; ++h) gas.add_handles(h);
  Put("peer", "getattrs", 4, gas);
  InsertEntryRequest ie;
  ie.set_parent(2);
  ie.set_name("inserted");
  ie.set_handle(3);
  ie.set_type(FT_REGULAR);
  Put("peer", "insertentry", 5, ie);
  // Admin.
  Put("admin", "status", 0, StatusRequest());
  Put("admin", "listobjects", 1, ListObjectsRequest());
  RemoveObjectRequest ro;
  ro.set_handle(3);
  Put("admin", "removeobject", 2, ro);
  for (int k = FSCK_SCAN_ENTRIES; k <= FSCK_SCAN_DATA; ++k) {
    FsckScanRequest fs;
    fs.set_kind(static_cast<FsckScanKind>(k));
    fs.set_max(k == FSCK_SCAN_ENTRIES ? 2 : 100);
    if (k == FSCK_SCAN_ENTRIES) fs.mutable_after()->set_handle(1);
    Put("admin", "fsckscan" + std::to_string(k), 3, fs);
  }
  FsckRepairRequest fr;
  fr.set_op(FSCK_REPAIR_REMOVE_ENTRY);
  fr.set_parent(2);
  fr.set_name("inner");
  fr.set_handle(4);
  Put("admin", "fsck_remove_entry", 4, fr);
  fr.set_op(FSCK_REPAIR_ADD_ENTRY);
  fr.set_name("again");
  fr.set_type(FT_REGULAR);
  Put("admin", "fsck_add_entry", 4, fr);
  FsckRepairRequest fn;
  fn.set_op(FSCK_REPAIR_SET_NLINK);
  fn.set_handle(3);
  fn.set_nlink(2);
  fn.set_expect_nlink(1);
  Put("admin", "fsck_set_nlink", 4, fn);
  fn.set_op(FSCK_REPAIR_DROP_ORPHAN);
  Put("admin", "fsck_drop_orphan", 4, fn);
  fn.set_op(FSCK_REPAIR_CLEAR_BLOCKS);
  fn.set_expect_blocks(16);
  Put("admin", "fsck_clear_blocks", 4, fn);

  // Meta: DirLease (15) and Commit (16; 16 + 17: with the leases granted first).
  DirLeaseRequest dl;
  dl.set_dir(2);
  dl.set_handles_wanted(4);
  dl.set_with_attrs(true);
  Put("meta", "dirlease", 15, dl);
  dl.set_op(DirLeaseRequest::RELEASE);
  Put("meta", "dirlease_release", 15, dl);
  CommitRequest cm;
  CreateRequest* cc = cm.add_ops()->mutable_create();
  cc->set_parent(2);
  cc->set_name("committed");
  cc->set_type(FT_REGULAR);
  cc->set_mode(0644);
  cc->set_handle(1000);
  for (const char* n : {"inner", "committed"}) {
    RemoveRequest* cr2 = cm.add_ops()->mutable_remove();
    cr2->set_parent(2);
    cr2->set_name(n);
  }
  SetAttrRequest* cs = cm.add_ops()->mutable_setattr();
  cs->set_handle(3);
  cs->set_valid(1);
  cs->set_mode(0600);
  ReportWriteRequest* rw = cm.add_ops()->mutable_report();
  rw->set_handle(3);
  rw->set_wrote(true);
  rw->set_size(9000);
  rw->set_refresh(true);
  Put("meta", "commit", 16, cm);
  Put("meta", "commit_leased", 16 + 17, cm);

  // Peer: ResolveRename (6), InsertEntry with an intent id of server 1 (7;
  // 7 + 12: ResolveRename of that id first), ForgetRenames (8), Replicas (9),
  // ReplicasChanged (10) and AnnounceStore (11).
  ResolveRenameRequest rr;
  rr.set_intent_id(clf::MakeHandle(1, 42));
  Put("peer", "resolverename", 6, rr);
  ie.set_intent_id(clf::MakeHandle(1, 43));
  ie.set_name("intent");
  Put("peer", "insertentry_intent", 7, ie);
  ie.set_intent_id(clf::MakeHandle(1, 44));
  Put("peer", "insertentry_aborted", 7 + 12, ie);
  ForgetRenamesRequest forget;
  forget.set_settled_below(clf::MakeHandle(1, 45));
  Put("peer", "forgetrenames", 8, forget);
  ReplicasRequest reps;
  reps.set_handle(3);
  Put("peer", "replicas_get", 9, reps);
  reps.set_op(REPLICAS_MARK_STALE);
  reps.mutable_copy()->set_primary(1);
  reps.mutable_copy()->set_slot(1);
  Put("peer", "replicas_mark", 9, reps);
  ReplicasChangedRequest rch;
  rch.set_handle(3);
  Put("peer", "replicas_changed", 10, rch);
  AnnounceStoreRequest lost;
  lost.set_server(2);
  lost.set_fresh(true);
  Put("peer", "announcestore", 11, lost);

  // Baseline (selectors as in baseline_fuzz.cc; + 8: the harness supplies the
  // reserved handle or signs the capability).
  ReserveRequest rv;
  rv.set_parent(2);
  SetCaller(rv.mutable_caller(), 0);
  Put("baseline", "reserve", 0, rv);
  CreateRequest bc;
  bc.set_parent(2);
  bc.set_name("bfile");
  bc.set_type(FT_REGULAR);
  bc.set_mode(0644);
  Put("baseline", "create", 1 + 8, bc);
  RemoveRequest bu;
  bu.set_parent(2);
  bu.set_name("inner");
  Put("baseline", "unlink", 2, bu);
  ObjectRequest ob;
  ob.mutable_cap()->set_handle(3);
  ob.mutable_cap()->set_op(CAP_CREATE);
  ob.mutable_cap()->set_mac(std::string(32, 'm'));
  Put("baseline", "createobject", 3 + 8, ob);
  Put("baseline", "createobject_unsigned", 3, ob);
  ob.mutable_cap()->set_op(CAP_REMOVE);
  Put("baseline", "removeobject", 4 + 8, ob);
  StatObjectRequest so;
  so.set_handle(3);
  Put("baseline", "statobject", 5, so);

  // Lock: sequences (rpc numbers as in lock_fuzz.cc).
  {
    AcquireRequest whole;
    whole.set_handle(3);
    whole.set_kind(LOCK_WHOLE_FILE);
    whole.set_mode(LOCK_EXCLUSIVE);
    AcquireRequest range = whole;
    range.set_kind(LOCK_RANGE);
    range.mutable_range()->set_offset(100);
    range.mutable_range()->set_length(50);
    range.set_wait(true);
    range.set_wait_ms(1000);
    AcquireRequest list = whole;
    list.set_kind(LOCK_LIST);
    list.set_mode(LOCK_SHARED);
    for (int i = 0; i < 4; ++i) {
      LockExtent* e = list.add_extents();
      e->set_offset(i * 1000);
      e->set_length(10);
    }
    AcquireRequest pat = whole;
    pat.set_kind(LOCK_PATTERN);
    StridedLevel* l0 = pat.add_pattern();
    l0->set_offset(0);
    l0->set_block_length(64);
    l0->set_stride(4096);
    l0->set_count(16);
    ReleaseRequest rel;
    rel.set_lock_id(1);
    ListLocksRequest ll;
    LockSeq(false).Add(4, 1, whole).Add(4, 2, range).Add(10, 0, ll).Add(5, 1, rel).Add(10, 0, ll)
        .Put("list_conflict");
    LockSeq(false).Add(4, 1, list).Add(4, 2, pat).Add(6, 2, whole).Add(10, 0, ll).Put("list_pattern");
    PosixLockRequest pw;
    pw.set_handle(3);
    pw.set_owner(11);
    pw.set_op(POSIX_WRITE);
    pw.set_start(0);
    pw.set_length(100);
    pw.set_pid(1234);
    PosixLockRequest pr = pw;
    pr.set_owner(12);
    pr.set_op(POSIX_READ);
    pr.set_start(50);
    pr.set_wait(true);
    PosixLockRequest pu = pw;
    pu.set_op(POSIX_UNLOCK);
    pu.set_start(20);
    pu.set_length(10);
    PosixLockRequest fl = pw;
    fl.set_op(FLOCK_EXCLUSIVE);
    fl.set_start(0);
    fl.set_length(0);
    PosixReleaseRequest prel;
    prel.set_handle(3);
    prel.add_owners(11);
    prel.set_flock(true);
    LockSeq(false).Add(7, 1, pw).Add(7, 2, pr).Add(8, 2, pr).Add(7, 1, pu).Add(10, 0, ll)
        .Add(9, 1, prel).Add(7, 1, fl).Add(10, 0, ll).Put("posix");
    SessionRequest sr;
    OpenSessionRequest os;
    os.set_lease_ms(1000);
    os.set_client_name("seed");
    LockSeq(false).Add(0, 0, os).Add(1, 1, sr).Add(4, 1, whole).Add(2, 1, sr).Add(10, 0, ll)
        .Put("sessions");
    AcquireRequest rc = whole;
    rc.set_reclaim(true);
    AcquireRequest other = whole;
    other.set_wait(true);
    ReclaimCompleteRequest done;
    LockSeq(true).Add(4, 1, rc).Add(4, 2, other).Add(3, 1, done).Add(3, 2, done).Add(10, 0, ll)
        .Put("grace_reclaim");
    LockSeq(true).Add(0, 3, os).Add(7, 1, pw).Add(4, 2, other).Put("grace_wait");
  }

  // Frame: data channel requests (handle 3 is a file with data).
  using namespace clf::transport::tcp;
  PutRaw("frame", "write_read_sync",
         Frame(kWrite, 3, {{0, 4}, {8192, 3}}, "abcdxyz", kFlagSync) +
             Frame(kRead, 3, {{0, 16}}, "", 0, 1) + Frame(kSync, 3, {}, ""));
  PutRaw("frame", "read_tagged", Frame(kRead, 3, {{0, 100}, {4000, 200}}, "", 0, (2u << 24) | 5));
  PutRaw("frame", "bad_magic", std::string(48, 'x'));
  PutRaw("frame", "short_payload", Frame(kWrite, 3, {{0, 100}}, "short"));

  // Datatype: encodings of a paper 002 vector, a struct of a resized
  // subarray, and an indexed type (common/datatype.h).
  {
    const clf::TypePtr i32 = clf::Datatype::Int32();
    clf::Result<clf::TypePtr> vec = clf::Datatype::Vector(4000, 1, 2, i32);
    const uint64_t sizes[] = {8, 8, 8}, subs[] = {4, 4, 2}, starts[] = {0, 4, 6};
    clf::Result<clf::TypePtr> sub =
        clf::Datatype::Subarray(sizes, subs, starts, clf::ArrayOrder::kC, i32);
    clf::Result<clf::TypePtr> rsz = sub.ok() ? clf::Datatype::Resized(*sub, 0, 4096)
                                             : clf::Result<clf::TypePtr>(sub.status());
    const uint64_t blens[] = {1, 2};
    const int64_t disps[] = {0, 8192};
    const clf::TypePtr parts[] = {rsz.ok() ? *rsz : i32, clf::Datatype::Double()};
    clf::Result<clf::TypePtr> st = clf::Datatype::Struct(blens, disps, parts);
    const uint64_t ilens[] = {3, 1, 7};
    const int64_t idisps[] = {0, 10, 40};
    clf::Result<clf::TypePtr> idx = clf::Datatype::Indexed(ilens, idisps, i32);
    if (!vec.ok() || !st.ok() || !idx.ok()) {
      std::fprintf(stderr, "make_corpus: datatype seeds do not build\n");
      return 1;
    }
    PutRaw("datatype", "vector", clf::Encode(**vec));
    PutRaw("datatype", "struct_resized_subarray", clf::Encode(**st));
    PutRaw("datatype", "indexed", clf::Encode(**idx));
  }

  // Handshake (first byte even: the input answers the challenge; odd: the
  // harness authenticates, the input is frames).
  PutRaw("handshake", "auth_wrong_mac", std::string(1, '\0') + Frame(kAuth, 0, {}, std::string(64, 'm')));
  PutRaw("handshake", "auth_short", std::string(1, '\2') + Frame(kAuth, 0, {}, std::string(64, 'm')).substr(0, 70));
  PutRaw("handshake", "write_before_auth", std::string(1, '\4') + Frame(kWrite, 3, {{0, 4}}, "abcd"));
  PutRaw("handshake", "authed_write_read",
         std::string(1, '\1') + Frame(kWrite, 3, {{0, 4}}, "abcd", kFlagSync) +
             Frame(kRead, 3, {{0, 16}}, "", 0, 1));
  PutRaw("handshake", "authed_auth_again", std::string(1, '\3') + Frame(kAuth, 0, {}, std::string(64, 'm')));
  return 0;
}
