// CollectiveRunner: paper 004's binary-tree collectives over data objects on
// one clfd. Run takes this server's part of a CREATE, REMOVE, TRUNCATE or
// STAT and forwards the rest of the targets down the tree (each half to its
// first member, with the hop's relative budget); the size gathering of stat
// and readdir is built on STAT. Knows the object store and the peers, not
// the namespace.
// Thread safety: thread safe. Collective, FillSizes and GatherSizes block
// until every target answered or its hop's deadline passed.
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "clf/v1/meta.pb.h"
#include "clf/v1/peer.pb.h"
#include "common/config.h"
#include "common/executor.h"
#include "common/status.h"
#include "server/data/copy_stores.h"
#include "server/data/object_store.h"
#include "server/ops/peers.h"
#include "server/ops/write_intents.h"

namespace clf::server {

class CollectiveRunner {
 public:
  CollectiveRunner(const ClusterConfig& cluster, ServerId self, ObjectStore* objects, Peers* peers)
      : cluster_(cluster), self_(self), objects_(objects), peers_(peers) {}

  // Where this server's part of a removal runs (unlinking data objects is
  // background work: a low-priority thread, not the gRPC reactor that
  // received it). Unset: inline. Set before serving.
  void set_reaper(Executor* reaper) { reaper_ = reaper; }
  // Replicated files: the stores of this server's copies (unset: a
  // replicated file's part here fails). Set before serving.
  // intents: records each truncate of a replicated file's copy here before
  // it is made (server/ops/write_intents.h).
  void set_copies(CopyStores* copies, WriteIntents* intents) {
    copies_ = copies;
    intents_ = intents;
  }

  // Runs this server's part of r and forwards the rest down the binary tree;
  // `done` runs once, with everything gathered.
  void Run(const v1::CollectiveRequest& r, std::function<void(v1::CollectiveReply)> done);
  // The collective over `files` reaching every data server they use (this
  // server first when it takes part), with the cluster's RPC budget.
  v1::CollectiveRequest Build(v1::CollectiveOp op, std::vector<v1::CollFile> files) const;
  // Build + Run, blocking; the first participant's error as a Status.
  Result<v1::CollectiveReply> Collective(v1::CollectiveOp op, std::vector<v1::CollFile> files);
  // Build + Run, blocking; the reply whatever failed (its `failed` servers).
  v1::CollectiveReply CollectiveReport(v1::CollectiveOp op, std::vector<v1::CollFile> files);

  // Fills size and blocks of the regular files among `attrs` that have open
  // writers (writers > 0; the others' stored size is exact; in collective
  // mode every regular file) by one stat collective; never blocks; `done`
  // runs once (maybe inline). The pointers must stay valid until then.
  void FillSizesAsync(std::vector<v1::Attr*> attrs, std::function<void(Status)> done);
  // FillSizesAsync, blocking.
  Status FillSizes(std::vector<v1::Attr*> attrs);
  // Like FillSizes for every regular file, also those with writers == 0 (the
  // stored size is only a lower bound there: max with the gathered one).
  Status GatherSizes(std::vector<v1::Attr*> attrs);

 private:
  void GatherSizesAsync(std::vector<v1::Attr*> attrs, bool all, std::function<void(Status)> done);
  void LocalPart(const v1::CollectiveRequest& r, v1::CollectiveReply* out);
  // One file's part on the copy in `slot` (0 unless the file is replicated).
  Status LocalCopy(v1::CollectiveOp op, const v1::CollFile& f, const Layout& l, uint32_t slot,
                   v1::CollectiveReply* out);
  // Handles whose objects a REMOVE collective removed here lately (collective
  // mode): a CREATE of one of them arrived late and is refused. The newest
  // kRemovedKept are kept (in memory: a late request does not outlive a restart).
  void NoteRemovedHere(Handle h);
  bool RemovedHere(Handle h);
  static constexpr size_t kRemovedKept = 1 << 16;

  const ClusterConfig& cluster_;
  const ServerId self_;
  ObjectStore* const objects_;
  Peers* const peers_;
  Executor* reaper_ = nullptr;
  CopyStores* copies_ = nullptr;
  WriteIntents* intents_ = nullptr;
  std::mutex removed_mu_;  // guards removed_, removed_order_
  std::unordered_set<Handle> removed_;
  std::deque<Handle> removed_order_;
};

}  // namespace clf::server
