// clf/clf.hpp: the Clusterfile application API for C++ (libclf, pkg-config
// clf). The C API (clf/clf.h) is a thin layer over this one; both have the
// same calls, arguments, errors and semantics, described in clf/clf.h and
// docs/LIBCLF.md. Results are 0 (or a byte count) on success and a negative
// errno on failure; nothing throws.
//
// Ownership: Connect and Open hand out objects owned by the caller. A File
// keeps what it needs of its FileSystem alive, so destroying the FileSystem
// first is safe (the File still works). Destroying an open File closes it.
// Thread safety: as the C API: any call from any thread, except Close (and
// the destructors) racing with other calls on the same object.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clf/clf.h"

namespace clf::api {

using Segment = clf_segment_t;

class File;

class FileSystem {
 public:
  // Reads the cluster file and its credential (clf_connect).
  static int Connect(const std::string& cluster_file, std::unique_ptr<FileSystem>* fs);
  ~FileSystem();
  FileSystem(const FileSystem&) = delete;
  FileSystem& operator=(const FileSystem&) = delete;

  int SetCredentials(uint32_t uid, uint32_t gid, const std::vector<uint32_t>& groups);
  mode_t Umask(mode_t mask);

  int Open(const std::string& path, int flags, mode_t mode, std::unique_ptr<File>* file);
  int Stat(const std::string& path, struct stat* st);
  int Unlink(const std::string& path);
  int Mkdir(const std::string& path, mode_t mode);
  int Rmdir(const std::string& path);

  struct State;  // the library's

 private:
  explicit FileSystem(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

class File {
 public:
  ~File();  // Close() if still open; its error is dropped
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  int64_t Pread(void* buf, size_t count, int64_t offset);
  int64_t Pwrite(const void* buf, size_t count, int64_t offset);
  int64_t ReadList(const struct iovec* iov, int iovcnt, const Segment* segs, int nsegs);
  int64_t WriteList(const struct iovec* iov, int iovcnt, const Segment* segs, int nsegs);
  int Fsync();
  int Stat(struct stat* st);
  // Ends the open (reports the size); later calls are -EBADF.
  int Close();

  struct State;  // the library's

 private:
  friend class FileSystem;
  explicit File(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The calling thread's last error message ("" if none); valid until its next call.
const char* LastError();

}  // namespace clf::api
