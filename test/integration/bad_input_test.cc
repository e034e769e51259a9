// Bad input sent through libclf to real servers: every request is rejected with
// a clear error, the servers keep serving, and data stored before is intact.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "clf/client.h"
#include "common/config.h"
#include "common/layout.h"
#include "test/support/cluster.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

using client::Attr;
using client::CreateArgs;
using client::FileType;

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions o;
    o.servers = 3;
    o.stripe_size = 64 * 1024;
    cluster_ = new TestCluster(o);
    Status st = cluster_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    // A file with known content that every test checks afterwards.
    client::Client& c = cluster_->client();
    Result<Attr> a = c.CreateSync(c.root(), "keep", CreateArgs{});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    keep_ = new Attr(*a);
    Result<uint64_t> w = c.WriteSync(a->handle, a->layout, 0, Content());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_OK(c.SyncSync(a->handle, a->layout));
  }
  static void TearDownTestSuite() {
    delete keep_;
    keep_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }
  static std::string Content() { return PatternBytes(7, 0, 300 * 1024); }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    ASSERT_NE(keep_, nullptr);
  }
  // After each test: every server up, the known file intact.
  void TearDown() override {
    if (cluster_ == nullptr || keep_ == nullptr) return;
    client::Client& c = cluster_->client();
    for (const client::ServerStatus& s : c.ServerStatuses()) {
      EXPECT_TRUE(s.up) << "server " << s.id << " down after bad input: " << s.error << "\n"
                        << cluster_->LogTail(static_cast<int>(s.id));
    }
    for (int k = 0; k < cluster_->size(); ++k) {
      EXPECT_TRUE(cluster_->server_running(k)) << "clfd " << k << " died:\n" << cluster_->LogTail(k);
    }
    Result<Attr> a = c.LookupSync(c.root(), "keep");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->size, Content().size());
    Result<std::string> r = c.ReadSync(a->handle, a->layout, 0, Content().size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(FirstDifference(*r, Content()), -1);
  }

  client::Client& c() { return cluster_->client(); }

  static TestCluster* cluster_;
  static Attr* keep_;
};

TestCluster* BadInputTest::cluster_ = nullptr;
Attr* BadInputTest::keep_ = nullptr;

TEST_F(BadInputTest, NameLengthLimit) {
  const std::string ok_name(255, 'n');
  const std::string long_name(256, 'n');
  ASSERT_OK(c().CreateSync(c().root(), ok_name, CreateArgs{}));
  EXPECT_OK(c().LookupSync(c().root(), ok_name));
  EXPECT_STATUS(Code::kNameTooLong, c().CreateSync(c().root(), long_name, CreateArgs{}));
  CreateArgs dir;
  dir.type = FileType::kDirectory;
  dir.mode = 0755;
  EXPECT_STATUS(Code::kNameTooLong, c().CreateSync(c().root(), long_name, dir));
  EXPECT_STATUS(Code::kNameTooLong, c().LookupSync(c().root(), long_name));
  EXPECT_STATUS(Code::kNameTooLong, c().LookupSync(c().root(), std::string(100000, 'x')));
  EXPECT_STATUS(Code::kNameTooLong, c().LinkSync(keep_->handle, c().root(), long_name));
  EXPECT_STATUS(Code::kNameTooLong, c().RenameSync(c().root(), ok_name, c().root(), long_name));
  // The 255-byte file is still there under its name; nothing was half-renamed.
  EXPECT_OK(c().LookupSync(c().root(), ok_name));
  ASSERT_OK(c().RemoveSync(c().root(), ok_name, false));
}

TEST_F(BadInputTest, NamesWithSlashNulDots) {
  const std::string with_nul("a\0b", 3);
  for (const std::string& bad : {std::string("a/b"), std::string("/"), with_nul, std::string("."),
                                 std::string(".."), std::string()}) {
    SCOPED_TRACE("name \"" + bad + "\" (" + std::to_string(bad.size()) + " bytes)");
    EXPECT_STATUS(Code::kInvalid, c().CreateSync(c().root(), bad, CreateArgs{}));
    CreateArgs dir;
    dir.type = FileType::kDirectory;
    dir.mode = 0755;
    EXPECT_STATUS(Code::kInvalid, c().CreateSync(c().root(), bad, dir));
    EXPECT_STATUS(Code::kInvalid, c().LinkSync(keep_->handle, c().root(), bad));
    EXPECT_STATUS(Code::kInvalid, c().RenameSync(c().root(), "keep", c().root(), bad));
    EXPECT_STATUS(Code::kInvalid, c().RemoveSync(c().root(), bad, false));
    EXPECT_STATUS(Code::kInvalid, c().RemoveSync(c().root(), bad, true));
  }
  for (const std::string& bad : {std::string("a/b"), with_nul}) {
    EXPECT_STATUS(Code::kInvalid, c().LookupSync(c().root(), bad));
  }
  // The directory still lists exactly what it had.
  Result<client::DirPage> page = c().ReadDirSync(c().root(), "", 1000, false);
  ASSERT_OK(page);
  for (const client::DirEntry& e : page->entries) {
    EXPECT_TRUE(ValidateName(e.name).ok()) << "stored bad name \"" << e.name << "\"";
  }
}

