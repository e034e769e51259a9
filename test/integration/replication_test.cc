// Replicated data (replicas = 2) on real clfd processes: every copy of a
// file's units is byte-identical, concurrent overlapping writes leave the
// copies identical, and with one server killed (kill -9) writes and reads go
// on without an error; the killed server's copies are recorded stale on the
// metadata server, and once back it refuses to serve them (never old bytes).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "clf/client.h"
#include "common/layout.h"
#include "common/transport/tcp_transport.h"
#include "test/support/cluster.h"
#include "test/support/copies.h"
#include "test/support/pattern.h"
#include "test/support/scrape.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;

constexpr uint32_t kStripe = 64 * 1024;

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 4;
    o.stripe_size = kStripe;
    o.replicas = 2;
    o.rpc_timeout_ms = 1000;
    o.transport = "tcp";
    o.metrics = true;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) {
      for (int k = 0; k < cluster_->size(); ++k) {
        std::printf("--- clfd %d log tail:\n%s\n", k, cluster_->LogTail(k, 3000).c_str());
      }
    }
  }
  client::Client& c() { return cluster_->client(); }
  uint32_t n() const { return static_cast<uint32_t>(cluster_->size()); }

  std::string CopyPath(ServerId holder, uint32_t slot, Handle h) const {
    return clf::testing::CopyPath(*cluster_, holder, slot, h);
  }
  void ExpectCopiesIdentical(const Attr& a) { clf::testing::ExpectCopiesIdentical(*cluster_, a); }
  std::unique_ptr<transport::TcpTransport> DataChannelTo(ServerId s) {
    return ClientDataChannel(*cluster_, s);
  }
  // Waits until M has no stale copy of h (the resync brought them current).
  bool WaitCurrent(Handle h, int timeout_ms) {
    return TestCluster::PollUntil(
               [&] {
                 Result<Attr> a = c().GetAttrSync(h);
                 return a.ok() && a->stale_replicas.empty();
               },
               timeout_ms) >= 0;
  }
  // A regular file in the root directory (metadata on server 0).
  Attr NewFile(const std::string& name) {
    Result<Attr> a = c().CreateSync(c().root(), name, CreateArgs{});
    EXPECT_OK(a);
    EXPECT_EQ(a->layout.replicas, 2u);
    EXPECT_EQ(ServerOf(a->handle), 0u);
    return *a;
  }

  std::unique_ptr<TestCluster> cluster_;
};

TEST_F(ReplicationTest, EveryCopyHoldsTheSameBytesAndServesThem) {
  const Attr a = NewFile("f");
  ASSERT_EQ(a.layout.stripe_count, 4u);
  const std::string data = PatternBytes(1, 0, 16 * kStripe + 1234);
  ASSERT_OK(c().WriteSync(a.handle, a.layout, 0, data));
  // A loaded machine can degrade a write (a forward past the 1 s deadline,
  // e.g. behind a first write's synced write record): current copies first.
  ASSERT_TRUE(WaitCurrent(a.handle, 30000)) << cluster_->LogTail(0);
  Result<std::string> back = c().ReadSync(a.handle, a.layout, 0, data.size());
  ASSERT_OK(back);
  EXPECT_EQ(FirstDifference(*back, data), -1);
  ExpectCopiesIdentical(a);
  // Each copy, asked directly, serves its units' bytes.
  for (ServerId p : DataServers(a.layout, n())) {
    const std::string want = ReadWholeFile(CopyPath(p, 0, a.handle));
    ASSERT_FALSE(want.empty());
    for (uint32_t slot = 0; slot < 2; ++slot) {
      const ServerId holder = ReplicaServer(p, slot, n());
      std::string got(want.size(), '\0');
      ASSERT_OK(DataChannelTo(holder)->Read(ObjectRef(a.handle, slot, 2), {Extent{0, want.size()}},
                                            {iovec{got.data(), got.size()}}));
      EXPECT_EQ(got, want) << "copy " << slot << " of server " << p << "'s units";
    }
  }
  // A request naming a copy the server does not hold is refused.
  std::string buf(10, '\0');
  EXPECT_STATUS(Code::kInvalid, DataChannelTo(0)->Read(ObjectRef(a.handle, 1, 3), {Extent{0, 10}},
                                                       {iovec{buf.data(), buf.size()}}));
}

