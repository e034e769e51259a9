// `clf fsck` against planted inconsistencies: a stopped server's RocksDB is
// edited directly (RocksMetaStore, as a crash mid-operation would leave it)
// and a data object is written into its object folder; fsck must find each
// one (exit 1, nothing changed), repair each with --repair (exit 0), be clean
// afterwards, and leave the real files alone.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "clf/client.h"
#include "clf/fsck_client.h"
#include "server/store/meta_store.h"
#include "test/support/cli_cluster_test.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

std::string Hex16(Handle h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

class FsckTest : public CliClusterTest {};

TEST_F(FsckTest, PlantedInconsistenciesAreFoundAndRepaired) {
  // Real files: five in the root (metadata on server 0, which holds the root),
  // a directory with a file, a hard link.
  std::vector<client::Attr> files;
  for (int i = 0; i < 5; ++i) {
    Result<client::Attr> f = c().CreateSync(c().root(), "f" + std::to_string(i), client::CreateArgs{});
    ASSERT_OK(f);
    ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, PatternBytes(10 + i, 0, 150000)));
    files.push_back(*f);
  }
  client::CreateArgs dir;
  dir.type = client::FileType::kDirectory;
  dir.mode = 0755;
  Result<client::Attr> d = c().CreateSync(c().root(), "d", dir);
  ASSERT_OK(d);
  Result<client::Attr> g = c().CreateSync(d->handle, "g", client::CreateArgs{});
  ASSERT_OK(g);
  ASSERT_OK(c().WriteSync(g->handle, g->layout, 0, PatternBytes(20, 0, 70000)));
  ASSERT_OK(c().LinkSync(files[4].handle, d->handle, "f4link"));
  tools::RunResult r = Clf({"fsck", "--cluster", cluster_->cluster_file()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("clean"), std::string::npos) << r.output;

  // Plant, with server 0 stopped (it holds the root and the f* files).
  ASSERT_OK(cluster_->StopServer(0));
  const Handle missing_file = MakeHandle(0, 0x7000001);
  const Handle missing_dir = MakeHandle(0, 0x7000002);
  const Handle unreachable = MakeHandle(0, 0x7000003);
  const Handle lost_data = MakeHandle(0, 0x7000004);
  const Handle stale_orphan = MakeHandle(0, 0x7000005);
  const Handle ghost_object = MakeHandle(0, 0x7000006);
  {
    Result<std::unique_ptr<server::RocksMetaStore>> st =
        server::RocksMetaStore::Open(cluster_->data_dir(0) + "/meta", false);
    ASSERT_OK(st);
    server::RocksMetaStore& s = **st;
    server::RocksMetaStore::Batch b;
    // (a) entries whose inode does not exist: a file, and a directory whose
    // mkdir counted it in the root's nlink.
    b.PutEntry(kRootHandle, "dangling", {missing_file, v1::FT_REGULAR});
    b.PutEntry(kRootHandle, "danglingdir", {missing_dir, v1::FT_DIRECTORY});
    Result<v1::Attr> root = s.GetAttr(kRootHandle);
    ASSERT_OK(root);
    v1::Attr root2 = *root;
    root2.set_nlink(root->nlink() + 1);
    b.PutAttr(root2);
    // (b) an inode with nlink 1 that no entry names and no orphan record keeps.
    v1::Attr u;
    u.set_handle(unreachable);
    u.set_type(v1::FT_REGULAR);
    u.set_mode(0644);
    u.set_nlink(1);
    *u.mutable_layout() = v1::Layout();
    u.mutable_layout()->set_stripe_size(65536);
    u.mutable_layout()->set_stripe_count(3);
    u.mutable_layout()->set_replicas(1);
    b.PutAttr(u);
    // (d) a link count that disagrees with the entries: f0 has one, says 3.
    Result<v1::Attr> f0 = s.GetAttr(files[0].handle);
    ASSERT_OK(f0);
    v1::Attr f0b = *f0;
    f0b.set_nlink(3);
    b.PutAttr(f0b);
    // (e) a file whose recorded allocation has no data object on any server.
    v1::Attr ld = u;
    ld.set_handle(lost_data);
    ld.set_size(100000);
    ld.set_blocks(200);
    b.PutAttr(ld);
    b.PutEntry(kRootHandle, "lostdata", {lost_data, v1::FT_REGULAR});
    // An orphan record of an inode that does not exist.
    b.PutOrphan(stale_orphan);
    ASSERT_OK(s.Commit(b));
  }
  // (c) a data object of no file.
  const std::string ghost_path = cluster_->data_dir(0) + "/objects/" +
                                 Hex16(ghost_object % 256).substr(14) + "/" + Hex16(ghost_object);
  ASSERT_TRUE(std::filesystem::is_directory(std::filesystem::path(ghost_path).parent_path()))
      << ghost_path;
  ASSERT_OK(tools::WriteFileWithMode(ghost_path, "orphaned bytes", 0600));
  ASSERT_OK(cluster_->RestartServer(0));

  r = Clf({"fsck", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const char* kind : {"entry-without-inode: entry 'dangling'",
                           "entry-without-inode: entry 'danglingdir'", "inode-without-entry",
                           "wrong-link-count", "objects-missing", "stale-orphan-record",
                           "object-without-inode"}) {
    EXPECT_NE(r.output.find(kind), std::string::npos) << kind << "\n" << r.output;
  }
  EXPECT_TRUE(std::filesystem::exists(ghost_path)) << "fsck without --repair removed something";
  // --json says the same.
  r = Clf({"fsck", "--cluster", cluster_->cluster_file(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("\"clean\": false"), std::string::npos) << r.output;

  r = Clf({"fsck", "--cluster", cluster_->cluster_file(), "--repair"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("now clean"), std::string::npos) << r.output;
  r = Clf({"fsck", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("clean"), std::string::npos) << r.output;

  // What the repairs did.
  EXPECT_EQ(c().LookupSync(c().root(), "dangling").status().code(), Code::kNotFound);
  EXPECT_EQ(c().LookupSync(c().root(), "danglingdir").status().code(), Code::kNotFound);
  Result<client::Attr> lf = c().LookupSync(c().root(), "lost+found");
  ASSERT_OK(lf);
  EXPECT_EQ(lf->type, client::FileType::kDirectory);
  EXPECT_EQ(lf->mode & 07777, 0700u);
  Result<client::Attr> found = c().LookupSync(lf->handle, Hex16(unreachable));
  ASSERT_OK(found);
  EXPECT_EQ(found->handle, unreachable);
  EXPECT_EQ(found->nlink, 1u);
  Result<client::Attr> f0 = c().GetAttrSync(files[0].handle);
  ASSERT_OK(f0);
  EXPECT_EQ(f0->nlink, 1u);
  Result<client::Attr> f4 = c().GetAttrSync(files[4].handle);
  ASSERT_OK(f4);
  EXPECT_EQ(f4->nlink, 2u) << "a real hard link was changed";
  Result<client::Attr> ld = c().LookupSync(c().root(), "lostdata");
  ASSERT_OK(ld);
  EXPECT_EQ(ld->blocks, 0u);
  Result<client::Attr> root = c().GetAttrSync(c().root());
  ASSERT_OK(root);
  EXPECT_EQ(root->nlink, 4u) << "root: . .. d lost+found";
  EXPECT_FALSE(std::filesystem::exists(ghost_path));

  // The real files were not touched.
  for (int i = 0; i < 5; ++i) {
    Result<client::Attr> f = c().LookupSync(c().root(), "f" + std::to_string(i));
    ASSERT_OK(f);
    Result<std::string> data = c().ReadSync(f->handle, f->layout, 0, 150000);
    ASSERT_OK(data);
    EXPECT_EQ(FirstDifference(*data, PatternBytes(10 + i, 0, 150000)), -1) << i;
  }
  Result<std::string> gd = c().ReadSync(g->handle, g->layout, 0, 70000);
  ASSERT_OK(gd);
  EXPECT_EQ(FirstDifference(*gd, PatternBytes(20, 0, 70000)), -1);
}

// Repairs are server-only: with the client secret a repair is refused and
// nothing changes; malformed requests are refused by validation; paging by
// one item walks everything.
TEST_F(FsckTest, RepairNeedsTheServerRole) {
  ASSERT_OK(cluster_->StopServer(1));
  const Handle u = MakeHandle(1, 0x7100001);
  {
    Result<std::unique_ptr<server::RocksMetaStore>> st =
        server::RocksMetaStore::Open(cluster_->data_dir(1) + "/meta", false);
    ASSERT_OK(st);
    server::RocksMetaStore::Batch b;
    b.PutOrphan(u);
    ASSERT_OK((*st)->Commit(b));
  }
  ASSERT_OK(cluster_->RestartServer(1));
  Result<ClusterConfig> cfg = LoadClusterConfig(cluster_->cluster_file());
  ASSERT_OK(cfg);
  // The client secret: scans answer, every repair is refused.
  Result<std::unique_ptr<client::FsckClient>> fc = client::FsckClient::Open(*cfg);
  ASSERT_OK(fc);
  Result<std::vector<Handle>> orphans = (*fc)->Orphans(1);
  ASSERT_OK(orphans);
  EXPECT_EQ(*orphans, std::vector<Handle>{u});
  EXPECT_STATUS(Code::kPermission, (*fc)->DropOrphan(u));
  EXPECT_STATUS(Code::kPermission, (*fc)->SetNlink(kRootHandle, 2, 2));
  EXPECT_STATUS(Code::kPermission, (*fc)->RemoveEntry(kRootHandle, "x", u));
  // The server secret passes the role check; validation still applies.
  client::ClientOptions so;
  so.secret_file = cfg->peer_secret_file;
  Result<std::unique_ptr<client::FsckClient>> sc = client::FsckClient::Open(*cfg, so);
  ASSERT_OK(sc);
  EXPECT_STATUS(Code::kInvalid, (*sc)->DropOrphan(MakeHandle(7, 1)));  // no server 7 (client side)
  EXPECT_STATUS(Code::kInvalid, (*sc)->SetNlink(kRootHandle, 0, 2));  // nlink 0 never set
  EXPECT_STATUS(Code::kInvalid, (*sc)->AddEntry(kRootHandle, "a/b", u, client::FileType::kRegular));
  EXPECT_STATUS(Code::kStale, (*sc)->SetNlink(kRootHandle, 5, 77));  // not what it is now
  (*sc)->set_page_size(1);  // paging: one item per call
  Result<std::vector<client::FsckEntry>> es = (*sc)->Entries(0);
  ASSERT_OK(es);
  Result<std::vector<Handle>> ds = (*sc)->DataObjects(0);
  ASSERT_OK(ds);
  (*sc)->set_page_size(16385);  // past the limit
  EXPECT_STATUS(Code::kInvalid, (*sc)->Entries(0).status());
  tools::RunResult r;
  r = Clf({"fsck", "--cluster", cluster_->cluster_file()});
  EXPECT_EQ(r.exit_code, 1) << "the refused repair changed something\n" << r.output;
  r = Clf({"fsck", "--cluster", cluster_->cluster_file(), "--repair"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace clf::testing
