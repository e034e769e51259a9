// DirLocks: the striped locks of one clfd's namespace, shared by the
// namespace operations (MetaOps) and fsck's repairs (FsckOps), so a repair
// never interleaves with a change of the same directory or inode.
// Lock order: directory locks in increasing handle order, then inode locks;
// an inode lock is never held across a call to another server that could
// need this server's inode lock.
// Thread safety: the locks are the synchronization; the object is immutable.
#pragma once

#include <array>
#include <mutex>

#include "common/handle.h"

namespace clf::server {

class DirLocks {
 public:
  // Recursive: a directory operation may re-enter for the same directory
  // (a rename within one directory takes its lock twice).
  std::recursive_mutex& Dir(Handle h) { return dir_[h % dir_.size()]; }
  // For an inode's read-modify-write (link count, attributes).
  std::mutex& Inode(Handle h) { return inode_[h % inode_.size()]; }

 private:
  std::array<std::recursive_mutex, 4096> dir_;
  std::array<std::mutex, 1024> inode_;
};

}  // namespace clf::server
