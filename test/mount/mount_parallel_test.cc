// Parallel directory operations through the kernel: with libfuse 3.14 the
// kernel serializes lookups in one directory unless clfmount's INIT reply
// carries FUSE_PARALLEL_DIROPS (fuse/init_patch.*). Proof: the directory's
// server is stopped (SIGSTOP), so a lookup in it cannot finish; two lookups of
// different names in that directory must both reach clfmount while the first
// is still waiting.
//
// Parallel writes to one file: without FOPEN_PARALLEL_DIRECT_WRITES the kernel
// holds a file's lock across each write's round trip. Proof the same way: the
// server of a file's first stripe unit is stopped, a direct write there waits,
// and a write to the second unit (another server) through another open must
// still finish.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/scrape.h"
#include "test/support/test_util.h"

namespace clf::testing {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(MountParallelTest, LookupsInOneDirectoryRunConcurrently) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.rpc_timeout_ms = 5000;
  o.mount_options = "loglevel=debug";
  TestCluster c(o);
  ASSERT_OK(c.Start());
  const std::string mnt = c.mount_point();
  // The root directory lives on server 0: its lookups wait while it is stopped.
  ASSERT_OK(c.FreezeServer(0));
  std::vector<std::thread> lookers;
  for (const char* name : {"par-a", "par-b", "par-c"}) {
    lookers.emplace_back([&mnt, name] {
      struct stat st;
      (void)::stat((mnt + "/" + name).c_str(), &st);  // fails (EIO or ENOENT) later
    });
  }
  const std::string log_path = c.dir() + "/clfmount.log";
  const int64_t took = TestCluster::PollUntil(
      [&] {
        const std::string log = c.LogTail(-1, 1 << 20);
        return Count(log, "lookup 0x1 par-a") >= 1 && Count(log, "lookup 0x1 par-b") >= 1 &&
               Count(log, "lookup 0x1 par-c") >= 1;
      },
      3000);
  c.ResumeServer(0);
  for (std::thread& t : lookers) t.join();
  EXPECT_GE(took, 0) << "three lookups in one directory did not reach clfmount together: the "
                        "kernel serialized them (no FUSE_PARALLEL_DIROPS); mount log:\n"
                     << c.LogTail(-1, 3000);
  EXPECT_NE(c.LogTail(-1, 1 << 20).find("parallel dirops on"), std::string::npos)
      << "clfmount did not log that the INIT reply carried FUSE_PARALLEL_DIROPS";
}

// The server holding stripe unit 0 of `path` (a file under the mount), from
// `clf layout`: the line "  server K  ADDR  SIZE  units 0,...".
int ServerOfUnitZero(const TestCluster& c, const std::string& path) {
  tools::RunResult r = TestCluster::RunClf({"layout", "--cluster", c.cluster_file(), path}, 30000);
  if (r.exit_code != 0) return -1;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("  server ");
    const size_t units = line.find("units ");
    if (at == std::string::npos || units == std::string::npos) continue;
    const std::string list = line.substr(units + 6);
    if (list == "0" || list.rfind("0,", 0) == 0) return std::atoi(line.c_str() + at + 9);
  }
  return -1;
}

// Two opens of one file; unit 0's server stopped; a 4 KiB O_DIRECT write to
// unit 0 through the first open waits for it. Returns whether a write to unit
// 1 through the second open finished within `wait_ms` meanwhile.
bool SecondWriterFinishes(TestCluster& c, int wait_ms, std::string* why) {
  const std::string mnt = c.mount_point();
  const std::string path = mnt + "/shared";
  constexpr size_t kUnit = 1u << 20;
  {
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0644);
    if (fd < 0) return *why = "create failed", false;
    std::string bytes(2 * kUnit, 'x');
    const bool ok =
        ::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()) &&
        ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) return *why = "first fill failed", false;
  }
  const int stopped = ServerOfUnitZero(c, path);
  if (stopped < 0) return *why = "clf layout named no server for unit 0", false;
  const int a = ::open(path.c_str(), O_RDWR | O_DIRECT);
  const int b = ::open(path.c_str(), O_RDWR | O_DIRECT);
  void* buf = nullptr;
  if (a < 0 || b < 0 || ::posix_memalign(&buf, 4096, 4096) != 0) return *why = "open failed", false;
  std::memset(buf, 'y', 4096);
  if (Status f = c.FreezeServer(stopped); !f.ok()) return *why = f.ToString(), false;
  std::atomic<bool> a_done{false};
  std::atomic<int64_t> a_result{0};
  std::thread first([&] {
    const ssize_t n = ::pwrite(a, buf, 4096, 0);  // may fail with EIO after the rpc timeout
    a_result = n < 0 ? -errno : n;
    a_done = true;
  });
  // The first write is in the mount (it waits for the stopped server) before
  // the second starts.
  const int64_t in_mount = TestCluster::PollUntil(
      [&] { return c.LogTail(-1, 1 << 20).find(" off 0 len 4096") != std::string::npos; }, 5000);
  std::atomic<bool> b_done{false};
  std::thread second([&] {
    if (::pwrite(b, buf, 4096, kUnit) == 4096) b_done = true;
  });
  const int64_t took = TestCluster::PollUntil([&] { return b_done.load(); }, wait_ms);
  const bool first_waited = !a_done.load();
  c.ResumeServer(stopped);
  first.join();
  second.join();
  ::close(a);
  ::close(b);
  std::free(buf);
  if (in_mount < 0) *why = "the first write never reached the mount";
  if (!first_waited) {
    *why = "the first write (to unit 0, server " + std::to_string(stopped) +
           ", stopped) did not wait: it returned " + std::to_string(a_result.load()) +
           "; clf layout:\n" +
           TestCluster::RunClf({"layout", "--cluster", c.cluster_file(), path}, 30000).output +
           "mount log:\n" + c.LogTail(-1, 4000);
  }
  return in_mount >= 0 && first_waited && took >= 0;
}

