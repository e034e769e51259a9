// Data and tree workloads through a real clfmount on real clfd servers.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// Data objects and their allocated bytes, counted in the servers' data dirs.
struct ObjectCount {
  uint64_t objects = 0;
  uint64_t allocated = 0;
};
ObjectCount CountObjects(const TestCluster& c) {
  ObjectCount out;
  for (int k = 0; k < c.size(); ++k) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(c.data_dir(k) + "/objects", ec), end; !ec && it != end;
         it.increment(ec)) {
      // objects/pool/ holds pre-created empty files, not data objects.
      if (it->is_directory() && it->path().filename() == "pool") {
        it.disable_recursion_pending();
        continue;
      }
      struct stat st;
      if (it->is_regular_file() && ::stat(it->path().c_str(), &st) == 0) {
        ++out.objects;
        out.allocated += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
  }
  return out;
}

// Data objects of one file (named by its handle) over all servers.
int ObjectsOf(const TestCluster& c, Handle h) {
  char name[32];
  std::snprintf(name, sizeof name, "%02x/%016llx", static_cast<unsigned>(h % 256),
                static_cast<unsigned long long>(h));
  int n = 0;
  for (int k = 0; k < c.size(); ++k) n += fs::exists(c.data_dir(k) + "/objects/" + name) ? 1 : 0;
  return n;
}

// Waits (polling, bounded) until the data objects count is `want`.
uint64_t WaitObjects(const TestCluster& c, uint64_t want, int timeout_ms = 20000) {
  const int64_t deadline = tools::NowMs() + timeout_ms;
  uint64_t n = CountObjects(c).objects;
  while (n != want && tools::NowMs() < deadline) {
    usleep(20000);
    n = CountObjects(c).objects;
  }
  return n;
}

Result<std::string> PRead(const std::string& path, uint64_t off, size_t len) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FromErrno(errno, "open " + path);
  std::string buf(len, '\0');
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, buf.data() + done, len - done, static_cast<off_t>(off + done));
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return FromErrno(e, "pread " + path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(done);
  return buf;
}

Status PWriteSync(const std::string& path, uint64_t off, const std::string& data, int flags = 0) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) return FromErrno(errno, "open " + path);
  ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(off));
  int e = errno;
  if (n != static_cast<ssize_t>(data.size())) {
    ::close(fd);
    return FromErrno(n < 0 ? e : EIO, "pwrite " + path);
  }
  if (::fsync(fd) != 0) {
    e = errno;
    ::close(fd);
    return FromErrno(e, "fsync " + path);
  }
  if (::close(fd) != 0) return FromErrno(errno, "close " + path);
  return Status::Ok();
}

// `ls -lR` of a tree with what must agree kept: names, types, modes, owners,
// sizes of non-directories, symlink targets. Link counts, times, block totals and
// directory sizes are fs-specific and dropped.
Result<std::vector<std::string>> LsLR(const std::string& dir) {
  CLF_ASSIGN_OR_RETURN(
      tools::RunResult r,
      tools::Run({"ls", "-lRn", "--time-style=+%s", "--color=never", dir}, 600000));
  if (r.exit_code != 0) return IoError("ls -lR " + dir + " exited " + std::to_string(r.exit_code));
  std::vector<std::string> out;
  std::istringstream in(r.output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("total ", 0) == 0 || line.empty()) continue;
    if (line.rfind(dir, 0) == 0) {  // "DIR/sub:" headers: make relative
      out.push_back(line.substr(dir.size()));
      continue;
    }
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    // perms nlink uid gid size mtime name... (mtimes: tar -p sets them, after
    // its writes: a size report must not replace them)
    for (int i = 0; i < 5 && ls >> w; ++i) f.push_back(w);
    std::string rest;
    std::getline(ls, rest);
    if (f.size() < 5) {
      out.push_back(line);
      continue;
    }
    std::string perms = f[0].substr(0, 10);  // drop an ACL/xattr marker
    bool is_dir = perms[0] == 'd';
    out.push_back(perms + " " + f[2] + " " + f[3] + " " + (is_dir ? "-" : f[4]) + rest);
  }
  return out;
}

class MountTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 4;
    o.mount = true;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  std::unique_ptr<TestCluster> cluster_;
};

// `find DIR -printf` of every file's size, mtime and path (relative), sorted.
std::string FindSizesAndTimes(const std::string& dir) {
  Result<tools::RunResult> r = tools::Run(
      {"bash", "-c", "cd \"$1\" && find . -type f -printf '%s %T@ %p\\n' | sort", "find", dir},
      60000);
  return r.ok() ? r->output : "<find failed: " + r.status().ToString() + ">";
}

