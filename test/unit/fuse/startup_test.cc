// clfmount's command line, parsed and resolved without mounting anything:
// which -o option lands where, the defaults, and the error for each bad value.
#include "fuse/startup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/sched_settings.h"
#include "test/support/test_util.h"

namespace clf::fuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// argv parsed as clfmount parses it ("clfmount" first); freed at the end.
class CommandLine {
 public:
  explicit CommandLine(std::vector<std::string> argv) : argv_(std::move(argv)) {
    argv_.insert(argv_.begin(), "clfmount");
    for (std::string& a : argv_) ptrs_.push_back(a.data());
    ptrs_.push_back(nullptr);
    args_ = FUSE_ARGS_INIT(static_cast<int>(argv_.size()), ptrs_.data());
    parsed_ = ParseCommandLine(&args_, &o_);
  }
  ~CommandLine() {
    fuse_opt_free_args(&args_);
    FreeStrings(&o_);
  }
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  bool parsed() const { return parsed_; }
  const CliOptions& options() const { return o_; }
  // What is left for libfuse, without the program name.
  std::vector<std::string> for_libfuse() const {
    std::vector<std::string> out;
    for (int i = 1; i < args_.argc; ++i) out.emplace_back(args_.argv[i]);
    return out;
  }
  Result<ResolvedOptions> Resolve(bool pipes_usable = true) const {
    return ResolveOptions(o_, [pipes_usable] { return pipes_usable; });
  }

 private:
  std::vector<std::string> argv_;
  std::vector<char*> ptrs_;
  fuse_args args_{};
  CliOptions o_;
  bool parsed_ = false;
};

// The message of a resolution that must fail with kInvalid.
std::string ErrorOf(const std::vector<std::string>& argv) {
  CommandLine cl(argv);
  EXPECT_TRUE(cl.parsed());
  Result<ResolvedOptions> r = cl.Resolve();
  EXPECT_EQ(r.status().code(), Code::kInvalid) << r.status().ToString();
  return r.status().message();
}

// ---------------------------------------------------------------- parsing

TEST(StartupTest, PositionalArgumentsAreTheClusterFileAndTheMountPoint) {
  CommandLine cl({"cluster.toml", "/mnt/clf"});
  ASSERT_TRUE(cl.parsed());
  EXPECT_STREQ(cl.options().cluster_file, "cluster.toml");
  EXPECT_STREQ(cl.options().mountpoint, "/mnt/clf");
  EXPECT_EQ(cl.options().foreground, 0);
  EXPECT_EQ(cl.options().debug, 0);
  EXPECT_TRUE(cl.for_libfuse().empty());
}

TEST(StartupTest, AThirdPositionalArgumentIsRefused) {
  CommandLine cl({"cluster.toml", "/mnt/clf", "extra"});
  EXPECT_FALSE(cl.parsed());
  EXPECT_EQ(cl.options().bad, 1);
}

TEST(StartupTest, MissingArgumentsParseButAreLeftNull) {
  CommandLine cl({"cluster.toml"});
  ASSERT_TRUE(cl.parsed());
  EXPECT_STREQ(cl.options().cluster_file, "cluster.toml");
  EXPECT_EQ(cl.options().mountpoint, nullptr);
}

TEST(StartupTest, DebugMeansForegroundAndIsPassedToLibfuse) {
  CommandLine cl({"c", "m", "-d"});
  ASSERT_TRUE(cl.parsed());
  EXPECT_EQ(cl.options().foreground, 1);
  EXPECT_EQ(cl.options().debug, 1);
  EXPECT_THAT(cl.for_libfuse(), ElementsAre("-d"));
}