TEST_F(BadInputTest, SymlinkAndXattrLimits) {
  CreateArgs sl;
  sl.type = FileType::kSymlink;
  sl.mode = 0777;
  sl.symlink_target = std::string(kMaxSymlinkBytes + 1, 't');
  Status st = c().CreateSync(c().root(), "longlink", sl).status();
  EXPECT_TRUE(st.code() == Code::kNameTooLong || st.code() == Code::kInvalid) << st.ToString();
  sl.symlink_target.clear();
  st = c().CreateSync(c().root(), "emptylink", sl).status();
  EXPECT_TRUE(st.code() == Code::kInvalid || st.code() == Code::kNotFound) << st.ToString();

  st = c().SetXattrSync(keep_->handle, "user." + std::string(300, 'x'), "v", 0);
  EXPECT_TRUE(st.code() == Code::kNameTooLong || st.code() == Code::kRange ||
              st.code() == Code::kInvalid)
      << st.ToString();
  st = c().SetXattrSync(keep_->handle, "user.big", std::string(kMaxXattrValueBytes + 1, 'v'), 0);
  EXPECT_TRUE(st.code() == Code::kTooBig || st.code() == Code::kNoSpace ||
              st.code() == Code::kRange || st.code() == Code::kInvalid)
      << st.ToString();
  st = c().SetXattrSync(keep_->handle, "", "v", 0);
  EXPECT_FALSE(st.ok());
  st = c().SetXattrSync(keep_->handle, "user.flags", "v", 7);  // unknown flag bits
  EXPECT_FALSE(st.ok()) << "xattr flags 7 accepted";
  EXPECT_STATUS(Code::kNoData, c().GetXattrSync(keep_->handle, "user.big"));
}

TEST_F(BadInputTest, OffsetsPastMaxFileSize) {
  Result<Attr> f = c().CreateSync(c().root(), "big-offsets", CreateArgs{});
  ASSERT_OK(f);
  auto too_big = [](const Status& s) {
    return s.code() == Code::kFileTooBig || s.code() == Code::kInvalid;
  };
  Status st = c().WriteSync(f->handle, f->layout, kMaxFileSize, "x").status();
  EXPECT_TRUE(too_big(st)) << st.ToString();
  st = c().WriteSync(f->handle, f->layout, kMaxFileSize - 1, "xy").status();
  EXPECT_TRUE(too_big(st)) << "write crossing the maximum file size: " << st.ToString();
  const uint64_t max64 = std::numeric_limits<uint64_t>::max();
  st = c().WriteSync(f->handle, f->layout, max64 - 1, "overflow").status();
  EXPECT_TRUE(too_big(st)) << "offset+length overflows 64 bits: " << st.ToString();
  st = c().ReadSync(f->handle, f->layout, max64 - 10, 100).status();
  EXPECT_TRUE(too_big(st)) << "read range overflows 64 bits: " << st.ToString();
  st = c().ReadSync(f->handle, f->layout, kMaxFileSize + 4096, 10).status();
  EXPECT_TRUE(too_big(st)) << st.ToString();
  client::SetAttrArgs t;
  t.valid = client::kSetSize;
  t.size = kMaxFileSize + 1;
  st = c().SetAttrSync(f->handle, t).status();
  EXPECT_TRUE(too_big(st)) << "truncate past the maximum: " << st.ToString();
  t.size = max64;
  st = c().SetAttrSync(f->handle, t).status();
  EXPECT_TRUE(too_big(st)) << st.ToString();
  // Nothing was written: the file is still empty.
  Result<Attr> a = c().GetAttrSync(f->handle);
  ASSERT_OK(a);
  EXPECT_EQ(a->size, 0u);
}

