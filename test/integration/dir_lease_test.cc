// Directory leases and Meta.Commit against real clfd processes, through
// libclf: a grant carries the listing and a handle range, a commit creates
// with those handles, another client's request recalls the lease, and the
// server refuses commits the lease does not cover.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CommitOp;
using client::CreateArgs;
using client::DirLeaseGrant;

template <typename T>
Result<T> Wait(std::function<void(client::Callback<T>)> start) {
  auto p = std::make_shared<std::promise<Result<T>>>();
  start([p](Result<T> r) { p->set_value(std::move(r)); });
  return p->get_future().get();
}

Result<DirLeaseGrant> Acquire(client::Client& c, Handle dir, uint32_t handles,
                              bool with_attrs = false) {
  return Wait<DirLeaseGrant>([&](client::Callback<DirLeaseGrant> cb) {
    c.AcquireDirLease(dir, handles, with_attrs, {}, std::move(cb));
  });
}

Result<std::vector<Status>> CommitSync(client::Client& c, ServerId s, std::vector<CommitOp> ops) {
  return Wait<std::vector<Status>>([&](client::Callback<std::vector<Status>> cb) {
    c.Commit(s, std::move(ops), std::move(cb));
  });
}

CommitOp CreateOp(Handle dir, const std::string& name, Handle h) {
  CommitOp op;
  op.kind = CommitOp::kCreate;
  op.parent = dir;
  op.name = name;
  op.handle = h;
  op.create.mode = 0644;
  op.time = client::Timespec{1700000000, 5};
  return op;
}

class DirLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 3;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
    Result<std::unique_ptr<client::Client>> b = client::Client::Open(cluster_->cluster_file());
    ASSERT_OK(b.status());
    other_ = std::move(*b);
    client::Client& a = cluster_->client();
    CreateArgs d;
    d.type = client::FileType::kDirectory;
    d.mode = 0755;
    Result<Attr> dir = a.CreateSync(a.root(), "leased", d);
    ASSERT_OK(dir.status());
    dir_ = dir->handle;
    ASSERT_OK(a.CreateSync(dir_, "old", CreateArgs{}).status());
  }
  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<client::Client> other_;
  Handle dir_ = 0;
};

TEST_F(DirLeaseTest, GrantCommitRecall) {
  client::Client& a = cluster_->client();
  ASSERT_NE(a.session(), other_->session());
  Result<DirLeaseGrant> g = Acquire(a, dir_, 16);
  ASSERT_OK(g.status());
  ASSERT_TRUE(g->granted) << g->refused;
  ASSERT_EQ(g->entries.size(), 1u);
  EXPECT_EQ(g->entries[0].name, "old");
  EXPECT_EQ(g->handle_count, 16u);
  EXPECT_EQ(ServerOf(g->handle_first), ServerOf(dir_));
  EXPECT_GT(g->lease_ms, 0u);
  // The other client is refused while A holds it.
  Result<DirLeaseGrant> busy = Acquire(*other_, dir_, 0);
  ASSERT_OK(busy.status());
  EXPECT_FALSE(busy->granted);

  // Two creates with handles of the range, committed in one call.
  Result<std::vector<Status>> r = CommitSync(
      a, ServerOf(dir_), {CreateOp(dir_, "n1", g->handle_first), CreateOp(dir_, "n2", g->handle_first + 1)});
  ASSERT_OK(r.status());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_OK((*r)[0]);
  EXPECT_OK((*r)[1]);
  // The holder's own lookups pass at once.
  Result<Attr> n1 = a.LookupSync(dir_, "n1");
  ASSERT_OK(n1.status());
  EXPECT_EQ(n1->handle, g->handle_first);
  EXPECT_EQ(n1->mtime.sec, 1700000000);  // the time the client acknowledged
  EXPECT_EQ(n1->layout.first_server, FirstServerFor(n1->handle, 3));

  // B's lookup parks; A's poll learns of the recall; A releases; B goes on.
  auto b_lookup = std::async(std::launch::async, [&] { return other_->LookupSync(dir_, "n2"); });
  Result<std::vector<Handle>> ev = Wait<std::vector<Handle>>(
      [&](client::Callback<std::vector<Handle>> cb) { a.LeaseEvents(ServerOf(dir_), 10000, std::move(cb)); });
  ASSERT_OK(ev.status());
  EXPECT_EQ(*ev, std::vector<Handle>{dir_});
  EXPECT_EQ(b_lookup.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "B's lookup did not wait for the lease";
  ASSERT_OK(Wait<bool>([&](client::Callback<bool> cb) {
              a.ReleaseDirLease(dir_, [cb](Status s) { s.ok() ? cb(true) : cb(s); });
            }).status());
  Result<Attr> n2 = b_lookup.get();
  ASSERT_OK(n2.status());
  EXPECT_EQ(n2->handle, g->handle_first + 1);

  // The lease is gone: a commit under it is refused per op, nothing created.
  r = CommitSync(a, ServerOf(dir_), {CreateOp(dir_, "n3", g->handle_first + 2)});
  ASSERT_OK(r.status());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].code(), Code::kStale);
  EXPECT_EQ(a.LookupSync(dir_, "n3").status().code(), Code::kNotFound);
}