TEST(StartupTest, ForegroundHelpAndVersionAreOurs) {
  CommandLine fg({"c", "m", "-f"});
  ASSERT_TRUE(fg.parsed());
  EXPECT_EQ(fg.options().foreground, 1);
  EXPECT_EQ(fg.options().debug, 0);
  EXPECT_TRUE(fg.for_libfuse().empty());
  CommandLine help({"--help"});
  ASSERT_TRUE(help.parsed());
  EXPECT_EQ(help.options().help, 1);
  CommandLine version({"-V"});
  ASSERT_TRUE(version.parsed());
  EXPECT_EQ(version.options().version, 1);
}

TEST(StartupTest, MountHelperFlagsAreDropped) {
  CommandLine cl({"c", "m", "-n", "-v"});
  ASSERT_TRUE(cl.parsed());
  EXPECT_TRUE(cl.for_libfuse().empty());
}

TEST(StartupTest, OptionsNotOursGoToLibfuse) {
  CommandLine cl({"c", "m", "-o", "allow_other,attr_timeout=3,ro"});
  ASSERT_TRUE(cl.parsed());
  EXPECT_DOUBLE_EQ(cl.options().attr_timeout, 3.0);
  EXPECT_THAT(cl.for_libfuse(), ElementsAre("-o", "allow_other,ro"));
}

// ---------------------------------------------------------------- resolution

TEST(StartupTest, DefaultsResolveToTheDocumentedSettings) {
  CommandLine cl({"c", "m"});
  ASSERT_TRUE(cl.parsed());
  Result<ResolvedOptions> r = cl.Resolve();
  ASSERT_OK(r);
  EXPECT_EQ(r->log_level, "info");
  const MountOptions& m = r->mopts;
  EXPECT_DOUBLE_EQ(m.attr_timeout, 1.0);
  EXPECT_DOUBLE_EQ(m.entry_timeout, 1.0);
  EXPECT_DOUBLE_EQ(m.negative_timeout, 1.0);
  EXPECT_FALSE(m.writeback);
  EXPECT_TRUE(m.kernel_permissions);
  EXPECT_TRUE(m.writebehind);
  EXPECT_TRUE(m.parallel_writes);
  EXPECT_TRUE(m.async_ns);
  EXPECT_TRUE(m.splice_reads);
  EXPECT_EQ(m.max_pages, 1024u);
  EXPECT_EQ(m.direct_read_min, uint64_t{16} << 20);
  EXPECT_EQ(m.lock_lease_ms, 0u);
  const client::ClientOptions& c = r->copts;
  EXPECT_EQ(c.transport, "");
  EXPECT_EQ(c.tls_cert, "");
  EXPECT_EQ(c.tls_key, "");
  EXPECT_EQ(c.sched, "");
  EXPECT_EQ(c.sched_block, 0u);
  EXPECT_EQ(c.read_sched, "");
  EXPECT_EQ(c.sched_window, 0u);
}

TEST(StartupTest, MountFlagsResolveToTheMountOptions) {
  CommandLine cl({"c", "m", "-o",
                  "writeback,nodefault_permissions,nowritebehind,noparallel_writes,noasync,"
                  "attr_timeout=2.5,entry_timeout=0,negative_timeout=7,lock_lease_ms=3000,"
                  "max_pages=0,direct_read_min=4M"});
  ASSERT_TRUE(cl.parsed());
  Result<ResolvedOptions> r = cl.Resolve();
  ASSERT_OK(r);
  const MountOptions& m = r->mopts;
  EXPECT_TRUE(m.writeback);
  EXPECT_FALSE(m.kernel_permissions);
  EXPECT_FALSE(m.writebehind);
  EXPECT_FALSE(m.parallel_writes);
  EXPECT_FALSE(m.async_ns);
  EXPECT_DOUBLE_EQ(m.attr_timeout, 2.5);
  EXPECT_DOUBLE_EQ(m.entry_timeout, 0.0);
  EXPECT_DOUBLE_EQ(m.negative_timeout, 7.0);
  EXPECT_EQ(m.lock_lease_ms, 3000u);
  EXPECT_EQ(m.max_pages, 0u);
  EXPECT_EQ(m.direct_read_min, uint64_t{4} << 20);
}