// clf fsck --copies compares every current copy with its acting primary: a
// copy changed on disk behind its server's back is found (exit 1, nothing
// changed), --repair records it stale on M, the resync rewrites it from the
// acting primary, and fsck is clean again.
TEST_F(ReplicationTest, FsckComparesCopiesAndRepairsOneThatDiffers) {
  const Attr a = NewFile("f");
  const std::string data = PatternBytes(3, 0, 8 * kStripe + 777);
  ASSERT_OK(c().WriteSync(a.handle, a.layout, 0, data));
  ASSERT_TRUE(WaitCurrent(a.handle, 30000)) << cluster_->LogTail(0);  // as above
  const std::string file = cluster_->cluster_file();
  tools::RunResult r = TestCluster::RunClf({"fsck", "--cluster", file, "--copies", "--json"}, 120000);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["copies"]["files"], 1) << r.output;
  EXPECT_EQ(j["copies"]["compared"], 4) << r.output;  // each of 4 primaries' copy 1
  EXPECT_EQ(j["copies"]["bytes"], data.size()) << r.output;
  EXPECT_EQ(j["stale_copies"], 0) << r.output;

  // Three bytes of copy 1 of server 2's units (on server 3) changed on disk.
  const ServerId p = 2, holder = ReplicaServer(p, 1, n());
  {
    std::fstream f(CopyPath(holder, 1, a.handle), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.is_open());
    std::string bad(3, '\0');
    f.seekg(100);
    ASSERT_TRUE(f.read(bad.data(), 3));
    for (char& ch : bad) ch = static_cast<char>(~ch);
    f.seekp(100);
    f.write(bad.data(), static_cast<std::streamsize>(bad.size()));
    ASSERT_TRUE(f.good());
  }
  r = TestCluster::RunClf({"fsck", "--cluster", file, "--copies"}, 120000);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("copy-differs: file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("copy 1 of server 2's units (on server 3) differs from copy 0 from "
                          "byte 100 of the object"),
            std::string::npos)
      << r.output;
  // Without --repair nothing changed: the copy is still current and still differs.
  Result<Attr> st = c().GetAttrSync(a.handle);
  ASSERT_OK(st);
  EXPECT_TRUE(st->stale_replicas.empty());

  r = TestCluster::RunClf(
      {"fsck", "--cluster", file, "--copies", "--repair", "--resync-wait", "60"}, 120000);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("repaired copy-differs: file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("now clean"), std::string::npos) << r.output;
  ExpectCopiesIdentical(a);
  Result<std::string> back = c().ReadSync(a.handle, a.layout, 0, data.size());
  ASSERT_OK(back);
  EXPECT_EQ(FirstDifference(*back, data), -1);
  r = TestCluster::RunClf({"fsck", "--cluster", file, "--copies"}, 120000);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(ReplicationTest, ConcurrentOverlappingWritersLeaveIdenticalCopies) {
  const Attr a = NewFile("shared");
  Result<std::unique_ptr<client::Client>> other = client::Client::Open(cluster_->cluster_file());
  ASSERT_OK(other);
  const uint64_t span = 4 * kStripe;  // one row over the four servers
  std::atomic<int> errors{0};
  auto writer = [&](client::Client* cl, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 200; ++i) {
      const uint64_t off = rng() % span;
      const uint64_t len = 1 + rng() % (2 * kStripe);
      Status st = cl->WriteSync(a.handle, a.layout, off, PatternBytes(seed + i, off, len)).status();
      if (!st.ok() && errors++ == 0) ADD_FAILURE() << "write " << i << ": " << st.ToString();
    }
  };
  std::thread t1(writer, &c(), 100);
  std::thread t2(writer, other->get(), 200);
  t1.join();
  t2.join();
  EXPECT_EQ(errors.load(), 0) << cluster_->LogTail(0) << cluster_->LogTail(1) << cluster_->LogTail(2)
                              << cluster_->LogTail(3);
  ExpectCopiesIdentical(a);
}

