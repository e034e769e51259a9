// The mount in the paper-004 metadata modes (client: the client-driven
// baseline through libclf; collective: server-driven collectives): files
// created, written, stat'ed, listed and removed through the kernel behave as
// in the default mode, and `clf fsck` is clean afterwards.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "test/support/cluster.h"
#include "test/support/test_util.h"
#include "tools/process_util.h"

namespace clf::testing {
namespace {

bool WriteFile(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return false;
  const ssize_t n = ::write(fd, data.data(), data.size());
  return ::close(fd) == 0 && n == static_cast<ssize_t>(data.size());
}

class MountModesTest : public ::testing::TestWithParam<MetadataMode> {};

TEST_P(MountModesTest, CreateWriteStatListRemove) {
  ClusterOptions o;
  o.servers = 3;
  o.stripe_size = 64 * 1024;
  o.mount = true;
  o.metadata_mode = GetParam();
  TestCluster cluster(o);
  ASSERT_OK(cluster.Start());
  const std::string d = cluster.mount_point() + "/d";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << std::strerror(errno);
  std::vector<std::string> data;
  for (int i = 0; i < 8; ++i) {
    data.push_back(PatternBytes(static_cast<uint32_t>(i + 1), 0, 50000u * (i + 1)));
    ASSERT_TRUE(WriteFile(d + "/f" + std::to_string(i), data.back())) << i << ": " << std::strerror(errno);
  }
  for (int i = 0; i < 8; ++i) {
    struct stat st;
    ASSERT_EQ(::stat((d + "/f" + std::to_string(i)).c_str(), &st), 0);
    EXPECT_EQ(static_cast<size_t>(st.st_size), data[static_cast<size_t>(i)].size()) << i;
    Result<std::string> back = tools::ReadFileToString(d + "/f" + std::to_string(i));
    ASSERT_OK(back);
    EXPECT_EQ(FirstDifference(*back, data[static_cast<size_t>(i)]), -1) << i;
  }
  size_t listed = 0;
  for (const auto& e : std::filesystem::directory_iterator(d)) {
    (void)e;
    ++listed;
  }
  EXPECT_EQ(listed, 8u);
  // O_EXCL on an existing name: EEXIST.
  EXPECT_FALSE(WriteFile(d + "/f0", "x"));
  EXPECT_EQ(errno, EEXIST);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(::unlink((d + "/f" + std::to_string(i)).c_str()), 0) << std::strerror(errno);
  }
  ASSERT_EQ(::rmdir(d.c_str()), 0) << std::strerror(errno);
  ASSERT_OK(cluster.Unmount());
  // Background removals (collective mode) drain, then fsck is clean and no object is left.
  client::Client& c = cluster.client();
  EXPECT_GE(TestCluster::PollUntil(
                [&] {
                  for (const client::ServerStatus& s : c.ServerStatuses()) {
                    if (!s.up || s.garbage != 0) return false;
                  }
                  return true;
                },
                30000),
            0);
  tools::RunResult r = TestCluster::RunClf({"fsck", "--cluster", cluster.cluster_file()}, 120000);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int k = 0; k < 3; ++k) {
    Result<client::Client::ObjectListing> l = c.ListObjects(static_cast<ServerId>(k));
    ASSERT_OK(l);
    EXPECT_TRUE(l->data_objects.empty()) << "server " << k << " keeps " << l->data_objects.size();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, MountModesTest,
                         ::testing::Values(MetadataMode::kClient, MetadataMode::kCollective),
                         [](const ::testing::TestParamInfo<MetadataMode>& i) {
                           return std::string(MetadataModeName(i.param));
                         });

}  // namespace
}  // namespace clf::testing