TEST(StartupTest, DirectReadMinZeroTurnsItOff) {
  CommandLine cl({"c", "m", "-o", "direct_read_min=0"});
  Result<ResolvedOptions> r = cl.Resolve();
  ASSERT_OK(r);
  EXPECT_EQ(r->mopts.direct_read_min, 0u);
}

TEST(StartupTest, ClientOptionsResolveToTheClientsSettings) {
  CommandLine cl({"c", "m", "-o",
                  "transport=tcp,tls_cert=/etc/clf/me.crt,tls_key=/etc/clf/me.key,sched=hash,"
                  "sched_block=1M,read_sched=sjf,sched_window=1024"});
  ASSERT_TRUE(cl.parsed());
  Result<ResolvedOptions> r = cl.Resolve();
  ASSERT_OK(r);
  const client::ClientOptions& c = r->copts;
  EXPECT_EQ(c.transport, "tcp");
  EXPECT_EQ(c.tls_cert, "/etc/clf/me.crt");
  EXPECT_EQ(c.tls_key, "/etc/clf/me.key");
  EXPECT_EQ(c.sched, "hash");
  EXPECT_EQ(c.sched_block, uint64_t{1} << 20);
  EXPECT_EQ(c.read_sched, "sjf");
  EXPECT_EQ(c.sched_window, kMaxSchedWindow);
}

TEST(StartupTest, LogLevelIsTheOptionElseDebugWithDashDElseInfo) {
  CommandLine debug({"c", "m", "-d"});
  Result<ResolvedOptions> d = debug.Resolve();
  ASSERT_OK(d);
  EXPECT_EQ(d->log_level, "debug");
  CommandLine both({"c", "m", "-d", "-o", "loglevel=warn"});
  Result<ResolvedOptions> w = both.Resolve();
  ASSERT_OK(w);
  EXPECT_EQ(w->log_level, "warn");
}

TEST(StartupTest, NegativeTimeoutsAreRefused) {
  for (const char* opt : {"attr_timeout=-1", "entry_timeout=-0.5", "negative_timeout=-2"}) {
    CommandLine cl({"c", "m", "-o", opt});
    ASSERT_TRUE(cl.parsed()) << opt;
    EXPECT_EQ(CheckTimeouts(cl.options()).message(), "timeouts must not be negative") << opt;
    Result<ResolvedOptions> r = cl.Resolve();
    EXPECT_EQ(r.status().code(), Code::kInvalid) << opt;
    EXPECT_EQ(r.status().message(), "timeouts must not be negative") << opt;
  }
  CommandLine zero({"c", "m", "-o", "attr_timeout=0,entry_timeout=0,negative_timeout=0"});
  EXPECT_OK(CheckTimeouts(zero.options()));
}

TEST(StartupTest, EachBadValueIsRefusedNamingItsOption) {
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "transport=carrier-pigeon"}),
              StartsWith("-o transport: "));
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "transport=carrier-pigeon"}),
              HasSubstr("carrier-pigeon"));
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "sched=fastest"}), StartsWith("-o sched: "));
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "sched_block=1000"}), StartsWith("-o sched_block: "));
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "sched_block=64M"}), StartsWith("-o sched_block: "));
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "sched_block=lots"}), StartsWith("-o sched_block: "));
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "read_sched=nearest"}), StartsWith("-o read_sched: "));
  EXPECT_EQ(ErrorOf({"c", "m", "-o", "sched_window=1025"}), "-o sched_window: at most 1024");
  EXPECT_EQ(ErrorOf({"c", "m", "-o", "max_pages=65536"}), "-o max_pages: at most 65535");
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "direct_read_min=big"}),
              StartsWith("-o direct_read_min: "));
}

