// The cluster file: rendered by toml++ and parsed back; errors name their line.
#include <string>

#include "common/config.h"
#include "test/support/test_util.h"

namespace clf {
namespace {

ClusterConfig TwoServers() {
  ClusterConfig c;
  c.name = "c\"1";
  c.secret_file = "/etc/clf/secret";
  c.default_layout.stripe_size = 65536;
  c.default_layout.stripe_count = 2;
  c.sync_metadata = true;
  c.rpc_timeout_ms = 7000;
  for (ServerId k = 0; k < 2; ++k) {
    ServerConfig s;
    s.id = k;
    s.address = "10.0.0." + std::to_string(k + 1) + ":7000";
    s.data_dir = "/srv/clf/srv" + std::to_string(k);
    c.servers.push_back(s);
  }
  return c;
}

TEST(ClusterFileTest, RenderRoundTripsQuotesBackslashesAndNewlines) {
  ClusterConfig c = TwoServers();
  c.servers[0].data_dir = "/srv/a \"quoted\" dir\\with\\backslashes";
  c.servers[1].data_dir = "/srv/line\nbreak\ttab";
  c.servers[1].metrics_address = "10.0.0.2:9500";
  c.servers[0].rdma_address = "10.1.0.1:7001";
  c.transport = TransportKind::kRdma;
  c.rdma_provider = "verbs";
  const std::string text = RenderClusterConfig(c);
  Result<ClusterConfig> back = ParseClusterConfig(text, "/ignored");
  ASSERT_OK(back);
  EXPECT_EQ(back->name, c.name);
  EXPECT_EQ(back->secret_file, c.secret_file);
  EXPECT_EQ(back->default_layout, c.default_layout);
  EXPECT_EQ(back->sync_metadata, true);
  EXPECT_EQ(back->root_squash, false);
  EXPECT_EQ(back->rpc_timeout_ms, 7000u);
  EXPECT_EQ(back->transport, TransportKind::kRdma);
  EXPECT_EQ(back->rdma_provider, "verbs");
  ASSERT_EQ(back->servers.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(back->servers[k].id, c.servers[k].id);
    EXPECT_EQ(back->servers[k].address, c.servers[k].address);
    EXPECT_EQ(back->servers[k].data_dir, c.servers[k].data_dir) << text;
    EXPECT_EQ(back->servers[k].rdma_address, c.servers[k].rdma_address);
    EXPECT_EQ(back->servers[k].metrics_address, c.servers[k].metrics_address);
  }
  // Rendering the parsed config gives the same text.
  EXPECT_EQ(RenderClusterConfig(*back), text);
}

TEST(ClusterFileTest, RdmaAddressDefaultsToTheDataPortPlusOne) {
  ClusterConfig c = TwoServers();
  c.servers[1].data_address = "10.0.0.2:9000";
  c.servers[0].rdma_address = "10.1.0.1:7001";
  Result<std::string> a0 = RdmaAddressOf(c.servers[0]);
  Result<std::string> a1 = RdmaAddressOf(c.servers[1]);
  ASSERT_OK(a0);
  ASSERT_OK(a1);
  EXPECT_EQ(*a0, "10.1.0.1:7001");
  EXPECT_EQ(*a1, "10.0.0.2:9001");
  // An RDMA address that collides with another server's port is refused with rdma.
  c.transport = TransportKind::kRdma;
  c.servers[0].rdma_address = "10.0.0.2:9000";
  EXPECT_STATUS(Code::kInvalid, c.Validate());
  c.servers[0].rdma_address.clear();
  EXPECT_OK(c.Validate());
  c.rdma_provider = "efa";
  EXPECT_STATUS(Code::kInvalid, c.Validate());
}

TEST(ClusterFileTest, SyntaxErrorNamesTheLine) {
  Result<ClusterConfig> r = ParseClusterConfig("[cluster]\nname = \"x\"\nstripe_size = = 3\n", "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("line 3"), std::string::npos) << r.status().ToString();
}

TEST(ClusterFileTest, WrongTypeNamesTheLine) {
  const std::string text = RenderClusterConfig(TwoServers());
  // Replace the rendered stripe_size with a string.
  std::string bad = text;
  const size_t at = bad.find("stripe_size = 65536");
  ASSERT_NE(at, std::string::npos) << text;
  bad.replace(at, 19, "stripe_size = \"64K\"");
  int line = 1;
  for (size_t i = 0; i < at; ++i) line += bad[i] == '\n';
  Result<ClusterConfig> r = ParseClusterConfig(bad, "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("line " + std::to_string(line) + ": stripe_size must be an integer"),
            std::string::npos)
      << r.status().ToString();
}

TEST(ClusterFileTest, ServerErrorsNameTheLine) {
  Result<ClusterConfig> r = ParseClusterConfig(
      "[cluster]\nsecret_file = \"s\"\n\n[[server]]\nid = 0\naddress = \"nocolon\"\ndata_dir = \"d\"\n",
      "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("line 4"), std::string::npos) << r.status().ToString();
  r = ParseClusterConfig(
      "[[server]]\nid = 0\naddress = \"h:1\"\ndata_dir = \"d\"\nmetrics_address = 9100\n", "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("line 5: metrics_address must be a string"),
            std::string::npos)
      << r.status().ToString();
  r = ParseClusterConfig("[[server]]\nid = -2\naddress = \"h:1\"\ndata_dir = \"d\"\n", "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("line 2: id = -2 is outside"), std::string::npos)
      << r.status().ToString();
}

TEST(ClusterFileTest, MetricsAddressMustDifferFromEveryOtherAddress) {
  ClusterConfig c = TwoServers();
  c.servers[1].metrics_address = c.servers[0].address;
  ASSERT_STATUS(Code::kInvalid, c.Validate());
  c.servers[1].metrics_address = "10.0.0.2:9100";
  ASSERT_OK(c.Validate());
}

TEST(ClusterFileTest, RelativePathsResolveAgainstTheFileFolder) {
  Result<ClusterConfig> r = ParseClusterConfig(
      "[cluster]\nsecret_file = \"secret\"\n[[server]]\nid = 0\naddress = \"h:1\"\ndata_dir = \"d/x\"\n",
      "/etc/clf");
  ASSERT_OK(r);
  EXPECT_EQ(r->secret_file, "/etc/clf/secret");
  EXPECT_EQ(r->servers[0].data_dir, "/etc/clf/d/x");
  EXPECT_EQ(r->default_layout.stripe_count, 1u);
}

TEST(ClusterFileTest, TlsTableDefaultsToFilesInDirAndRoundTrips) {
  Result<ClusterConfig> r = ParseClusterConfig(
      "[cluster]\nsecret_file = \"secret\"\npeer_secret_file = \"peer\"\n"
      "[tls]\ndir = \"tls\"\n"
      "[[server]]\nid = 0\naddress = \"h:1\"\ndata_dir = \"d\"\n"
      "[[server]]\nid = 1\naddress = \"h:2\"\ndata_dir = \"e\"\ntls_cert = \"/x/s1.crt\"\n"
      "tls_key = \"/x/s1.key\"\n",
      "/etc/clf");
  ASSERT_OK(r);
  EXPECT_EQ(r->peer_secret_file, "/etc/clf/peer");
  EXPECT_TRUE(r->tls.enabled());
  EXPECT_TRUE(r->tls.encrypt_data);
  EXPECT_EQ(r->tls.CaPath(), "/etc/clf/tls/ca.crt");
  EXPECT_EQ(r->tls.ClientCertPath(), "/etc/clf/tls/client.crt");
  EXPECT_EQ(r->tls.ClientKeyPath(), "/etc/clf/tls/client.key");
  EXPECT_EQ(r->ServerCertPath(0), "/etc/clf/tls/server-0.crt");
  EXPECT_EQ(r->ServerKeyPath(0), "/etc/clf/tls/server-0.key");
  EXPECT_EQ(r->ServerCertPath(1), "/x/s1.crt");
  EXPECT_EQ(r->ServerKeyPath(1), "/x/s1.key");
  const std::string text = RenderClusterConfig(*r);
  Result<ClusterConfig> back = ParseClusterConfig(text, "/ignored");
  ASSERT_OK(back);
  EXPECT_EQ(back->tls.dir, "/etc/clf/tls");
  EXPECT_EQ(back->peer_secret_file, "/etc/clf/peer");
  EXPECT_EQ(back->ServerCertPath(1), "/x/s1.crt");
  EXPECT_EQ(RenderClusterConfig(*back), text);
}

TEST(ClusterFileTest, TlsMistakesAreNamed) {
  const std::string servers = "[[server]]\nid = 0\naddress = \"h:1\"\ndata_dir = \"d\"\n";
  // The old [cluster] keys point at the [tls] table.
  Result<ClusterConfig> r = ParseClusterConfig("[cluster]\ntls_ca = \"ca\"\n" + servers, "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("line 2: [cluster] tls_ca is not read"), std::string::npos)
      << r.status().ToString();
  r = ParseClusterConfig("[tls]\ndir = \"t\"\nencrypt = false\n" + servers, "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("line 3: [tls]: unknown key encrypt"), std::string::npos)
      << r.status().ToString();
  r = ParseClusterConfig("[tls]\nencrypt_data = false\n" + servers, "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("[tls] needs dir"), std::string::npos)
      << r.status().ToString();
  r = ParseClusterConfig("[tls]\nca = \"ca.crt\"\n" + servers, "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("client_cert and client_key must be set"), std::string::npos)
      << r.status().ToString();
  r = ParseClusterConfig("[tls]\ndir = \"t\"\nclient_cert = \"c.crt\"\n" + servers, "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("both client_cert and client_key"), std::string::npos)
      << r.status().ToString();
  r = ParseClusterConfig(servers + "tls_cert = \"s.crt\"\ntls_key = \"s.key\"\n", "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("need a [tls] table"), std::string::npos)
      << r.status().ToString();
  r = ParseClusterConfig("[cluster]\nsecret_file = \"s\"\npeer_secret_file = \"s\"\n" + servers,
                         "/");
  ASSERT_STATUS(Code::kInvalid, r);
  EXPECT_NE(r.status().message().find("peer_secret_file must differ"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace clf

namespace clf {
namespace {

const char kSchedHead[] = "[cluster]\nsecret_file = \"/s\"\n";
const char kSchedServer[] = "[[server]]\nid = 0\naddress = \"127.0.0.1:7000\"\ndata_dir = \"/d\"\n";

TEST(ClusterFileTest, SchedSettingsParseRenderAndRefuseBadValues) {
  Result<ClusterConfig> d = ParseClusterConfig(std::string(kSchedHead) + kSchedServer, "/");
  ASSERT_OK(d);
  EXPECT_EQ(d->sched.policy, OrderPolicy::kHashIos);  // defaults
  EXPECT_EQ(d->sched.block, 0u);
  EXPECT_EQ(d->sched.window, 0u);
  EXPECT_EQ(d->sched.read, ReadSched::kEatf);
  Result<ClusterConfig> c = ParseClusterConfig(
      std::string(kSchedHead) +
          "sched = \"first\"\nsched_block = \"256K\"\nsched_window = 3\nsched_server_slots = 1\n"
          "sched_max_bypass = 5\nread_sched = \"lcdf\"\n" +
          kSchedServer,
      "/");
  ASSERT_OK(c);
  EXPECT_EQ(c->sched.policy, OrderPolicy::kFirstIos);
  EXPECT_EQ(c->sched.block, 256u << 10);
  EXPECT_EQ(c->sched.window, 3u);
  EXPECT_EQ(c->sched_server_slots, 1u);
  EXPECT_EQ(c->sched_max_bypass, 5u);
  EXPECT_EQ(c->sched.read, ReadSched::kLcdf);
  Result<ClusterConfig> back = ParseClusterConfig(RenderClusterConfig(*c), "/");
  ASSERT_OK(back);
  EXPECT_EQ(back->sched, c->sched);
  EXPECT_EQ(back->sched_server_slots, 1u);
  for (const char* bad :
       {"sched = \"fifo\"\n", "sched_block = \"3000\"\n", "sched_block = \"64M\"\n",
        "sched_block = true\n", "sched_window = 5000\n", "read_sched = \"fastest\"\n",
        "read_sched = 3\n"}) {
    SCOPED_TRACE(bad);
    EXPECT_STATUS(Code::kInvalid,
                  ParseClusterConfig(std::string(kSchedHead) + bad + kSchedServer, "/"));
  }
}

TEST(ClusterFileTest, PurgeThrottleAndEarlyWritebackParseRenderAndRefuseBadValues) {
  Result<ClusterConfig> d = ParseClusterConfig(std::string(kSchedHead) + kSchedServer, "/");
  ASSERT_OK(d);
  EXPECT_EQ(d->purge_idle_ms, 200u);  // defaults, not written back
  EXPECT_EQ(d->purge_max_defer_ms, 30000u);
  EXPECT_EQ(RenderClusterConfig(*d).find("purge_"), std::string::npos);
  Result<ClusterConfig> c = ParseClusterConfig(
      std::string(kSchedHead) + "purge_idle_ms = 0\npurge_max_defer_ms = 600000\n" + kSchedServer,
      "/");
  ASSERT_OK(c);
  EXPECT_EQ(c->purge_idle_ms, 0u);
  EXPECT_EQ(c->purge_max_defer_ms, 600000u);
  Result<ClusterConfig> back = ParseClusterConfig(RenderClusterConfig(*c), "/");
  ASSERT_OK(back);
  EXPECT_EQ(back->purge_idle_ms, 0u);
  EXPECT_EQ(back->purge_max_defer_ms, 600000u);
  // Keys off by 0: the default is not rendered, 0 is parsed and rendered back.
  struct Key {
    const char* name;
    uint32_t ClusterConfig::*field;
    uint32_t default_value;
  };
  for (const Key& k : {Key{"early_writeback_kib", &ClusterConfig::early_writeback_kib, 256u},
                       Key{"read_ahead_kib", &ClusterConfig::read_ahead_kib, 4096u}}) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ((*d).*k.field, k.default_value);
    EXPECT_EQ(RenderClusterConfig(*d).find(k.name), std::string::npos);
    Result<ClusterConfig> off =
        ParseClusterConfig(std::string(kSchedHead) + k.name + " = 0\n" + kSchedServer, "/");
    ASSERT_OK(off);
    EXPECT_EQ((*off).*k.field, 0u);
    Result<ClusterConfig> off_back = ParseClusterConfig(RenderClusterConfig(*off), "/");
    ASSERT_OK(off_back);
    EXPECT_EQ((*off_back).*k.field, 0u);
  }
  // A misspelt [cluster] key is refused, not ignored.
  Result<ClusterConfig> typo =
      ParseClusterConfig(std::string(kSchedHead) + "direct_writes_kib = 1024\n" + kSchedServer, "/");
  EXPECT_STATUS(Code::kInvalid, typo);
  if (!typo.ok()) {
    EXPECT_NE(typo.status().message().find("unknown key direct_writes_kib"), std::string::npos);
  }
  // direct_write_kib: off (0) by default and not rendered; a value round-trips.
  EXPECT_EQ(d->direct_write_kib, 0u);
  EXPECT_EQ(RenderClusterConfig(*d).find("direct_write_kib"), std::string::npos);
  Result<ClusterConfig> direct =
      ParseClusterConfig(std::string(kSchedHead) + "direct_write_kib = 1024\n" + kSchedServer, "/");
  ASSERT_OK(direct);
  EXPECT_EQ(direct->direct_write_kib, 1024u);
  Result<ClusterConfig> direct_back = ParseClusterConfig(RenderClusterConfig(*direct), "/");
  ASSERT_OK(direct_back);
  EXPECT_EQ(direct_back->direct_write_kib, 1024u);
  for (const char* bad : {"purge_idle_ms = -1\n", "purge_idle_ms = 60001\n",
                          "purge_max_defer_ms = 3600001\n", "purge_idle_ms = \"1s\"\n",
                          "early_writeback_kib = -1\n", "early_writeback_kib = 1048577\n",
                          "read_ahead_kib = -1\n", "read_ahead_kib = 1048577\n",
                          "direct_write_kib = -1\n", "direct_write_kib = 65537\n"}) {
    SCOPED_TRACE(bad);
    EXPECT_STATUS(Code::kInvalid,
                  ParseClusterConfig(std::string(kSchedHead) + bad + kSchedServer, "/"));
  }
}

TEST(SchedSettingsTest, ByteSizesAndLayoutCodes) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64K"), 65536u);
  EXPECT_EQ(*ParseByteSize("1M"), 1u << 20);
  EXPECT_EQ(*ParseByteSize("1MiB"), 1u << 20);
  EXPECT_EQ(*ParseByteSize("2g"), 2ull << 30);
  for (const char* bad : {"", "K", "1X", "1KK", "-1"}) {
    SCOPED_TRACE(bad);
    EXPECT_STATUS(Code::kInvalid, ParseByteSize(bad));
  }
  for (OrderPolicy p : {OrderPolicy::kFirstIos, OrderPolicy::kRandomIos, OrderPolicy::kHashIos}) {
    EXPECT_EQ(SchedFromCode(SchedCode(p)), p);
  }
  // A layout carries them; ValidateLayout checks them.
  Layout l{1 << 20, 2, 0, 1, SchedCode(OrderPolicy::kHashIos), 1 << 20};
  EXPECT_OK(ValidateLayout(l, 2));
  l.sched_policy = 4;
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(l, 2));
  l.sched_policy = 1;
  l.sched_block = 1000;
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(l, 2));
  // read_sched: every name round-trips through its layout code; 8 is unknown.
  for (uint32_t code = 1; code <= kMaxReadSchedCode; ++code) {
    Result<ReadSched> r = ParseReadSched(ReadSchedName(ReadSchedFromCode(code)));
    ASSERT_OK(r);
    EXPECT_EQ(ReadSchedCode(*r), code);
  }
  l.sched_block = 1 << 20;
  l.read_sched = kMaxReadSchedCode;
  EXPECT_OK(ValidateLayout(l, 2));
  l.read_sched = kMaxReadSchedCode + 1;
  EXPECT_STATUS(Code::kInvalid, ValidateLayout(l, 2));
}

}  // namespace
}  // namespace clf
