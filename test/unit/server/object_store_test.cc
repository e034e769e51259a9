// ObjectStore: large writes have their disk writeback started at once (by
// the store's writeback thread); small ones stay dirty for the kernel's flusher. Read from the page cache's own counts
// (cachestat, Linux 6.5).
#include "server/data/object_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <filesystem>
#include <string>

#include "test/support/test_util.h"

namespace clf::server {
namespace {

#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

struct CacheStatRange {
  uint64_t off;
  uint64_t len;
};
struct CacheStat {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};

// The one data object under `dir` (pool files excluded).
std::string OnlyObject(const std::string& dir) {
  std::string found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().string().find("/pool/") != std::string::npos) continue;
    found = e.path().string();
  }
  return found;
}

// Pages of the object still dirty (not yet handed to the disk), or -1 with a
// reason in *why.
int64_t DirtyPages(const std::string& path, std::string* why, bool cached = false) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return *why = "open " + path + ": " + std::strerror(errno), -1;
  CacheStatRange range{0, 0};  // 0: to the end of the file
  CacheStat cs{};
  const long rc = ::syscall(__NR_cachestat, fd, &range, &cs, 0);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return *why = std::string("cachestat: ") + std::strerror(err), -1;
  return static_cast<int64_t>(cached ? cs.nr_cache : cs.nr_dirty);
}

// Pages of the object in the page cache, or -1 with a reason in *why.
int64_t CachedPages(const std::string& path, std::string* why) { return DirtyPages(path, why, true); }

class ObjectStoreWritebackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct statfs fs;
    ASSERT_EQ(::statfs(dir_.str().c_str(), &fs), 0);
    if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "the temp folder is on tmpfs, which never writes back";
    auto o = ObjectStore::Open(dir_.str() + "/objects");
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    store_ = std::move(*o);
  }

  clf::testing::TempDir dir_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(ObjectStoreWritebackTest, LargeWriteStartsWritebackAtOnce) {
  const Handle h = MakeHandle(0, 77);
  const uint64_t len = 4 * ObjectStore::kEarlyWritebackBytes;
  std::string data(len, 'w');
  ASSERT_TRUE(store_->Write(h, {{0, len}}, data, false).ok());
  EXPECT_EQ(store_->EarlyWritebacks(), 1u);
  std::string why;
  int64_t dirty = DirtyPages(OnlyObject(dir_.str() + "/objects"), &why);
  if (dirty < 0 && why.find("cachestat") != std::string::npos) GTEST_SKIP() << why << " (Linux < 6.5)";
  ASSERT_GE(dirty, 0) << why;
  // The writeback thread's SYNC_FILE_RANGE_WRITE moves every page from dirty
  // to writeback (or clean); the flusher alone would wait 30 s.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (dirty > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    dirty = DirtyPages(OnlyObject(dir_.str() + "/objects"), &why);
  }
  EXPECT_EQ(dirty, 0) << "a " << len << "-byte write left its pages dirty for 10 s: no early writeback";
}

TEST_F(ObjectStoreWritebackTest, OffLeavesLargeWritesToTheFlusher) {
  auto o = ObjectStore::Open(dir_.str() + "/objects-off", 0);  // early_writeback_kib = 0
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  const uint64_t len = 4 * ObjectStore::kEarlyWritebackBytes;
  ASSERT_TRUE((*o)->Write(MakeHandle(0, 79), {{0, len}}, std::string(len, 'o'), false).ok());
  EXPECT_EQ((*o)->EarlyWritebacks(), 0u) << "with early writeback off a large write was queued";
  std::string why;
  const int64_t dirty = DirtyPages(OnlyObject(dir_.str() + "/objects-off"), &why);
  if (dirty < 0 && why.find("cachestat") != std::string::npos) GTEST_SKIP() << why << " (Linux < 6.5)";
  EXPECT_GT(dirty, 0) << "with early writeback off a large write was pushed to the disk at once";
}