TEST_F(BadInputTest, OversizedIoRequest) {
  Result<Attr> f = c().CreateSync(c().root(), "oversized", CreateArgs{});
  ASSERT_OK(f);
  // One request larger than the per-request limit: the client may split it or the
  // server may refuse it, but it must not crash anything and must not store garbage.
  std::string data = PatternBytes(3, 0, kMaxIoBytes + 4096);
  Result<uint64_t> w = c().WriteSync(f->handle, f->layout, 0, data);
  if (w.ok()) {
    EXPECT_EQ(*w, data.size());
    Result<std::string> r1 = c().ReadSync(f->handle, f->layout, 0, kMaxIoBytes);
    ASSERT_OK(r1);
    EXPECT_EQ(FirstDifference(*r1, data.substr(0, kMaxIoBytes)), -1);
    Result<std::string> r2 = c().ReadSync(f->handle, f->layout, kMaxIoBytes, 4096);
    ASSERT_OK(r2);
    EXPECT_EQ(FirstDifference(*r2, data.substr(kMaxIoBytes)), -1);
  } else {
    EXPECT_TRUE(w.status().code() == Code::kTooBig || w.status().code() == Code::kInvalid)
        << w.status().ToString();
  }
  // The same for a read larger than one request.
  Result<std::string> big = c().ReadSync(f->handle, f->layout, 0, kMaxIoBytes + 4096);
  if (big.ok()) {
    EXPECT_EQ(big->size(), kMaxIoBytes + 4096);
  } else {
    EXPECT_TRUE(big.status().code() == Code::kTooBig || big.status().code() == Code::kInvalid)
        << big.status().ToString();
  }
  ASSERT_OK(c().RemoveSync(c().root(), "oversized", false));
}

TEST_F(BadInputTest, BadLayouts) {
  CreateArgs dir;
  dir.type = FileType::kDirectory;
  dir.mode = 0755;
  Result<Attr> d = c().CreateSync(c().root(), "layouts", dir);
  ASSERT_OK(d);
  const Layout before = d->layout;
  std::vector<Layout> bad;
  Layout l = before;
  l.stripe_size = 1000;  // below the minimum
  bad.push_back(l);
  l = before;
  l.stripe_size = kMaxStripeSize + 1;
  bad.push_back(l);
  l = before;
  l.stripe_count = 99;  // more than the servers
  bad.push_back(l);
  l = before;
  l.first_server = 1000;
  bad.push_back(l);
  l = before;
  l.replicas = 0;
  bad.push_back(l);
  for (const Layout& b : bad) {
    client::SetAttrArgs args;
    args.valid = client::kSetLayout;
    args.layout = b;
    Status st = c().SetAttrSync(d->handle, args).status();
    EXPECT_EQ(st.code(), Code::kInvalid)
        << st.ToString() << ": stripe_size " << b.stripe_size << " count " << b.stripe_count << " first "
        << b.first_server << " replicas " << b.replicas;
  }
  Result<Attr> after = c().GetAttrSync(d->handle);
  ASSERT_OK(after);
  EXPECT_EQ(after->layout, before);
  // Files created below still work with the unchanged default.
  Result<Attr> f = c().CreateSync(d->handle, "f", CreateArgs{});
  ASSERT_OK(f);
  ASSERT_OK(c().WriteSync(f->handle, f->layout, 0, "ok"));
}

TEST_F(BadInputTest, UnknownHandles) {
  // A handle no server issued, on an existing server and on a server that does not exist.
  const Handle missing = MakeHandle(1, 0xFFFFFFFFFFull);
  Status st = c().GetAttrSync(missing).status();
  EXPECT_TRUE(st.code() == Code::kNotFound || st.code() == Code::kStale) << st.ToString();
  st = c().LookupSync(missing, "x").status();
  EXPECT_TRUE(st.code() == Code::kNotFound || st.code() == Code::kStale) << st.ToString();
  const Handle no_server = MakeHandle(999, 5);
  st = c().GetAttrSync(no_server).status();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.code(), Code::kUnavailable) << "a handle of a server that is not in the cluster "
                                              "is bad input, not an outage: "
                                           << st.ToString();
  st = c().CreateSync(missing, "child", CreateArgs{}).status();
  EXPECT_TRUE(st.code() == Code::kNotFound || st.code() == Code::kStale) << st.ToString();
  // Directory operations on a file.
  EXPECT_STATUS(Code::kNotDir, c().CreateSync(keep_->handle, "child", CreateArgs{}));
  EXPECT_STATUS(Code::kNotDir, c().LookupSync(keep_->handle, "child"));
  EXPECT_STATUS(Code::kNotDir, c().ReadDirSync(keep_->handle, "", 10, false));
}

}  // namespace
}  // namespace clf::testing