// Right after tar -x, a listing of the fresh directories (readdir, then stat
// from the kernel's attributes) shows every file's size and time as tar left
// them. It once showed sizes of 0: re-asking a held directory's lease dropped
// the files created under it, and the listing took the servers' attributes
// from before their queued size reports and times.
TEST_F(MountTreeTest, FreshTarListsItsSizesAndTimes) {
  const std::string src = cluster_->dir() + "/fresh-src";
  for (int d = 0; d < 6; ++d) {
    const std::string dir = src + "/d" + std::to_string(d) + "/sub";
    fs::create_directories(dir);
    for (int f = 0; f < 20; ++f) {
      std::ofstream(dir + "/f" + std::to_string(f) + ".c")
          << std::string(static_cast<size_t>(100 + 397 * f + 31 * d), static_cast<char>('a' + f));
    }
  }
  Result<tools::RunResult> tarball =
      tools::Run({"tar", "-C", src, "-cf", cluster_->dir() + "/fresh.tar", "."}, 60000);
  ASSERT_OK(tarball);
  ASSERT_EQ(tarball->exit_code, 0) << tarball->output;
  // What tar -x gives on a local file system (tar keeps whole seconds).
  const std::string local = cluster_->dir() + "/fresh-local";
  fs::create_directories(local);
  Result<tools::RunResult> lx =
      tools::Run({"tar", "-C", local, "-xpf", cluster_->dir() + "/fresh.tar"}, 60000);
  ASSERT_OK(lx);
  ASSERT_EQ(lx->exit_code, 0) << lx->output;
  const std::string want = FindSizesAndTimes(local);
  ASSERT_NE(want.find(" ./d5/sub/f19.c"), std::string::npos) << want.substr(0, 400);
  for (int round = 0; round < 4; ++round) {
    const std::string dst = cluster_->mount_point() + "/fresh" + std::to_string(round);
    ASSERT_EQ(::mkdir(dst.c_str(), 0755), 0) << std::strerror(errno);
    Result<tools::RunResult> x =
        tools::Run({"tar", "-C", dst, "-xpf", cluster_->dir() + "/fresh.tar"}, 60000);
    ASSERT_OK(x);
    ASSERT_EQ(x->exit_code, 0) << x->output;
    const std::string got = FindSizesAndTimes(dst);
    EXPECT_TRUE(got == want) << "round " << round << ": clf\n"
                             << got.substr(0, 3000) << "\nlocal\n"
                             << want.substr(0, 3000);
  }
}

// cp -r onto the mount, then tar -c of the copy at once: every directory's
// attributes are the same in its parent's listing (readdirplus) as in its
// own stat, so tar sees no directory change while it reads the tree. It
// once saw one: a subdirectory's lease had this mount's times of the
// creates in it, its parent's listing the servers' times, and tar exited
// 1 with "file changed as we read it".
TEST_F(MountTreeTest, TarOfAFreshCopyReadsAStableTree) {
  const std::string src = cluster_->dir() + "/copy-src";
  for (int d = 0; d < 6; ++d) {
    const std::string dir = src + "/d" + std::to_string(d) + "/sub";
    fs::create_directories(dir);
    for (int f = 0; f < 20; ++f) {
      std::ofstream(dir + "/f" + std::to_string(f) + ".c") << std::string(100 + 31 * f, 'c');
    }
  }
  for (int round = 0; round < 3; ++round) {
    const std::string copy = "copy" + std::to_string(round);
    Result<tools::RunResult> cp =
        tools::Run({"cp", "-r", src, cluster_->mount_point() + "/" + copy}, 60000);
    ASSERT_OK(cp);
    ASSERT_EQ(cp->exit_code, 0) << cp->output;
    Result<tools::RunResult> tar =
        tools::Run({"tar", "-C", cluster_->mount_point(), "-cf", "/dev/null", copy}, 60000);
    ASSERT_OK(tar);
    EXPECT_EQ(tar->exit_code, 0) << "round " << round << ": " << tar->output;
  }
}

