// clf/clf.h over clf/clf.hpp: opaque handles around the C++ objects. Every
// function catches what the C++ side could throw (it throws nothing by
// contract; allocation of the handle itself may fail): no exception reaches
// C frames.
#include <cerrno>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "clf/clf.h"
#include "clf/clf.hpp"
#include "client/api_error.h"

struct clf_fs {
  std::unique_ptr<clf::api::FileSystem> fs;
};

struct clf_file {
  std::unique_ptr<clf::api::File> file;
};

namespace {

int BadArg(const char* call, const char* what) {
  try {
    return clf::client::ApiFail(EINVAL, std::string(call) + ": " + what);
  } catch (...) {
    return -EINVAL;
  }
}

template <typename T, typename F>
T NoThrow(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return -ENOMEM;
  } catch (...) {
    return -EIO;
  }
}

}  // namespace

extern "C" {

int clf_connect(const char* cluster_file, clf_fs_t** fs) {
  return NoThrow<int>([&]() -> int {
    if (cluster_file == nullptr || fs == nullptr) return BadArg("clf_connect", "NULL argument");
    auto h = std::make_unique<clf_fs>();
    const int rc = clf::api::FileSystem::Connect(cluster_file, &h->fs);
    if (rc != 0) return rc;
    *fs = h.release();
    return 0;
  });
}

int clf_disconnect(clf_fs_t* fs) {
  delete fs;
  return 0;
}

int clf_set_credentials(clf_fs_t* fs, uint32_t uid, uint32_t gid, const uint32_t* groups,
                        size_t ngroups) {
  return NoThrow<int>([&]() -> int {
    if (fs == nullptr || (ngroups > 0 && groups == nullptr)) {
      return BadArg("clf_set_credentials", "NULL argument");
    }
    if (ngroups > 65536) return BadArg("clf_set_credentials", "more than 65536 groups");
    return fs->fs->SetCredentials(uid, gid, std::vector<uint32_t>(groups, groups + ngroups));
  });
}

mode_t clf_umask(clf_fs_t* fs, mode_t mask) {
  if (fs == nullptr) return 0;
  return fs->fs->Umask(mask);
}

int clf_open(clf_fs_t* fs, const char* path, int flags, mode_t mode, clf_file_t** file) {
  return NoThrow<int>([&]() -> int {
    if (fs == nullptr || path == nullptr || file == nullptr)
      return BadArg("clf_open", "NULL argument");
    auto h = std::make_unique<clf_file>();
    const int rc = fs->fs->Open(path, flags, mode, &h->file);
    if (rc != 0) return rc;
    *file = h.release();
    return 0;
  });
}

int clf_close(clf_file_t* file) {
  if (file == nullptr) return BadArg("clf_close", "NULL file");
  const int rc = file->file->Close();
  delete file;
  return rc;
}

ssize_t clf_pread(clf_file_t* file, void* buf, size_t count, int64_t offset) {
  if (file == nullptr) return BadArg("clf_pread", "NULL file");
  return NoThrow<ssize_t>([&]() -> ssize_t { return file->file->Pread(buf, count, offset); });
}

ssize_t clf_pwrite(clf_file_t* file, const void* buf, size_t count, int64_t offset) {
  if (file == nullptr) return BadArg("clf_pwrite", "NULL file");
  return NoThrow<ssize_t>([&]() -> ssize_t { return file->file->Pwrite(buf, count, offset); });
}

ssize_t clf_writev_list(clf_file_t* file, const struct iovec* iov, int iovcnt,
                        const clf_segment_t* segs, int nsegs) {
  if (file == nullptr) return BadArg("clf_writev_list", "NULL file");
  return NoThrow<ssize_t>(
      [&]() -> ssize_t { return file->file->WriteList(iov, iovcnt, segs, nsegs); });
}

ssize_t clf_readv_list(clf_file_t* file, const struct iovec* iov, int iovcnt,
                       const clf_segment_t* segs, int nsegs) {
  if (file == nullptr) return BadArg("clf_readv_list", "NULL file");
  return NoThrow<ssize_t>(
      [&]() -> ssize_t { return file->file->ReadList(iov, iovcnt, segs, nsegs); });
}

int clf_fsync(clf_file_t* file) {
  if (file == nullptr) return BadArg("clf_fsync", "NULL file");
  return file->file->Fsync();
}

int clf_stat(clf_fs_t* fs, const char* path, struct stat* st) {
  if (fs == nullptr || path == nullptr) return BadArg("clf_stat", "NULL argument");
  return NoThrow<int>([&]() -> int { return fs->fs->Stat(path, st); });
}

int clf_fstat(clf_file_t* file, struct stat* st) {
  if (file == nullptr) return BadArg("clf_fstat", "NULL file");
  return file->file->Stat(st);
}

int clf_unlink(clf_fs_t* fs, const char* path) {
  if (fs == nullptr || path == nullptr) return BadArg("clf_unlink", "NULL argument");
  return NoThrow<int>([&]() -> int { return fs->fs->Unlink(path); });
}

int clf_mkdir(clf_fs_t* fs, const char* path, mode_t mode) {
  if (fs == nullptr || path == nullptr) return BadArg("clf_mkdir", "NULL argument");
  return NoThrow<int>([&]() -> int { return fs->fs->Mkdir(path, mode); });
}

int clf_rmdir(clf_fs_t* fs, const char* path) {
  if (fs == nullptr || path == nullptr) return BadArg("clf_rmdir", "NULL argument");
  return NoThrow<int>([&]() -> int { return fs->fs->Rmdir(path); });
}

const char* clf_last_error(void) { return clf::api::LastError(); }

}  // extern "C"