TEST(MountParallelTest, WritersOfOneFileRunConcurrently) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.rpc_timeout_ms = 8000;
  o.mount_options = "loglevel=debug";
  TestCluster c(o);
  ASSERT_OK(c.Start());
  std::string why;
  EXPECT_TRUE(SecondWriterFinishes(c, 3000, &why))
      << "a write to another server's stripe unit waited for the first writer: the kernel "
         "serialized writers of one file. "
      << why << "; mount log:\n"
      << c.LogTail(-1, 3000);
  EXPECT_NE(c.LogTail(-1, 1 << 20).find("FUSE_DIRECT_IO_ALLOW_MMAP set"), std::string::npos)
      << "clfmount did not log that the INIT reply allows shared mmap of direct-I/O opens";
}

// Opens for writing bypass the page cache; what other opens see must not
// change: a reader holding cached pages sees a direct write at once, and a
// shared mapping of an open for writing works both ways (FUSE_DIRECT_IO_ALLOW_MMAP).
TEST(MountParallelTest, DirectWriteOpensStayCoherentWithCacheAndMmap) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  TestCluster c(o);
  ASSERT_OK(c.Start());
  const std::string path = c.mount_point() + "/coherent";
  const int r = ::open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(r, 0);
  ASSERT_EQ(::pwrite(r, std::string(8192, 'a').data(), 8192, 0), 8192);
  ::close(r);
  const int reader = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  std::string got(8192, '\0');
  ASSERT_EQ(::pread(reader, got.data(), got.size(), 0), 8192);  // now in the page cache
  ASSERT_EQ(got, std::string(8192, 'a'));
  const int writer = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(writer, 0);
  ASSERT_EQ(::pwrite(writer, "BBBB", 4, 100), 4);
  ASSERT_EQ(::pread(reader, got.data(), got.size(), 0), 8192);
  EXPECT_EQ(got.substr(98, 8), "aaBBBBaa")
      << "a cached reader missed a write through a writing open";
  ::close(writer);

  const int rw = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(rw, 0);
  void* map = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
  ASSERT_NE(map, MAP_FAILED) << "shared mmap of an open for writing: " << std::strerror(errno);
  char* p = static_cast<char*>(map);
  std::memcpy(p + 200, "mmap", 4);
  ASSERT_EQ(::msync(map, 8192, MS_SYNC), 0);
  ASSERT_EQ(::pread(reader, got.data(), got.size(), 0), 8192);
  EXPECT_EQ(got.substr(200, 4), "mmap") << "a write through a shared mapping is not seen by read";
  ASSERT_EQ(::pwrite(rw, "PWRT", 4, 300), 4);
  EXPECT_EQ(std::string(p + 300, 4), "PWRT")
      << "a shared mapping missed a write through its own open";
  ::munmap(map, 8192);
  ::close(rw);
  ::close(reader);
  // And everything reached the servers: a fresh open reads it back.
  const int again = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(again, 0);
  ASSERT_EQ(::pread(again, got.data(), got.size(), 0), 8192);
  ::close(again);
  EXPECT_EQ(got.substr(98, 8), "aaBBBBaa");
  EXPECT_EQ(got.substr(200, 4), "mmap");
  EXPECT_EQ(got.substr(300, 4), "PWRT");
}