// tar a real tree onto the mount, diff -r, ls -lR, rm -rf: no objects left.
TEST_F(MountTreeTest, TarDiffLsRm) {
  const char* env_src = std::getenv("CLF_TREE_SRC");
  const std::string src = env_src && *env_src ? env_src : "/usr/include";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  const std::string parent = fs::path(src).parent_path().string();
  const std::string base = fs::path(src).filename().string();
  const std::string dst = cluster_->mount_point() + "/tree";
  ASSERT_EQ(::mkdir(dst.c_str(), 0755), 0) << std::strerror(errno);
  const uint64_t objects_before = CountObjects(*cluster_).objects;

  int64_t t0 = tools::NowMs();
  Result<tools::RunResult> tar = tools::Run(
      {"bash", "-c", "set -o pipefail; tar -C \"$1\" -cf - \"$2\" | tar -C \"$3\" -xpf -", "tar",
       parent, base, dst},
      900000);
  ASSERT_OK(tar);
  ASSERT_EQ(tar->exit_code, 0) << tar->output;
  const int64_t t_tar = tools::NowMs() - t0;

  t0 = tools::NowMs();
  Result<tools::RunResult> diff =
      tools::Run({"diff", "-r", "--no-dereference", src, dst + "/" + base}, 900000);
  ASSERT_OK(diff);
  EXPECT_EQ(diff->exit_code, 0) << diff->output.substr(0, 4000);
  const int64_t t_diff = tools::NowMs() - t0;

  t0 = tools::NowMs();
  Result<std::vector<std::string>> want = LsLR(src);
  Result<std::vector<std::string>> got = LsLR(dst + "/" + base);
  ASSERT_OK(want);
  ASSERT_OK(got);
  const int64_t t_ls = tools::NowMs() - t0;
  EXPECT_GT(want->size(), 100u);
  EXPECT_EQ(got->size(), want->size());
  size_t shown = 0;
  for (size_t i = 0; i < std::min(got->size(), want->size()) && shown < 20; ++i) {
    if ((*got)[i] != (*want)[i]) {
      ADD_FAILURE() << "ls -lR line " << i << ": clf \"" << (*got)[i] << "\" local \"" << (*want)[i]
                    << "\"";
      ++shown;
    }
  }
  EXPECT_GT(CountObjects(*cluster_).objects, objects_before);

  t0 = tools::NowMs();
  Result<tools::RunResult> rm = tools::Run({"rm", "-rf", dst}, 900000);
  ASSERT_OK(rm);
  EXPECT_EQ(rm->exit_code, 0) << rm->output.substr(0, 4000);
  const int64_t t_rm = tools::NowMs() - t0;
  EXPECT_FALSE(fs::exists(dst));
  EXPECT_EQ(WaitObjects(*cluster_, objects_before), objects_before)
      << "data objects left on the servers after rm -rf";
  // libclf agrees: nothing but what existed before (the root) is listed.
  for (int k = 0; k < cluster_->size(); ++k) {
    Result<client::Client::ObjectListing> l =
        cluster_->client().ListObjects(static_cast<ServerId>(k));
    ASSERT_OK(l);
    EXPECT_EQ(l->data_objects.size(), 0u) << "server " << k;
    EXPECT_EQ(l->orphans.size(), 0u) << "server " << k;
  }
  std::printf("tree %s: tar %.1f s, diff -r %.1f s, ls -lR (both) %.1f s, rm -rf %.1f s\n",
              src.c_str(), static_cast<double>(t_tar) / 1000, static_cast<double>(t_diff) / 1000,
              static_cast<double>(t_ls) / 1000, static_cast<double>(t_rm) / 1000);
}

// The data tests run once per bulk data transport: "tcp" (the cluster file
// says tcp: no fallback), "rdma" (the cluster file says rdma with
// rdma_provider = tcp: libfabric's one-sided RMA over sockets, no fallback)
// and "grpc" (the cluster file says auto, the mount asks for grpc with
// -o transport=grpc). One cluster per transport, started on
// first use and kept for the suite.
// replicas = 2 through the mount: a file created under a directory lease is
// committed later, but its copies take a write only once its metadata server
// knows it. Fresh files are written and read back at once (small, large,
// written behind and through O_DIRECT), and every one reads back whole.
// Writes once failed with EIO ("write-behind ... failed: replica state ...
// no such file") whenever the write reached the copies before the create's
// commit reached the metadata server.
TEST(MountReplicatedTest, FreshFilesWrittenAtOnceReadBack) {
  ClusterOptions o;
  o.servers = 4;
  o.stripe_size = 64 * 1024;
  o.replicas = 2;
  o.transport = "tcp";
  o.mount = true;
  TestCluster c(o);
  ASSERT_OK(c.Start());
  for (int i = 0; i < 40; ++i) {
    const std::string path = c.mount_point() + "/f" + std::to_string(i);
    const std::string data((i % 4 == 0) ? 3 * 1048576 + i : 5000 + 977 * i,
                           static_cast<char>('a' + i % 26));
    const int flags = O_WRONLY | O_CREAT | O_EXCL | (i % 5 == 4 ? O_DIRECT : 0);
    int fd = ::open(path.c_str(), flags, 0644);
    ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
    std::string buf = data;
    if (flags & O_DIRECT) buf.resize((data.size() + 4095) / 4096 * 4096, '\0');
    void* mem = nullptr;
    ASSERT_EQ(::posix_memalign(&mem, 4096, buf.size()), 0);
    std::memcpy(mem, buf.data(), buf.size());
    const ssize_t n = ::write(fd, mem, buf.size());
    const int err = errno;
    std::free(mem);
    EXPECT_EQ(n, static_cast<ssize_t>(buf.size())) << path << ": " << std::strerror(err);
    if (flags & O_DIRECT) {
      EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(data.size())), 0);
    }
    EXPECT_EQ(::close(fd), 0) << path << ": " << std::strerror(errno);
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_TRUE(ss.str() == data) << path << ": read back " << ss.str().size() << " bytes of "
                                  << data.size();
  }
}

class MountDataTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() {
    for (auto& [name, c] : clusters_) delete c;
    clusters_.clear();
    for (auto& [name, s] : starts_) delete s;
    starts_.clear();
    cluster_ = nullptr;
  }
  void SetUp() override {
    const std::string& t = GetParam();
    if (clusters_.count(t) == 0) {
      ClusterOptions o;
      o.servers = 3;
      o.stripe_size = 64 * 1024;
      o.mount = true;
      o.transport = t == "grpc" ? "auto" : t;
      if (t == "grpc") o.mount_options = "transport=grpc";
      clusters_[t] = new TestCluster(o);
      starts_[t] = new Status(clusters_[t]->Start());
    }
    cluster_ = clusters_[t];
    ASSERT_TRUE(starts_[t]->ok()) << starts_[t]->ToString();
  }
  void TearDown() override {
    // The mount logs the transport it picked for each server.
    const std::string& t = GetParam();
    EXPECT_EQ(MountLogMentions("inline grpc"), t == "grpc") << cluster_->LogTail(-1);
    EXPECT_EQ(MountLogMentions("tcp data channel"), t == "tcp") << cluster_->LogTail(-1);
    EXPECT_EQ(MountLogMentions("rdma (tcp provider)"), t == "rdma") << cluster_->LogTail(-1);
  }
  // Whether the mount's log names the transport it picked.
  static bool MountLogMentions(const std::string& what) {
    return cluster_->LogTail(-1, 1 << 20).find(what) != std::string::npos;
  }
  static std::string Path(const std::string& name) { return cluster_->mount_point() + "/" + name; }

  static TestCluster* cluster_;
  static std::map<std::string, TestCluster*> clusters_;
  static std::map<std::string, Status*> starts_;
};
TestCluster* MountDataTest::cluster_ = nullptr;
std::map<std::string, TestCluster*> MountDataTest::clusters_;
std::map<std::string, Status*> MountDataTest::starts_;
INSTANTIATE_TEST_SUITE_P(Transports, MountDataTest, ::testing::Values("tcp", "rdma", "grpc"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// O_DIRECT writes and reads of aligned blocks bypass the page cache: every
// byte goes through the transport, including 4 KiB reads.
TEST_P(MountDataTest, DirectIo) {
  const std::string file = Path("direct");
  constexpr size_t kBlock = 1 << 20;
  void* mem = nullptr;
  ASSERT_EQ(::posix_memalign(&mem, 4096, 4 * kBlock), 0);
  std::unique_ptr<void, decltype(&std::free)> hold(mem, &std::free);
  char* buf = static_cast<char*>(mem);
  const std::string data = PatternBytes(77, 0, 4 * kBlock);
  std::memcpy(buf, data.data(), data.size());
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(::pwrite(fd, buf + i * kBlock, kBlock, static_cast<off_t>(i * kBlock)),
              static_cast<ssize_t>(kBlock))
        << std::strerror(errno);
  }
  std::memset(buf, 0, 4 * kBlock);
  for (size_t off = 0; off < 4 * kBlock; off += 4096 * 61) {  // 4 KiB reads across stripes
    ASSERT_EQ(::pread(fd, buf, 4096, static_cast<off_t>(off)), 4096) << std::strerror(errno);
    ASSERT_EQ(std::memcmp(buf, data.data() + off, 4096), 0) << "4 KiB at " << off;
  }
  ASSERT_EQ(::pread(fd, buf, 4 * kBlock, 0), static_cast<ssize_t>(4 * kBlock));
  EXPECT_EQ(std::memcmp(buf, data.data(), data.size()), 0);
  ASSERT_EQ(::close(fd), 0);
  ASSERT_EQ(::unlink(file.c_str()), 0);
}

// Reads of a large file opened read-only come from the mount's read-ahead
// chunks. With a 1 MiB stripe each chunk lies on one server, and over the
// TCP data channel it stays in a pipe, spliced from the socket, and reads
// are answered from the pipe (fuse/chunk_bytes.h): aligned 1 MiB reads,
// reads that span two chunks, small reads at a chunk's end, and two readers
// of the same bytes all see the file's bytes. The mount's count of spliced
// replies (logged when it stops) is non-zero over TCP only.
TEST_P(MountDataTest, ReadAheadFromPipes) {
  const std::string dir = Path("pipes");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << std::strerror(errno);
  Result<client::Attr> d = cluster_->client().ResolvePath("/pipes");
  ASSERT_OK(d);
  client::SetAttrArgs sl;
  sl.valid = client::kSetLayout;
  sl.layout = d->layout.stripe_size != 0 ? d->layout : cluster_->client().cluster().default_layout;
  sl.layout.stripe_size = 1 << 20;
  ASSERT_OK(cluster_->client().SetAttrSync(d->handle, sl));
  const std::string file = dir + "/big";
  const uint64_t size = 24 * kMiB + 4096;  // past direct_read_min (16M): reads bypass the page cache
  const std::string data = PatternBytes(31, 0, size);
  {
    std::ofstream out(file, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    ASSERT_TRUE(out.good());
  }
  auto read_all = [&](uint64_t start, size_t piece, const std::string& what) {
    void* mem = nullptr;
    ASSERT_EQ(::posix_memalign(&mem, 4096, 2 * kMiB), 0);
    std::unique_ptr<void, decltype(&std::free)> hold(mem, &std::free);
    char* buf = static_cast<char*>(mem);
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    for (uint64_t off = start; off < size; off += piece) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(piece, size - off));
      ASSERT_EQ(::pread(fd, buf, piece, static_cast<off_t>(off)), static_cast<ssize_t>(want))
          << what << " at " << off << ": " << std::strerror(errno);
      ASSERT_EQ(std::memcmp(buf, data.data() + off, want), 0) << what << " at " << off;
    }
    ::close(fd);
  };
  read_all(0, kMiB, "1 MiB reads");
  read_all(12345, kMiB, "1 MiB reads across chunks");
  read_all(0, kMiB - 4096, "reads ending inside chunks");
  read_all(kMiB - 16, 3 * 4096, "small reads");
  // Two readers of one file at once.
  std::thread other([&] { read_all(0, kMiB, "second reader"); });
  read_all(0, kMiB, "first reader");
  other.join();
  ASSERT_EQ(::unlink(file.c_str()), 0);
  ASSERT_EQ(::rmdir(dir.c_str()), 0);
  // The counts are logged when the mount stops.
  ASSERT_OK(cluster_->Unmount());
  const std::string log = cluster_->LogTail(-1, 1 << 20);
  const size_t at = log.rfind("read-ahead from pipes: ");
  ASSERT_NE(at, std::string::npos) << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  const uint64_t spliced = std::stoull(log.substr(at + std::strlen("read-ahead from pipes: ")));
  std::cout << GetParam() << ": " << log.substr(at, log.find('\n', at) - at) << "\n";
  if (GetParam() == "tcp") {
    EXPECT_GT(spliced, 20u) << log.substr(at, 200);
  } else {
    EXPECT_EQ(spliced, 0u) << log.substr(at, 200);
  }
  ASSERT_OK(cluster_->Mount());
}