TEST_F(ReplicationTest, KillOneServerWritesAndReadsGoOnStaleCopyRefuses) {
  const ServerId down = 2;
  const Attr r = NewFile("read-me");
  const std::string r_data = PatternBytes(7, 0, 8 * kStripe);
  ASSERT_OK(c().WriteSync(r.handle, r.layout, 0, r_data));
  const Attr w = NewFile("stream");
  const uint64_t chunk = kStripe;
  const int chunks = 48;

  std::atomic<bool> writing{true};
  std::atomic<int> read_errors{0}, reads{0};
  std::thread reader([&] {
    while (writing) {
      Result<std::string> got = c().ReadSync(r.handle, r.layout, 0, r_data.size());
      if (!got.ok() || *got != r_data) {
        ++read_errors;
        ADD_FAILURE() << "read during the failure: "
                      << (got.ok() ? std::string("wrong bytes") : got.status().ToString());
      }
      ++reads;
    }
  });
  for (int i = 0; i < chunks; ++i) {
    if (i == chunks / 3) ASSERT_OK(cluster_->KillServer(static_cast<int>(down), 9));
    const uint64_t off = uint64_t(i) * chunk;
    Status st = c().WriteSync(w.handle, w.layout, off, PatternBytes(9, off, chunk)).status();
    EXPECT_TRUE(st.ok()) << "chunk " << i << ": " << st.ToString();
  }
  writing = false;
  reader.join();
  EXPECT_EQ(read_errors.load(), 0);
  EXPECT_GT(reads.load(), 0);
  const std::string w_data = PatternBytes(9, 0, chunk * chunks);
  Result<std::string> back = c().ReadSync(w.handle, w.layout, 0, w_data.size());
  ASSERT_OK(back);
  EXPECT_EQ(FirstDifference(*back, w_data), -1);

  // The metadata server recorded the killed server's copies of `stream`
  // stale (both: slot 0 of its own units, slot 1 of server 1's).
  Result<Attr> st = c().GetAttrSync(w.handle);
  ASSERT_OK(st);
  std::vector<std::pair<ServerId, uint32_t>> stale(st->stale_replicas.begin(),
                                                  st->stale_replicas.end());
  std::sort(stale.begin(), stale.end());
  EXPECT_EQ(stale, (std::vector<std::pair<ServerId, uint32_t>>{{1, 1}, {2, 0}}));

  // Back: asked for a block it missed, it refuses (kNotCurrent) or, if the
  // resync already made the copy current (M nudges it every 2 s, so a slow
  // restart can see it done), serves the new bytes, those of the other copy;
  // it never serves the old ones. The file still reads whole through the client.
  ASSERT_OK(cluster_->RestartServer(static_cast<int>(down)));
  for (uint32_t slot : {0u, 1u}) {
    const ServerId primary = PrimaryOfSlot(down, slot, n());
    const uint64_t local = LocalSizeFor(w.layout, n(), primary, w_data.size());
    std::string got(local, '\0');
    Status rd = DataChannelTo(down)->Read(ObjectRef(w.handle, slot, 2), {Extent{0, local}},
                                          {iovec{got.data(), got.size()}});
    if (rd.ok()) {
      const uint32_t other = 1 - slot;
      std::string want(local, '\0');
      ASSERT_OK(DataChannelTo(ReplicaServer(primary, other, n()))
                    ->Read(ObjectRef(w.handle, other, 2), {Extent{0, local}},
                           {iovec{want.data(), want.size()}}));
      EXPECT_EQ(FirstDifference(got, want), -1)
          << "copy " << slot << " on the returned server served bytes its peer does not hold";
    } else {
      EXPECT_EQ(rd.code(), Code::kNotCurrent) << "copy " << slot << " on the returned server: "
                                              << rd.ToString();
    }
  }
  back = c().ReadSync(w.handle, w.layout, 0, w_data.size());
  ASSERT_OK(back);
  EXPECT_EQ(FirstDifference(*back, w_data), -1);
  // And writes after its return keep working (ordered by the current copies).
  std::string now = w_data;
  const std::string head = PatternBytes(10, 0, 4 * kStripe);
  now.replace(0, head.size(), head);
  ASSERT_OK(c().WriteSync(w.handle, w.layout, 0, head));

  // The resync brings both copies current; then every copy is identical,
  // and the returned server serves the new bytes.
  ASSERT_TRUE(WaitCurrent(w.handle, 30000)) << cluster_->LogTail(static_cast<int>(down));
  Result<Attr> after = c().GetAttrSync(w.handle);
  ASSERT_OK(after);
  ExpectCopiesIdentical(*after);
  const ServerId own = down;  // slot 0 on the returned server
  const uint64_t local = LocalSizeFor(w.layout, n(), own, now.size());
  std::string got(local, '\0');
  ASSERT_OK(DataChannelTo(down)->Read(ObjectRef(w.handle, 0, 2), {Extent{0, local}},
                                      {iovec{got.data(), got.size()}}));
  EXPECT_EQ(got, ReadWholeFile(CopyPath(own, 0, w.handle)));
  back = c().ReadSync(w.handle, w.layout, 0, now.size());
  ASSERT_OK(back);
  EXPECT_EQ(FirstDifference(*back, now), -1);
}