// Write-behind answers a write of a file created on this mount (under its
// lease) before the servers have it, even with -o nowritebehind, but never an
// O_DIRECT, O_SYNC or O_DSYNC one. All through the creating descriptor (another
// open ends that state), every server stopped: a plain write returns (the
// proof that the file is in that state); RWF_SYNC, RWF_DSYNC and, after
// fcntl(O_DIRECT), a direct write wait until the servers come back; then every
// byte is on the servers.
TEST(MountParallelTest, SyncAndDirectWritesOfAFileMadeHereWaitForTheServers) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.rpc_timeout_ms = 8000;
  o.mount_options = "nowritebehind,loglevel=debug";
  TestCluster c(o);
  ASSERT_OK(c.Start());
  // What the servers hold: inodes, and bytes in data objects.
  auto held = [&c] {
    std::pair<uint64_t, uint64_t> n{0, 0};
    for (const client::ServerStatus& s : c.client().ServerStatuses()) {
      n.first += s.inodes;
      n.second += s.bytes_used;
    }
    return n;
  };
  const std::pair<uint64_t, uint64_t> before = held();
  const std::string path = c.mount_point() + "/born";
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  // Within the file's size: a write past it takes the kernel's exclusive lock.
  ASSERT_EQ(::pwrite(fd, std::string(16384, 'x').data(), 16384, 0), 16384);
  struct Writer {
    off_t off;
    char fill;
    int rwf;  // pwritev2 flags
    std::atomic<bool> done{false};
    std::atomic<int64_t> result{0};
  };
  Writer ws[4] = {{0, 'p', 0}, {4096, 's', RWF_SYNC}, {8192, 't', RWF_DSYNC}, {12288, 'd', 0}};
  std::vector<std::thread> threads;
  auto start = [&](Writer& w) {
    threads.emplace_back([&w, fd] {
      void* buf = nullptr;
      if (::posix_memalign(&buf, 4096, 4096) != 0) return;
      std::memset(buf, w.fill, 4096);
      iovec v{buf, 4096};
      const ssize_t n = ::pwritev2(fd, &v, 1, w.off, w.rwf);
      w.result = n < 0 ? -errno : n;
      w.done = true;
      std::free(buf);
    });
  };
  // The file's create and that write reach the servers (20 ms later) before they stop.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto now = held();
        return now.first > before.first && now.second >= before.second + 16384;
      },
      std::chrono::seconds(10)))
      << "the create or the first write never reached the servers";
  for (int k = 0; k < 2; ++k) ASSERT_OK(c.FreezeServer(k));
  start(ws[0]);
  const int64_t plain_took = TestCluster::PollUntil([&] { return ws[0].done.load(); }, 3000);
  // Windows in which the writes below must NOT be answered (the servers are
  // stopped); a write answered without them returns in well under this.
  constexpr auto kUnansweredFor = std::chrono::milliseconds(500);
  start(ws[1]);
  start(ws[2]);
  WaitPast(kUnansweredFor);
  const bool sync_waited = !ws[1].done.load(), dsync_waited = !ws[2].done.load();
  const int fl = ::fcntl(fd, F_GETFL);
  EXPECT_EQ(::fcntl(fd, F_SETFL, fl | O_DIRECT), 0) << std::strerror(errno);
  start(ws[3]);
  WaitPast(kUnansweredFor);
  const bool direct_waited = !ws[3].done.load();
  for (int k = 0; k < 2; ++k) c.ResumeServer(k);
  for (std::thread& t : threads) t.join();
  EXPECT_GE(plain_took, 0) << "a plain write of a file made here waited for the stopped servers "
                              "(no write-behind: the test proves nothing); mount log:\n"
                           << c.LogTail(-1, 4000);
  EXPECT_TRUE(sync_waited) << "an RWF_SYNC write was answered while every server was stopped";
  EXPECT_TRUE(dsync_waited) << "an RWF_DSYNC write was answered while every server was stopped";
  EXPECT_TRUE(direct_waited) << "an O_DIRECT write was answered while every server was stopped";
  for (const Writer& w : ws) EXPECT_EQ(w.result.load(), 4096) << "the write of '" << w.fill << "'";
  EXPECT_EQ(::close(fd), 0);
  const int again = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(again, 0);
  std::string got(16384, '\0');
  ASSERT_EQ(::pread(again, got.data(), got.size(), 0), 16384);
  ::close(again);
  EXPECT_TRUE(got == std::string(4096, 'p') + std::string(4096, 's') + std::string(4096, 't') +
                         std::string(4096, 'd'));
}