// Four processes write disjoint, stripe-unaligned regions of one file at once.
TEST_P(MountDataTest, FourProcessesDisjointRegions) {
  const std::string file = Path("shared");
  const std::string helper = TestCluster::Binary("CLF_MOUNT_HELPER", "clf_mount_helper");
  constexpr int kProcs = 4;
  const uint64_t region = 16 * kMiB + 12345;
  {
    int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ::close(fd);
  }
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcs; ++i) {
    Result<pid_t> p = tools::Spawn({helper, "write", file, std::to_string(region * i),
                                    std::to_string(region), std::to_string(500 + i)});
    ASSERT_OK(p);
    pids.push_back(*p);
  }
  for (pid_t p : pids) {
    int status = 0;
    ASSERT_TRUE(tools::WaitChild(p, 300000, &status)) << "writer " << p << " hung";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), region * kProcs);
  // Through the mount, and straight from the servers through libclf.
  Result<client::Attr> a = cluster_->client().ResolvePath("/shared");
  ASSERT_OK(a);
  EXPECT_EQ(a->size, region * kProcs);
  for (int i = 0; i < kProcs; ++i) {
    const std::string want = PatternBytes(500 + static_cast<uint64_t>(i), region * i, region);
    Result<std::string> got = PRead(file, region * i, region);
    ASSERT_OK(got);
    EXPECT_EQ(FirstDifference(*got, want), -1) << "region " << i << " via the mount";
    Result<std::string> direct =
        cluster_->client().ReadSync(a->handle, a->layout, region * i, region);
    ASSERT_OK(direct);
    EXPECT_EQ(FirstDifference(*direct, want), -1) << "region " << i << " on the servers";
  }
  ASSERT_EQ(::unlink(file.c_str()), 0);
}