TEST_F(ObjectStoreWritebackTest, SmallWriteStaysDirtyForTheFlusher) {
  const Handle h = MakeHandle(0, 78);
  const uint64_t len = 64 * 1024;
  ASSERT_LT(len, ObjectStore::kEarlyWritebackBytes);
  std::string data(len, 's');
  ASSERT_TRUE(store_->Write(h, {{0, len}}, data, false).ok());
  EXPECT_EQ(store_->EarlyWritebacks(), 0u);
  std::string why;
  const int64_t dirty = DirtyPages(OnlyObject(dir_.str() + "/objects"), &why);
  if (dirty < 0 && why.find("cachestat") != std::string::npos) GTEST_SKIP() << why << " (Linux < 6.5)";
  ASSERT_GE(dirty, 0) << why;
  // The flusher writes pages back 30 s (dirty_expire_centisecs) after they
  // were dirtied, or when dirty memory passes its background threshold.
  EXPECT_GT(dirty, 0) << "a " << len << "-byte write was pushed to the disk at once";
}

// Read streams: every large read continues a stream of the object or starts
// one, each stream on a descriptor of its own; a lone active stream that
// starts at 0 or continues asks the disk for what follows (only what it has
// not asked yet); while two streams are active neither asks; small reads,
// reads elsewhere and a store with read-ahead off never ask.
TEST(ObjectStoreReadAheadTest, SequentialStreamsAskForTheBytesAhead) {
  clf::testing::TempDir dir;
  auto o = ObjectStore::Open(dir.str() + "/objects");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ObjectStore& store = **o;
  const Handle h = MakeHandle(0, 90);
  constexpr uint64_t kMiB = 1 << 20;
  std::string data(32 * kMiB, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + (i / 4096) % 26);
  ASSERT_TRUE(store.Write(h, {{0, data.size()}}, data, false).ok());
  std::string out;
  auto read = [&](uint64_t off, uint64_t len) {
    EXPECT_TRUE(store.Read(h, {{off, len}}, &out).ok());
    EXPECT_TRUE(out == data.substr(off, len)) << "bytes at " << off;
  };
  // Lets every stream's activity window run out: no stream counts as active.
  auto quiet = [] { clf::testing::WaitPast(ObjectStore::kStreamActive + std::chrono::milliseconds(50)); };
  read(0, kMiB);  // a lone stream's start
  EXPECT_EQ(store.ReadAheads(), 1u);
  EXPECT_EQ(store.StreamDescriptors(), 1);
  read(kMiB, kMiB);  // continues it: asks the 1 MiB it has not asked yet
  EXPECT_EQ(store.ReadAheads(), 2u);
  read(16 * kMiB, kMiB);  // another stream: its own descriptor, nothing asked
  EXPECT_EQ(store.StreamDescriptors(), 2);
  read(2 * kMiB, kMiB);   // both streams active: no asks
  read(17 * kMiB, kMiB);
  EXPECT_EQ(store.ReadAheads(), 2u);
  quiet();
  read(18 * kMiB, kMiB);  // the other went quiet: this one asks again
  EXPECT_EQ(store.ReadAheads(), 3u);
  read(4 * kMiB, 64 * 1024);  // small: never
  quiet();
  read(9 * kMiB, kMiB);       // continues nothing: a new stream, no ask
  EXPECT_EQ(store.ReadAheads(), 3u);
  EXPECT_EQ(store.StreamDescriptors(), 3);
  // Past the object's end: the bytes read as zeros, read-ahead or not.
  EXPECT_TRUE(store.Read(h, {{32 * kMiB - 4096, 2 * 4096}}, &out).ok());
  EXPECT_TRUE(out == data.substr(32 * kMiB - 4096) + std::string(4096, '\0'));
  // Removing the object closes its streams' descriptors.
  ASSERT_TRUE(store.Remove(h).ok());
  EXPECT_EQ(store.StreamDescriptors(), 0);

  auto off = ObjectStore::Open(dir.str() + "/objects-off", ObjectStore::kEarlyWritebackBytes, 0);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  ASSERT_TRUE((*off)->Write(h, {{0, 4 * kMiB}}, data.substr(0, 4 * kMiB), false).ok());
  for (uint64_t at = 0; at < 4 * kMiB; at += kMiB) ASSERT_TRUE((*off)->Read(h, {{at, kMiB}}, &out).ok());
  EXPECT_EQ((*off)->ReadAheads(), 0u);
}