TEST_F(DirLeaseTest, ListingWithAttributes) {
  client::Client& a = cluster_->client();
  // A subdirectory (its attributes live on another server than the entry
  // when the cluster spreads directories) and a file with bytes.
  CreateArgs d;
  d.type = client::FileType::kDirectory;
  d.mode = 0700;
  Result<Attr> sub = a.CreateSync(dir_, "sub", d);
  ASSERT_OK(sub.status());
  Result<Attr> f = a.CreateSync(dir_, "data", CreateArgs{});
  ASSERT_OK(f.status());
  ASSERT_OK(a.WriteSync(f->handle, f->layout, 0, std::string(5000, 'x')).status());

  Result<DirLeaseGrant> g = Acquire(a, dir_, 0, true);
  ASSERT_OK(g.status());
  ASSERT_TRUE(g->granted) << g->refused;
  EXPECT_TRUE(g->with_attrs);
  ASSERT_EQ(g->entries.size(), 3u);
  for (const client::DirEntry& e : g->entries) {
    EXPECT_EQ(e.attr.handle, e.handle) << e.name;
    if (e.name == "sub") {
      EXPECT_EQ(e.attr.type, client::FileType::kDirectory);
      EXPECT_EQ(e.attr.mode & 07777, 0700u);
    } else if (e.name == "data") {
      EXPECT_EQ(e.attr.size, 5000u);
    }
  }
  // Without asking: names only.
  ASSERT_OK(Wait<bool>([&](client::Callback<bool> cb) {
              a.ReleaseDirLease(dir_, [cb](Status s) { s.ok() ? cb(true) : cb(s); });
            }).status());
  g = Acquire(a, dir_, 0, false);
  ASSERT_OK(g.status());
  ASSERT_TRUE(g->granted) << g->refused;
  EXPECT_FALSE(g->with_attrs);
  for (const client::DirEntry& e : g->entries) EXPECT_EQ(e.attr.handle, 0u) << e.name;
}

