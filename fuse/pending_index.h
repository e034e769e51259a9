// PendingIndex: what the mount's queue of deferred namespace changes (the
// CommitQueue in AsyncNs) still holds, by file, by name and by kind, so that
// a request can ask "does a queued or committing change touch this?" in
// constant time. A change is added when it is queued and removed when its
// commit is answered (whatever the answer).
//
// Pure bookkeeping: no locking (its owner's mutex guards it), no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/include/clf/client.h"

namespace clf::fuse {

class PendingIndex {
 public:
  // `touches`: the files and directories the change depends on or changes
  // (a create or unlink: its directory and the file).
  void Add(const client::CommitOp& op, const std::vector<Handle>& touches);
  void Remove(const client::CommitOp& op, const std::vector<Handle>& touches);

  // A queued or committing change touches `h`.
  bool Touches(Handle h) const { return touches_.count(h) != 0; }
  // ... one that is not an unlink of one of h's names (those change only its
  // link count and ctime).
  bool TouchesBesidesUnlinks(Handle h) const;
  // A create, unlink or rename of `name` in `dir` is queued or committing.
  bool NameQueued(Handle dir, const std::string& name) const;
  // A setattr of `h` is queued or committing.
  bool AttrsQueued(Handle h) const { return attrs_.count(h) != 0; }
  // An unlink of one of h's names is queued or committing.
  bool UnlinksQueued(Handle h) const { return unlinks_.count(h) != 0; }
  // The create of `h` (made by this mount under a lease) is queued or committing.
  bool CreateQueued(Handle h) const { return creates_.count(h) != 0; }
  bool empty() const { return touches_.empty(); }

 private:
  static std::string NameKey(Handle dir, const std::string& name);
  static void Dec(std::unordered_map<Handle, uint32_t>& m, Handle h);

  std::unordered_map<Handle, uint32_t> touches_;
  std::unordered_map<std::string, uint32_t> names_;  // NameKey(dir, name)
  std::unordered_map<Handle, uint32_t> attrs_;        // setattrs per file
  std::unordered_map<Handle, uint32_t> unlinks_;      // unlinks per file
  std::unordered_map<Handle, uint32_t> creates_;      // creates per file (0 or 1)
};

}  // namespace clf::fuse