TEST(StartupTest, TheLargestAllowedValuesPass) {
  CommandLine cl({"c", "m", "-o", "max_pages=65535,sched_window=1024,sched_block=32M"});
  Result<ResolvedOptions> r = cl.Resolve();
  ASSERT_OK(r);
  EXPECT_EQ(r->mopts.max_pages, 65535u);
  EXPECT_EQ(r->copts.sched_window, 1024u);
  EXPECT_EQ(r->copts.sched_block, uint64_t{32} << 20);
}

TEST(StartupTest, TheFirstBadOptionIsTheError) {
  // Timeouts, then the client's options in the order of the usage, then the mount's.
  EXPECT_EQ(ErrorOf({"c", "m", "-o", "max_pages=70000,attr_timeout=-1"}),
            "timeouts must not be negative");
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "max_pages=70000,sched=fastest,transport=x"}),
              StartsWith("-o transport: "));
  EXPECT_THAT(ErrorOf({"c", "m", "-o", "max_pages=70000,sched_window=2000"}),
              StartsWith("-o sched_window: "));
}

TEST(StartupTest, SpliceReadsNeedUsablePipes) {
  CommandLine cl({"c", "m"});
  Result<ResolvedOptions> without = cl.Resolve(/*pipes_usable=*/false);
  ASSERT_OK(without);
  EXPECT_FALSE(without->mopts.splice_reads);
  Result<ResolvedOptions> with = cl.Resolve(/*pipes_usable=*/true);
  ASSERT_OK(with);
  EXPECT_TRUE(with->mopts.splice_reads);
}

TEST(StartupTest, PipesAreProbedOnlyWhenSpliceReadsIsOnAndTheClientOptionsPassed) {
  int probes = 0;
  auto probe = [&probes] {
    ++probes;
    return true;
  };
  CommandLine off({"c", "m", "-o", "nosplice_reads"});
  Result<ResolvedOptions> r = ResolveOptions(off.options(), probe);
  ASSERT_OK(r);
  EXPECT_FALSE(r->mopts.splice_reads);
  EXPECT_EQ(probes, 0);
  CommandLine bad({"c", "m", "-o", "sched=fastest"});
  EXPECT_FALSE(ResolveOptions(bad.options(), probe).ok());
  EXPECT_EQ(probes, 0);
  CommandLine on({"c", "m", "-o", "splice_reads"});
  ASSERT_OK(ResolveOptions(on.options(), probe));
  EXPECT_EQ(probes, 1);
}

// ---------------------------------------------------------------- paths and libfuse's options

TEST(StartupTest, LogPathIsMadeAbsoluteAgainstTheWorkingDirectory) {
  EXPECT_EQ(AbsoluteLogPath(nullptr, "/home/u"), "");
  EXPECT_EQ(AbsoluteLogPath("", "/home/u"), "");
  EXPECT_EQ(AbsoluteLogPath("/var/log/clf.log", "/home/u"), "/var/log/clf.log");
  EXPECT_EQ(AbsoluteLogPath("logs/clf.log", "/home/u"), "/home/u/logs/clf.log");
  EXPECT_EQ(AbsoluteLogPath("clf.log", ""), "clf.log");  // no working directory known
}

TEST(StartupTest, DefaultFuseOptionsNameTheClusterAndFollowPermissionsAndRoot) {
  CommandLine def({"c", "m"});
  EXPECT_EQ(DefaultFuseOptions(def.options(), "prod", /*root=*/false),
            "-ofsname=clf:prod,subtype=clf,default_permissions");
  EXPECT_EQ(DefaultFuseOptions(def.options(), "prod", /*root=*/true),
            "-ofsname=clf:prod,subtype=clf,default_permissions,allow_other");
  CommandLine nodef({"c", "m", "-o", "nodefault_permissions"});
  EXPECT_EQ(DefaultFuseOptions(nodef.options(), "prod", /*root=*/true),
            "-ofsname=clf:prod,subtype=clf,allow_other");
}

}  // namespace
}  // namespace clf::fuse