TEST_F(DirLeaseTest, CommitsTheLeaseDoesNotCoverAreRefused) {
  client::Client& a = cluster_->client();
  Result<DirLeaseGrant> g = Acquire(a, dir_, 4);
  ASSERT_OK(g.status());
  ASSERT_TRUE(g->granted);
  // A handle the server never reserved; a handle already in use; a handle of
  // another server (refused by validation: the whole call).
  const Handle unreserved = g->handle_first + 1000000;
  Result<Attr> old = a.LookupSync(dir_, "old");
  ASSERT_OK(old.status());
  Result<std::vector<Status>> r = CommitSync(
      a, ServerOf(dir_),
      {CreateOp(dir_, "u", unreserved), CreateOp(dir_, "dup", old->handle), CreateOp(dir_, "ok", g->handle_first)});
  ASSERT_OK(r.status());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].code(), Code::kInvalid);
  EXPECT_EQ((*r)[1].code(), Code::kExists);
  EXPECT_OK((*r)[2]);  // the first failures do not stop the rest
  EXPECT_EQ(a.LookupSync(dir_, "u").status().code(), Code::kNotFound);
  EXPECT_EQ(a.LookupSync(dir_, "dup").status().code(), Code::kNotFound);
  const ServerId other_server = (ServerOf(dir_) + 1) % 3;
  r = CommitSync(a, ServerOf(dir_), {CreateOp(dir_, "x", MakeHandle(other_server, 99))});
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  // Without a session-bound lease nothing commits: B (no lease) is refused.
  r = CommitSync(*other_, ServerOf(dir_), {CreateOp(dir_, "b", g->handle_first + 1)});
  ASSERT_OK(r.status());
  EXPECT_EQ((*r)[0].code(), Code::kStale);
  // An empty commit is malformed.
  r = CommitSync(a, ServerOf(dir_), {});
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  // The listing still names exactly what was created.
  Result<client::DirPage> page = a.ReadDirSync(dir_, "", 100, false);
  ASSERT_OK(page.status());
  std::vector<std::string> names;
  for (const auto& e : page->entries) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ok", "old"}));
}

// The holder's own rename into its leased directory from a directory of
// another server (Peer.InsertEntry on the lease's server) is its own change:
// it runs at once and recalls nothing (the lease holder's session travels
// with the peer request). Another client's such rename still recalls.
TEST_F(DirLeaseTest, HoldersRenameFromAnotherServerRecallsNothing) {
  client::Client& a = cluster_->client();
  CreateArgs d;
  d.type = client::FileType::kDirectory;
  d.mode = 0755;
  Handle src = 0;
  for (int i = 0; i < 32 && src == 0; ++i) {
    Result<Attr> s = a.CreateSync(a.root(), "src" + std::to_string(i), d);
    ASSERT_OK(s.status());
    if (ServerOf(s->handle) != ServerOf(dir_)) src = s->handle;
  }
  ASSERT_NE(src, 0u) << "no directory landed on another server";
  ASSERT_OK(a.CreateSync(src, "f", CreateArgs{}).status());
  ASSERT_OK(a.CreateSync(src, "g", CreateArgs{}).status());
  Result<DirLeaseGrant> g = Acquire(a, dir_, 4);
  ASSERT_OK(g.status());
  ASSERT_TRUE(g->granted) << g->refused;

  ASSERT_OK(a.RenameSync(src, "f", dir_, "moved").status());
  Result<std::vector<Handle>> ev = Wait<std::vector<Handle>>(
      [&](client::Callback<std::vector<Handle>> cb) { a.LeaseEvents(ServerOf(dir_), 0, std::move(cb)); });
  ASSERT_OK(ev.status());
  EXPECT_TRUE(ev->empty()) << "the holder's own rename recalled its lease";

  // B's rename into it is another client's change: A is asked to give it back.
  auto b_rename = std::async(std::launch::async, [&] {
    return other_->RenameSync(src, "g", dir_, "moved-by-b").status();
  });
  ev = Wait<std::vector<Handle>>(
      [&](client::Callback<std::vector<Handle>> cb) { a.LeaseEvents(ServerOf(dir_), 10000, std::move(cb)); });
  ASSERT_OK(ev.status());
  EXPECT_EQ(*ev, std::vector<Handle>{dir_});
  ASSERT_OK(Wait<bool>([&](client::Callback<bool> cb) {
              a.ReleaseDirLease(dir_, [cb](Status s) { s.ok() ? cb(true) : cb(s); });
            }).status());
  EXPECT_OK(b_rename.get());
  EXPECT_OK(a.LookupSync(dir_, "moved").status());
  EXPECT_OK(a.LookupSync(dir_, "moved-by-b").status());
}

}  // namespace
}  // namespace clf::testing
