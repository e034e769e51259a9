// Writes the seed corpus of the fuzz harnesses: one well-formed request per
// RPC (first byte: the harness's RPC selector), naming the handles of the
// tree fuzz_server.cc creates (1 root, 2 dir, 3 file, 4 dir/inner, 5
// dir/link). Usage: make_corpus OUTDIR (writes OUTDIR/<target>/<name>).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "clf/v1/admin.pb.h"
#include "clf/v1/data.pb.h"
#include "clf/v1/meta.pb.h"
#include "clf/v1/peer.pb.h"

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
  return 0;
}