TEST_P(MountDataTest, SparseFiveGiB) {
  const std::string file = Path("sparse5g");
  const uint64_t size = 5 * kGiB;
  const uint64_t alloc_before = CountObjects(*cluster_).allocated;
  ASSERT_OK(PWriteSync(file, size - 1, "Z"));
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
  Result<client::Attr> a = cluster_->client().ResolvePath("/sparse5g");
  ASSERT_OK(a);
  EXPECT_EQ(a->size, size);
  for (uint64_t off : {uint64_t{0}, size / 2 + 777, 4 * kGiB - 100, size - 4097}) {
    Result<std::string> r = PRead(file, off, 4096);
    ASSERT_OK(r);
    EXPECT_EQ(*r, std::string(4096, '\0')) << "hole at " << off;
  }
  Result<std::string> last = PRead(file, size - 1, 10);
  ASSERT_OK(last);
  EXPECT_EQ(*last, "Z");
  // Holes are holes on the servers too. Signed: objects of files removed by an
  // earlier test may be freed in the background meanwhile.
  EXPECT_LT(
      static_cast<int64_t>(CountObjects(*cluster_).allocated) - static_cast<int64_t>(alloc_before),
      static_cast<int64_t>(64 * kMiB));
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 64 * kMiB);
  ASSERT_EQ(::unlink(file.c_str()), 0);
}

TEST_P(MountDataTest, BeyondFourGiB) {
  const std::string file = Path("big4g");
  const uint64_t off = 4 * kGiB - 3 * kMiB - 5;
  const std::string data = PatternBytes(44, off, 8 * kMiB);
  ASSERT_OK(PWriteSync(file, off, data));
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), off + data.size());
  Result<std::string> r = PRead(file, off, data.size());
  ASSERT_OK(r);
  EXPECT_EQ(FirstDifference(*r, data), -1);
  Result<client::Attr> a = cluster_->client().ResolvePath("/big4g");
  ASSERT_OK(a);
  Result<std::string> direct = cluster_->client().ReadSync(a->handle, a->layout, off, data.size());
  ASSERT_OK(direct);
  EXPECT_EQ(FirstDifference(*direct, data), -1);
  // Truncate just past 4 GiB: the size and the last byte are right.
  const uint64_t cut = 4 * kGiB + 1;
  ASSERT_EQ(::truncate(file.c_str(), static_cast<off_t>(cut)), 0) << std::strerror(errno);
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), cut);
  Result<std::string> tail = PRead(file, cut - 2, 10);
  ASSERT_OK(tail);
  EXPECT_EQ(*tail, data.substr(cut - 2 - off, 2));
  ASSERT_EQ(::unlink(file.c_str()), 0);
}

TEST_P(MountDataTest, FioVerifyCrc32c) {
  const std::string dir = Path("fio");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const char* size_env = std::getenv("CLF_FIO_SIZE");
  const std::string size = size_env && *size_env ? size_env : "256M";
  for (const char* rw : {"write", "randwrite"}) {
    SCOPED_TRACE(rw);
    Result<tools::RunResult> r = tools::Run(
        {"fio", "--name=clf-verify", "--directory=" + dir, "--filename=fio-" + std::string(rw),
         "--size=" + size, "--bs=" + std::string(rw == std::string("write") ? "1M" : "64k"),
         "--rw=" + std::string(rw), "--ioengine=psync", "--verify=crc32c", "--do_verify=1",
         "--verify_fatal=1", "--end_fsync=1", "--randrepeat=0", "--group_reporting"},
        900000);
    ASSERT_OK(r);
    EXPECT_EQ(r->exit_code, 0) << r->output;
    EXPECT_EQ(r->output.find("verify: bad"), std::string::npos) << r->output;
    EXPECT_NE(r->output.find("clf-verify"), std::string::npos) << r->output;
  }
  ASSERT_EQ(tools::Run({"rm", "-rf", dir}, 60000)->exit_code, 0);
}