// Direct writes (direct_write_kib): large writes whose extents are 4 KiB
// aligned, from 4 KiB-aligned memory, bypass the page cache; anything else
// is buffered; both kinds mix in one object and read back exactly.
TEST(ObjectStoreDirectTest, AlignedLargeWritesBypassThePageCache) {
  clf::testing::TempDir dir;
  struct statfs fs;
  ASSERT_EQ(::statfs(dir.str().c_str(), &fs), 0);
  auto o = ObjectStore::Open(dir.str() + "/objects");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ObjectStore& store = **o;
  constexpr uint64_t kKiB = 1024, kMiB = 1 << 20;
  EXPECT_FALSE(store.WantsDirect({{0, kMiB}})) << "direct writes are off by default";
  store.set_direct_write_bytes(256 * kKiB);
  EXPECT_TRUE(store.WantsDirect({{0, kMiB}}));
  EXPECT_TRUE(store.WantsDirect({{0, 128 * kKiB}, {kMiB, 128 * kKiB}}));  // the total counts
  EXPECT_FALSE(store.WantsDirect({{0, 128 * kKiB}}));                     // too small
  EXPECT_FALSE(store.WantsDirect({{512, kMiB}}));                         // unaligned start
  EXPECT_FALSE(store.WantsDirect({{0, kMiB + 100}}));                     // unaligned end

  // The expected object, and bytes in 4 KiB-aligned memory.
  std::string want(4 * kMiB, '\0');
  std::string raw(4 * kMiB + 4096, '\0');
  char* aligned = raw.data() + (4096 - reinterpret_cast<uintptr_t>(raw.data()) % 4096) % 4096;
  auto put = [&](uint64_t off, uint64_t len, char seed, const char* from) {
    for (uint64_t i = 0; i < len; ++i) want[off + i] = static_cast<char>(seed + (i * 7) % 23);
    std::memcpy(const_cast<char*>(from), want.data() + off, len);
    return std::string_view(from, len);
  };
  const Handle h = MakeHandle(0, 95);
  // A small buffered write first: its page is dirty in the cache when the
  // direct write over it comes (the kernel writes it back and drops it).
  std::string small(100, '\0');
  ASSERT_TRUE(store.Write(h, {{5000, 100}}, put(5000, 100, 's', small.data()), false).ok());
  ASSERT_TRUE(store.Write(h, {{0, 2 * kMiB}}, put(0, 2 * kMiB, 'a', aligned), false).ok());
  if (store.DirectWrites() == 0) {
    // Only a file system that refuses O_DIRECT (then every write is buffered).
    ASSERT_FALSE(store.WantsDirect({{0, kMiB}}));
    GTEST_SKIP() << "the temp folder's file system (type 0x" << std::hex << fs.f_type
                 << ") refuses O_DIRECT";
  }
  EXPECT_EQ(store.DirectWrites(), 1u);
  // The same large aligned write from unaligned memory is buffered.
  std::string shifted(kMiB + 1, '\0');
  ASSERT_TRUE(store.Write(h, {{2 * kMiB, kMiB}}, put(2 * kMiB, kMiB, 'b', shifted.data() + 1), false).ok());
  EXPECT_EQ(store.DirectWrites(), 1u);
  // Two extents of one write, direct, over the buffered bytes just written,
  // with a synced write (fdatasync on the direct descriptor).
  ASSERT_TRUE(store.Write(h, {{2 * kMiB, 256 * kKiB}, {3 * kMiB, 256 * kKiB}},
                          [&] {
                            put(2 * kMiB, 256 * kKiB, 'c', aligned);
                            put(3 * kMiB, 256 * kKiB, 'd', aligned + 256 * kKiB);
                            return std::string_view(aligned, 512 * kKiB);
                          }(),
                          true)
                  .ok());
  EXPECT_EQ(store.DirectWrites(), 2u);
  // A buffered write inside the direct range.
  ASSERT_TRUE(store.Write(h, {{4096 + 10, 50}}, put(4096 + 10, 50, 'e', small.data()), false).ok());

  std::string why;
  const std::string object = OnlyObject(dir.str() + "/objects");
  const int64_t cached = CachedPages(object, &why);
  if (cached >= 0) {
    // The buffered megabyte (256 pages) and the small write's page at most:
    // the direct writes' 768 pages never entered the cache.
    EXPECT_LE(cached, 256 + 1) << "direct writes went through the page cache";
  } else {
    EXPECT_NE(why.find("cachestat"), std::string::npos) << why;
  }
  std::string out;
  ASSERT_TRUE(store.Read(h, {{0, 4 * kMiB}}, &out).ok());
  ASSERT_EQ(out.size(), want.size());
  size_t bad = 0;
  while (bad < out.size() && out[bad] == want[bad]) ++bad;
  EXPECT_EQ(bad, out.size()) << "first wrong byte at " << bad;
}

}  // namespace
}  // namespace clf::server
