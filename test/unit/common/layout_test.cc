#include <map>
#include <random>

#include "common/config.h"
#include "common/layout.h"
#include "test/support/test_util.h"

namespace clf {
namespace {

// Reference: walk the bytes one stripe unit at a time.
struct Loc {
  ServerId server;
  uint64_t local;
};
Loc Where(const Layout& l, uint32_t n, uint64_t off) {
  uint64_t unit = off / l.stripe_size;
  return Loc{static_cast<ServerId>((l.first_server + unit % l.stripe_count) % n),
             (unit / l.stripe_count) * l.stripe_size + off % l.stripe_size};
}

TEST(LayoutTest, MapRangeMatchesBytewiseReference) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 2000; ++iter) {
    uint32_t n = 1 + rng() % 6;
    Layout l{4096u * (1 + static_cast<uint32_t>(rng() % 4)), 1 + static_cast<uint32_t>(rng() % n),
             static_cast<uint32_t>(rng() % n), 1};
    uint64_t off = rng() % (1 << 20);
    uint64_t len = rng() % (1 << 17);
    std::vector<Piece> pieces = MapRange(l, n, off, len);
    uint64_t covered = 0, expect_logical = off;
    for (const Piece& p : pieces) {
      ASSERT_EQ(p.logical_offset, expect_logical);
      ASSERT_GT(p.length, 0u);
      // First and last byte of the piece land where the reference says.
      Loc a = Where(l, n, p.logical_offset), b = Where(l, n, p.logical_offset + p.length - 1);
      ASSERT_EQ(a.server, p.server);
      ASSERT_EQ(a.local, p.local_offset);
      ASSERT_EQ(b.server, p.server);
      ASSERT_EQ(b.local, p.local_offset + p.length - 1);
      covered += p.length;
      expect_logical += p.length;
    }
    ASSERT_EQ(covered, len);
  }
}

TEST(LayoutTest, LocalSizeAndLogicalEndAgree) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    uint32_t n = 1 + rng() % 8;
    Layout l{4096, 1 + static_cast<uint32_t>(rng() % n), static_cast<uint32_t>(rng() % n), 1};
    uint64_t size = rng() % (4096 * 40);
    uint64_t max_end = 0;
    for (ServerId s = 0; s < n; ++s) {
      uint64_t local = LocalSizeFor(l, n, s, size);
      if (StripeIndex(l, n, s) < 0) {
        ASSERT_EQ(local, 0u);
      }
      uint64_t end = LogicalEnd(l, n, s, local);
      ASSERT_LE(end, size);
      max_end = std::max(max_end, end);
      // Every byte below `size` on server s is below its local size, and none above.
      if (size > 0) {
        for (uint64_t probe : {uint64_t{0}, size / 2, size - 1}) {
          Loc w = Where(l, n, probe);
          if (w.server == s) {
            ASSERT_LT(w.local, local);
          }
        }
      }
    }
    ASSERT_EQ(max_end, size) << "n=" << n << " count=" << l.stripe_count;
  }
}

TEST(LayoutTest, ValidateRejectsBadLayouts) {
  EXPECT_OK(ValidateLayout(Layout{1 << 20, 4, 0, 1}, 4));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1000, 4, 0, 1}, 4));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1 << 20, 5, 0, 1}, 4));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1 << 20, 0, 0, 1}, 4));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1 << 20, 2, 4, 1}, 4));
  EXPECT_OK(ValidateLayout(Layout{1 << 20, 2, 0, 2}, 4));
  EXPECT_OK(ValidateLayout(Layout{1 << 20, 2, 0, 3}, 4));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1 << 20, 2, 0, 4}, 4));  // > kMaxReplicas
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1 << 20, 2, 0, 3}, 2));  // > servers
  EXPECT_OK(ValidateLayout(Layout{1 << 20, 1, 0, 1}, 1));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1 << 20, 1, 0, 2}, 1));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{1 << 20, 2, 0, 0}, 4));
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(Layout{0, 2, 0, 1}, 4));
}