// A lost disk: the server comes back with an empty store; every metadata
// server records its copies stale, the resync refills them, and nothing
// acknowledged is lost.
TEST_F(ReplicationTest, LostDiskIsRefilledByResync) {
  const ServerId lost = 3;
  std::vector<Attr> files;
  std::vector<std::string> data;
  for (int i = 0; i < 4; ++i) {
    files.push_back(NewFile("f" + std::to_string(i)));
    data.push_back(PatternBytes(20 + i, 0, (4 + i) * kStripe + 77));
    ASSERT_OK(c().WriteSync(files.back().handle, files.back().layout, 0, data.back()));
  }
  ASSERT_OK(cluster_->KillServer(static_cast<int>(lost), 9));
  const std::string store = cluster_->store_dir(static_cast<int>(lost));
  for (const char* part : {"objects", "objects-r1", "objects-r2", "meta", "lock_state"}) {
    std::error_code ec;
    std::filesystem::remove_all(store + "/" + part, ec);
  }
  ASSERT_OK(cluster_->RestartServer(static_cast<int>(lost)));
  // Nothing is lost, before and after the resync; the copies end identical.
  for (size_t i = 0; i < files.size(); ++i) {
    Result<std::string> back = c().ReadSync(files[i].handle, files[i].layout, 0, data[i].size());
    ASSERT_OK(back);
    EXPECT_EQ(FirstDifference(*back, data[i]), -1) << "file " << i;
  }
  for (const Attr& f : files) {
    ASSERT_TRUE(WaitCurrent(f.handle, 30000)) << cluster_->LogTail(static_cast<int>(lost));
    Result<Attr> a = c().GetAttrSync(f.handle);
    ASSERT_OK(a);
    ExpectCopiesIdentical(*a);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    Result<std::string> back = c().ReadSync(files[i].handle, files[i].layout, 0, data[i].size());
    ASSERT_OK(back);
    EXPECT_EQ(FirstDifference(*back, data[i]), -1) << "file " << i;
  }
}

// Two clients write overlapping ranges of one file while a copy's server is
// stopped (SIGSTOP) past the RPC deadline and resumed: no write fails, and
// after the resync the copies are identical.
TEST_F(ReplicationTest, OverlappingWritersWhileACopyIsStopped) {
  const Attr a = NewFile("paused");
  Result<std::unique_ptr<client::Client>> other = client::Client::Open(cluster_->cluster_file());
  ASSERT_OK(other);
  const uint64_t span = 4 * kStripe;
  std::atomic<int> errors{0};
  std::atomic<bool> go{true};
  auto writer = [&](client::Client* cl, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; go; ++i) {
      const uint64_t off = rng() % span;
      const uint64_t len = 1 + rng() % kStripe;
      // Data only (no size report: M's size gathering would wait on the
      // stopped server for the RPC deadline, as any collective does).
      std::promise<Status> done;
      cl->Write(a.handle, a.layout, off, PatternBytes(seed + i, off, len),
                [&done](Result<uint64_t> r) { done.set_value(r.status()); });
      Status st = done.get_future().get();
      if (!st.ok()) {
        ++errors;
        ADD_FAILURE() << st.ToString();
      }
    }
  };
  std::thread t1(writer, &c(), 300);
  std::thread t2(writer, other->get(), 400);
  ASSERT_OK(cluster_->FreezeServer(1));
  // Past the RPC deadline (1 s): the writes to its copies time out and mark them stale.
  ASSERT_GE(TestCluster::PollUntil(
                [&] {
                  Result<Attr> st = c().GetAttrSync(a.handle);
                  return st.ok() && !st->stale_replicas.empty();
                },
                20000),
            0);
  cluster_->ResumeServer(1);
  go = false;
  t1.join();
  t2.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_TRUE(WaitCurrent(a.handle, 30000)) << cluster_->LogTail(1);
  ExpectCopiesIdentical(a);
}