// An unlinked open file keeps its data until the last close, then the data
// objects go away.
TEST_P(MountDataTest, UnlinkedOpenFileThenObjectsFreed) {
  const std::string file = Path("open-unlinked");
  const std::string data = PatternBytes(9, 0, 3 * kMiB);
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::fsync(fd), 0);
  Result<client::Attr> a = cluster_->client().ResolvePath("/open-unlinked");
  ASSERT_OK(a);
  const Handle h = a->handle;
  EXPECT_EQ(ObjectsOf(*cluster_, h), 3) << "a 3 MiB file striped over 3 servers";
  ASSERT_EQ(::unlink(file.c_str()), 0);
  EXPECT_NE(::access(file.c_str(), F_OK), 0);
  EXPECT_EQ(ObjectsOf(*cluster_, h), 3) << "data dropped while the file is open";
  std::string back(data.size(), '\0');
  EXPECT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(FirstDifference(back, data), -1);
  EXPECT_EQ(::pwrite(fd, "more", 4, static_cast<off_t>(data.size())), 4);
  ASSERT_EQ(::fsync(fd), 0);
  char tail[4];
  EXPECT_EQ(::pread(fd, tail, 4, static_cast<off_t>(data.size())), 4);
  EXPECT_EQ(std::string(tail, 4), "more");
  ASSERT_EQ(::close(fd), 0);
  // The release after the last close frees the data objects (asynchronously: poll).
  const int64_t deadline = tools::NowMs() + 20000;
  while (ObjectsOf(*cluster_, h) != 0 && tools::NowMs() < deadline) usleep(20000);
  EXPECT_EQ(ObjectsOf(*cluster_, h), 0)
      << "the unlinked file's data objects were not freed after the last close";
}

class MountFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 3;
    o.stripe_size = 64 * 1024;
    o.rpc_timeout_ms = 1000;
    o.mount = true;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  std::unique_ptr<TestCluster> cluster_;
};

// kill -9 of a server while files are written and fsync'd through the mount:
// operations needing it fail with EIO in bounded time, the mount keeps
// answering, and after a restart every fsync'd file is intact.
TEST_F(MountFaultTest, Kill9ServerThroughMount) {
  const std::string mnt = cluster_->mount_point();
  std::vector<std::pair<std::string, std::string>> acked;
  for (int i = 0; i < 10; ++i) {
    std::string name = mnt + "/f" + std::to_string(i);
    std::string data =
        PatternBytes(70 + static_cast<uint64_t>(i), 0, 300 * 1024 + static_cast<size_t>(i));
    ASSERT_OK(PWriteSync(name, 0, data));
    acked.emplace_back(name, data);
  }
  ASSERT_OK(cluster_->KillServer(1, 9));
  // The mount root (server 0) still answers.
  struct stat st;
  int64_t t0 = tools::NowMs();
  EXPECT_EQ(::stat(mnt.c_str(), &st), 0);
  // Creating a file striped over every server needs server 1: EIO, not a hang.
  t0 = tools::NowMs();
  Status w = PWriteSync(mnt + "/during", 0, PatternBytes(1, 0, 256 * 1024));
  const int64_t took = tools::NowMs() - t0;
  EXPECT_FALSE(w.ok());
  EXPECT_LE(took, 15000) << "a write needing a dead server took " << took << " ms";
  if (!w.ok()) {
    EXPECT_EQ(ToErrno(w), EIO) << w.ToString();
  }
  ASSERT_OK(cluster_->RestartServer(1));
  // Channels to the restarted server reconnect (gRPC backoff, at most ~1 s).
  const int64_t recovered = TestCluster::PollUntil(
      [&] {
        // Reads of acknowledged data, and a synced write that needs every data
        // server (fsync reaches all of a file's servers, the restarted one too).
        return ::stat(acked[0].first.c_str(), &st) == 0 && PRead(acked[0].first, 0, 10).ok() &&
               PWriteSync(mnt + "/probe", 0, "probe").ok();
      },
      10000);
  ASSERT_GE(recovered, 0) << "the mount did not recover within 10 s of the restart";
  EXPECT_LE(recovered, 3000) << "EIO for " << recovered << " ms after the server answered";
  for (const auto& [name, data] : acked) {
    Result<std::string> r = PRead(name, 0, data.size() + 10);
    ASSERT_OK(r);
    EXPECT_EQ(FirstDifference(*r, data), -1) << name;
    Result<client::Attr> a = cluster_->client().ResolvePath(name.substr(mnt.size()));
    ASSERT_OK(a);
    Result<std::string> direct = cluster_->client().ReadSync(a->handle, a->layout, 0, data.size());
    ASSERT_OK(direct);
    EXPECT_EQ(FirstDifference(*direct, data), -1) << name << " on the servers";
  }
  EXPECT_OK(PWriteSync(mnt + "/after", 0, "after restart"));
}

// The mount with its size reports' replies held back (CLF_TEST_FAULT=
// report_reply_slow: each waits 300 ms before the mount takes it in).
class MountReportReplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 2;
    o.mount = true;
    ::setenv("CLF_TEST_FAULT", "report_reply_slow", 1);
    cluster_ = std::make_unique<TestCluster>(o);
    Status s = cluster_->Start();
    ::unsetenv("CLF_TEST_FAULT");
    ASSERT_OK(s);
  }
  std::unique_ptr<TestCluster> cluster_;
};