// Paper 001's placement: replica i of the units whose primary is p on p + i.
TEST(LayoutTest, ReplicaPlacement) {
  EXPECT_EQ(ReplicaServer(3, 1, 4), 0u);
  EXPECT_EQ(ReplicaServer(1, 2, 4), 3u);
  for (ServerId p = 0; p < 5; ++p) {
    for (uint32_t slot = 0; slot < 3; ++slot) {
      EXPECT_EQ(PrimaryOfSlot(ReplicaServer(p, slot, 5), slot, 5), p);
    }
  }
  // Two of four servers (first 3: servers 3 and 0), two copies: server 3
  // holds slot 0 of its own units, server 0 slot 0 of its own and slot 1 of
  // server 3's, server 1 slot 1 of server 0's; server 2 holds nothing.
  const Layout l{4096, 2, 3, 2};
  EXPECT_EQ(SlotsOn(l, 4, 3), (std::vector<uint32_t>{0}));
  EXPECT_EQ(SlotsOn(l, 4, 0), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(SlotsOn(l, 4, 1), (std::vector<uint32_t>{1}));
  EXPECT_TRUE(SlotsOn(l, 4, 2).empty());
  EXPECT_EQ(CopyServers(l, 4), (std::vector<ServerId>{0, 1, 3}));
  // Unreplicated: the data servers, slot 0 only.
  const Layout one{4096, 2, 3, 1};
  EXPECT_EQ(CopyServers(one, 4), (std::vector<ServerId>{0, 3}));
  EXPECT_EQ(SlotsOn(one, 4, 0), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(SlotsOn(one, 4, 1).empty());
}

// Layouts ValidateLayout refuses still reach the math from the wire in a
// server that forgot to validate: it maps them to nothing, never divides by zero.
TEST(LayoutTest, DegenerateLayoutsMapToNothing) {
  for (const Layout& l : {Layout{0, 2, 0, 1}, Layout{4096, 0, 0, 1}}) {
    EXPECT_TRUE(MapRange(l, 4, 0, 100000).empty());
    EXPECT_TRUE(DataServers(l, 4).empty());
    EXPECT_EQ(StripeIndex(l, 4, 1), -1);
    EXPECT_EQ(LocalSizeFor(l, 4, 1, 12345), 0u);
    EXPECT_EQ(LogicalEnd(l, 4, 1, 12345), 0u);
  }
  const Layout ok{4096, 2, 0, 1};
  EXPECT_TRUE(MapRange(ok, 0, 0, 100).empty());
  EXPECT_EQ(StripeIndex(ok, 0, 0), -1);
  EXPECT_EQ(StripeIndex(ok, 4, 9), -1);  // a server outside the cluster
  EXPECT_EQ(DataServers(Layout{4096, 0xFFFFFFFFu, 0, 1}, 4).size(), 4u);  // never more than n
}

TEST(ConfigTest, ParsesAndRoundTrips) {
  const char* text = R"(
[cluster]
name = "t"
secret_file = "secret"
stripe_size = 65536
[[server]]
id = 1
address = "127.0.0.1:2"
data_dir = "d1"
[[server]]
id = 0
address = "127.0.0.1:1"
data_dir = "/abs/d0"
)";
  Result<ClusterConfig> c = ParseClusterConfig(text, "/base");
  ASSERT_OK(c);
  EXPECT_EQ(c->size(), 2u);
  EXPECT_EQ(c->servers[0].data_dir, "/abs/d0");
  EXPECT_EQ(c->servers[1].data_dir, "/base/d1");
  EXPECT_EQ(c->secret_file, "/base/secret");
  EXPECT_EQ(c->default_layout.stripe_size, 65536u);
  EXPECT_EQ(c->default_layout.stripe_count, 2u);
  Result<ClusterConfig> again = ParseClusterConfig(RenderClusterConfig(*c), "/elsewhere");
  ASSERT_OK(again);
  EXPECT_EQ(again->servers[1].data_dir, "/base/d1");
  EXPECT_EQ(again->default_layout, c->default_layout);
}

TEST(ConfigTest, RejectsBadFiles) {
  EXPECT_STATUS(Code::kInvalid, ParseClusterConfig("[cluster]\n", "/"));
  EXPECT_STATUS(Code::kInvalid, ParseClusterConfig("[[server]]\nid = 0\naddress = \"x\"\ndata_dir = \"d\"\n", "/"));
  EXPECT_STATUS(Code::kInvalid, ParseClusterConfig("this is not toml = = =", "/"));
  EXPECT_STATUS(Code::kInvalid,
                ParseClusterConfig("[[server]]\nid = 1\naddress = \"h:1\"\ndata_dir = \"d\"\n", "/"));
  // Client mode needs the peer secret (the key of the object capabilities).
  EXPECT_STATUS(Code::kInvalid,
                ParseClusterConfig("[cluster]\nmetadata_mode = \"client\"\n[[server]]\nid = 0\n"
                                   "address = \"h:1\"\ndata_dir = \"d\"\n", "/"));
}

TEST(ConfigTest, ClientModeParses) {
  Result<ClusterConfig> c = ParseClusterConfig(
      "[cluster]\nmetadata_mode = \"client\"\nsecret_file = \"s\"\npeer_secret_file = \"p\"\n"
      "[[server]]\nid = 0\naddress = \"h:1\"\ndata_dir = \"d\"\n",
      "/");
  ASSERT_OK(c.status());
  EXPECT_EQ(c->metadata_mode, MetadataMode::kClient);
  Result<ClusterConfig> again = ParseClusterConfig(RenderClusterConfig(*c), "/");
  ASSERT_OK(again.status());
  EXPECT_EQ(again->metadata_mode, MetadataMode::kClient);
}

TEST(NameTest, Rules) {
  EXPECT_OK(ValidateName("a"));
  EXPECT_OK(ValidateName(std::string(255, 'x')));
  EXPECT_STATUS(Code::kNameTooLong, ValidateName(std::string(256, 'x')));
  EXPECT_STATUS(Code::kInvalid, ValidateName(""));
  EXPECT_STATUS(Code::kInvalid, ValidateName("a/b"));
  EXPECT_STATUS(Code::kInvalid, ValidateName(std::string("a\0b", 3)));
  EXPECT_STATUS(Code::kInvalid, ValidateName("."));
  EXPECT_STATUS(Code::kInvalid, ValidateName(".."));
}

}  // namespace
}  // namespace clf