// Paper 001 on reads: a read of one server's units cut into 16 blocks of
// 4 KiB, four at a time. EATF (the default) sends about half of them to the
// copy in slot 1 (the two servers holding copies are free in turn);
// `primary` sends none there; a directory's read_sched wins over the client's.
TEST_F(ReplicationTest, ReadSchedChoosesTheCopyThatServes) {
  const Attr a = NewFile("spread");
  const std::string data = PatternBytes(3, 0, 8 * kStripe);
  ASSERT_OK(c().WriteSync(a.handle, a.layout, 0, data));
  ASSERT_TRUE(WaitCurrent(a.handle, 30000)) << cluster_->LogTail(0);  // as above
  const std::string copy_reads = "clf_replica_copy_reads_total";
  auto reader = [&](const std::string& read_sched) {
    client::ClientOptions o;
    o.sched_block = 4096;
    o.read_sched = read_sched;
    Result<std::unique_ptr<client::Client>> r = client::Client::Open(cluster_->cluster_file(), o);
    EXPECT_OK(r);
    return std::move(*r);
  };
  auto read_unit0 = [&](client::Client& cl, const Attr& f, const std::string& want) {
    Result<std::string> got = cl.ReadSync(f.handle, f.layout, 0, kStripe);
    ASSERT_OK(got);
    EXPECT_EQ(FirstDifference(*got, want.substr(0, kStripe)), -1);
  };
  const double before = SumOverServers(*cluster_, copy_reads);
  std::unique_ptr<client::Client> primary = reader("primary");
  read_unit0(*primary, a, data);
  EXPECT_EQ(SumOverServers(*cluster_, copy_reads), before);
  std::unique_ptr<client::Client> eatf = reader("");  // the cluster's default: eatf
  read_unit0(*eatf, a, data);
  const double spread = SumOverServers(*cluster_, copy_reads) - before;
  EXPECT_GE(spread, 4) << "EATF should send part of 16 blocks to the second copy";
  EXPECT_LE(spread, 12);
  // A directory set to primary: its files' reads stay on slot 0 for any client.
  CreateArgs mkdir;
  mkdir.type = client::FileType::kDirectory;
  mkdir.mode = 0755;
  Result<Attr> dir = c().CreateSync(c().root(), "prim", mkdir);
  ASSERT_OK(dir);
  client::SetAttrArgs sa;
  sa.valid = client::kSetLayout;
  sa.layout = a.layout;
  sa.layout.first_server = 0;
  sa.layout.read_sched = ReadSchedCode(ReadSched::kPrimary);
  ASSERT_OK(c().SetAttrSync(dir->handle, sa));
  Result<Attr> f = c().CreateSync(dir->handle, "f", CreateArgs{});
  ASSERT_OK(f);
  EXPECT_EQ(f->layout.read_sched, ReadSchedCode(ReadSched::kPrimary));
  ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, data));
  const double at = SumOverServers(*cluster_, copy_reads);
  read_unit0(*eatf, *f, data);
  EXPECT_EQ(SumOverServers(*cluster_, copy_reads), at);
}

TEST_F(ReplicationTest, LayoutRefusesMoreCopiesThanServers) {
  client::SetAttrArgs sl;
  sl.valid = client::kSetLayout;
  sl.layout = c().cluster().default_layout;
  sl.layout.replicas = 4;  // more than kMaxReplicas (3)
  EXPECT_STATUS(Code::kInvalid, c().SetAttrSync(c().root(), sl));
  sl.layout.replicas = 3;
  EXPECT_OK(c().SetAttrSync(c().root(), sl));
  Result<Attr> f = c().CreateSync(c().root(), "three", CreateArgs{});
  ASSERT_OK(f);
  EXPECT_EQ(f->layout.replicas, 3u);
  const std::string data = PatternBytes(3, 0, 6 * kStripe);
  ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, data));
  Result<std::string> back = c().ReadSync(f->handle, f->layout, 0, data.size());
  ASSERT_OK(back);
  EXPECT_EQ(*back, data);
  ExpectCopiesIdentical(*f);
}

}  // namespace
}  // namespace clf::testing