// The kernel sends FSYNC after an O_SYNC write only through its page cache;
// through a direct open the mount syncs the servers before it replies. Each
// O_SYNC / O_DSYNC / RWF_DSYNC write makes the servers sync the file (their
// fdatasync calls counted on their metrics); a plain write does not.
TEST(MountParallelTest, SyncWritesThroughDirectOpensReachTheDisk) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.metrics = true;
  TestCluster c(o);
  ASSERT_OK(c.Start());
  auto syncs = [&] {
    double sum = 0;
    for (int k = 0; k < c.size(); ++k) {
      const double v = Sample(Body(Get(c.config().servers[static_cast<size_t>(k)].metrics_address)),
                              "clf_object_syncs_total");
      EXPECT_GE(v, 0) << "server " << k << " has no clf_object_syncs_total";
      sum += v;
    }
    return sum;
  };
  const std::string path = c.mount_point() + "/synced";
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, std::string(8192, 'a').data(), 8192, 0), 8192);
  ASSERT_EQ(::fsync(fd), 0);
  const double base = syncs();
  ASSERT_GT(base, 0) << "fsync made no server sync: the counter proves nothing";
  ASSERT_EQ(::pwrite(fd, "plain", 5, 0), 5);
  EXPECT_EQ(syncs(), base) << "a plain write synced the servers";
  const int s = ::open(path.c_str(), O_WRONLY | O_SYNC);
  ASSERT_GE(s, 0);
  ASSERT_EQ(::pwrite(s, "osync", 5, 100), 5);
  const double after_osync = syncs();
  EXPECT_GT(after_osync, base) << "an O_SYNC write returned before the servers synced the file";
  const std::string d = "rwf_dsync";
  iovec v{const_cast<char*>(d.data()), d.size()};
  ASSERT_EQ(::pwritev2(fd, &v, 1, 200, RWF_DSYNC), static_cast<ssize_t>(d.size()));
  EXPECT_GT(syncs(), after_osync)
      << "an RWF_DSYNC write returned before the servers synced the file";
  ::close(s);
  ::close(fd);
}

// A directory lease that no commit renews (a directory only looked up in,
// or only passed through by renames) is asked again when it lapses while in
// use: lookups of absent names there stay answered by the mount. With 1 s
// leases (the mount stops answering half a second before the server's
// expiry) a 4 s run of lookups outlives the first grant several times over.
TEST(MountParallelTest, ALeaseThatLapsesInUseIsAskedAgain) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.metrics = true;
  o.dir_lease_ms = 1000;
  TestCluster c(o);
  ASSERT_OK(c.Start());
  auto count = [&](const std::string& series) {
    double sum = 0;
    for (int k = 0; k < c.size(); ++k) {
      const double v =
          Sample(Body(Get(c.config().servers[static_cast<size_t>(k)].metrics_address)), series);
      if (v > 0) sum += v;
    }
    return sum;
  };
  const std::string dir = c.mount_point() + "/looked-up";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const int made = ::open((dir + "/present").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(made, 0);
  ASSERT_EQ(::close(made), 0);
  const std::string lookups = "clf_rpc_handled_total{method=\"/clf.v1.Meta/Lookup\",code=\"NOT_FOUND\"}";
  const std::string grants = "clf_rpc_handled_total{method=\"/clf.v1.Meta/DirLease\",code=\"OK\"}";
  const double lookups_before = count(lookups);
  const double grants_before = count(grants);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  int asked = 0;
  for (; std::chrono::steady_clock::now() < end; ++asked) {
    struct stat st;
    const std::string absent = dir + "/absent-" + std::to_string(asked);
    ASSERT_EQ(::stat(absent.c_str(), &st), -1);
    ASSERT_EQ(errno, ENOENT);
  }
  const double on_server = count(lookups) - lookups_before;
  EXPECT_GE(count(grants) - grants_before, 3)
      << "the lease was not asked for again: the run did not outlive a grant";
  EXPECT_LT(on_server, asked / 20.0)
      << on_server << " of " << asked << " lookups of absent names went to the servers";
}

// The control: with -o noparallel_writes the kernel holds the file's lock
// across the first write, so the second one cannot finish while it waits.
TEST(MountParallelTest, WithoutParallelWritesTheKernelSerializes) {
  ClusterOptions o;
  o.servers = 2;
  o.mount = true;
  o.rpc_timeout_ms = 8000;
  o.mount_options = "loglevel=debug,noparallel_writes";
  TestCluster c(o);
  ASSERT_OK(c.Start());
  std::string why;
  EXPECT_FALSE(SecondWriterFinishes(c, 2000, &why)) << why;
  EXPECT_TRUE(why.empty()) << why;
}

}  // namespace
}  // namespace clf::testing