// close(2) does not wait for the release's size report. A truncate sent
// while that report travels must not be undone when the report's reply (the
// size from before the truncate) comes back: reads past the new end, through
// an open the mount serves itself (a writer's, direct), find the end there.
TEST_F(MountReportReplyTest, ATruncateIsNotUndoneByAnEarlierCloseReport) {
  client::CreateArgs ca;
  Result<client::Attr> f = cluster_->client().CreateSync(kRootHandle, "f", ca);
  ASSERT_OK(f);
  const std::string path = cluster_->mount_point() + "/f";
  const int keep = ::open(path.c_str(), O_RDWR | O_CLOEXEC);  // a writer open throughout
  ASSERT_GE(keep, 0) << std::strerror(errno);
  const int w = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(w, 0) << std::strerror(errno);
  const std::string data = PatternBytes(7, 0, 100000);
  ASSERT_EQ(::pwrite(w, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::close(w), 0);
  // The release's report reached M (its writer count is down to `keep`);
  // its reply is held back in the mount.
  ASSERT_TRUE(WaitUntil(
      [&] {
        Result<client::Attr> a = cluster_->client().GetAttrSync(f->handle);
        return a.ok() && a->writers == 1 && a->size == data.size();
      },
      std::chrono::seconds(20)));
  ASSERT_EQ(::truncate(path.c_str(), 50000), 0) << std::strerror(errno);
  char buf[4096];
  // The held-back reply comes within this window: no read past the end may
  // find bytes during it, nor after.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(900);
  int reads = 0;
  do {
    ASSERT_EQ(::pread(keep, buf, sizeof(buf), 60000), 0) << "read " << reads;
    ++reads;
    WaitPast(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);
  struct stat st;
  ASSERT_EQ(::fstat(keep, &st), 0);
  EXPECT_EQ(st.st_size, 50000);
  std::string back(50000, '\0');
  ASSERT_EQ(::pread(keep, back.data(), back.size(), 0), 50000);
  EXPECT_EQ(FirstDifference(back, data.substr(0, 50000)), -1);
  ASSERT_EQ(::close(keep), 0);
}

class MountBigDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.servers = 2;
    o.mount = true;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  std::unique_ptr<TestCluster> cluster_;
};

// A directory with 100,000 entries is listed completely through the mount.
TEST_F(MountBigDirTest, HundredThousandEntries) {
  const char* n_env = std::getenv("CLF_BIGDIR_N");
  const int n = n_env && *n_env ? std::atoi(n_env) : 100000;
  client::Client& c = cluster_->client();
  client::CreateArgs dir_args;
  dir_args.type = client::FileType::kDirectory;
  dir_args.mode = 0755;
  Result<client::Attr> d = c.CreateSync(c.root(), "big", dir_args);
  ASSERT_OK(d);
  // Create through libclf, 64 in flight.
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, failed = 0;
  std::string first_error;
  int64_t t0 = tools::NowMs();
  for (int i = 0; i < n; ++i) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return in_flight < 64; });
    ++in_flight;
    l.unlock();
    client::CreateArgs a;
    a.mode = 0644;
    c.Create(d->handle, "entry-" + std::to_string(i), a, client::Caller{},
             [&](Result<client::Attr> r) {
               std::lock_guard<std::mutex> g(mu);
               if (!r.ok()) {
                 if (failed++ == 0) first_error = r.status().ToString();
               }
               --in_flight;
               cv.notify_all();
             });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return in_flight == 0; });
  }
  const int64_t t_create = tools::NowMs() - t0;
  ASSERT_EQ(failed, 0) << first_error;

  t0 = tools::NowMs();
  DIR* dp = ::opendir((cluster_->mount_point() + "/big").c_str());
  ASSERT_NE(dp, nullptr) << std::strerror(errno);
  std::set<std::string> names;
  size_t total = 0;
  while (dirent* e = ::readdir(dp)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    ++total;
    names.insert(name);
  }
  ::closedir(dp);
  const int64_t t_list = tools::NowMs() - t0;
  EXPECT_EQ(total, static_cast<size_t>(n)) << "entries returned (duplicates count)";
  EXPECT_EQ(names.size(), static_cast<size_t>(n)) << "distinct names";
  for (int i = 0; i < n; i += 997) EXPECT_TRUE(names.count("entry-" + std::to_string(i))) << i;
  std::printf("%d entries: created (libclf) in %.1f s, listed through the mount in %.1f s\n", n,
              static_cast<double>(t_create) / 1000, static_cast<double>(t_list) / 1000);
}

}  // namespace
}  // namespace clf::testing
