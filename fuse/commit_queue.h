// CommitQueue: the namespace changes this mount acknowledged before the
// servers have them (AsyncNs answers creates, unlinks, renames, size reports
// and setattrs under directory leases), committed in order.
//
// Changes go out in rounds (Meta.Commit, one batch per server, side by
// side): whatever queued up while the previous round was on the wire goes in
// the next. A change waits up to batch_delay for others to share its round
// (the servers' cost per call is far above their cost per change) unless
// min_batch are queued or something waits for the queue (a dependent
// request, fsync, a recall). A change that touches a file or directory a
// change passed over, or taken for another server's batch, touches stays for
// a later round, so batches of different servers share nothing and may
// commit in any order. A size report waits for its file's write-behind
// (data_pending; DataLanded resumes the queue).
//
// A change that fails is logged; its file and directories get an error that
// the next fsync/fsyncdir takes (TakeError), and their leases are given back
// (Hooks::give_back).
//
// Thread safety: every method is thread safe. Hooks::data_pending is called
// under the queue's lock (it must not call back into the queue); no other
// hook or waiter runs under it. Callers may hold their own lock while
// calling any method but Kick, Flush and the waits (After*), whose waiter or
// commit callback may run inline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/include/clf/client.h"
#include "fuse/pending_index.h"

namespace clf::fuse {

class CommitQueue {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    size_t max_batch = 1024;  // changes per Meta.Commit
    size_t min_batch = 256;   // this many queued: the round goes at once
    Clock::duration batch_delay = std::chrono::milliseconds(3);
  };
  struct Hooks {
    // Commits one server's batch in order; one status per change.
    std::function<void(ServerId, std::vector<client::CommitOp>,
                       std::function<void(Result<std::vector<Status>>)>)>
        commit;
    // A size report of the file waits while this is true (under the lock).
    std::function<bool(Handle)> data_pending;
    // The files whose reports wait for their data: send it now.
    std::function<void(const std::vector<Handle>&)> send_data;
    // A batch answered: each change and its outcome, and when it was sent
    // (before its waiters run).
    std::function<void(const std::vector<client::CommitOp>&, const std::vector<Status>&,
                       Clock::time_point sent)>
        answered;
    // Directories a failed change was in (after its waiters ran).
    std::function<void(ServerId, std::vector<Handle>)> give_back;
    // Calls in flight (the owner's shutdown waits for them).
    std::function<void()> call_begin, call_end;
  };

  // start_timer: a thread sends a round once its oldest change is
  // batch_delay old (without it, rounds go only when min_batch are queued or
  // something waits).
  CommitQueue(Options o, Hooks h, bool start_timer = true);
  ~CommitQueue();
  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;

  // Queues a change for `server`'s batch. `touches`: the files and
  // directories it changes or depends on. True: the caller must call Kick()
  // once it holds no lock of its own.
  [[nodiscard]] bool Enqueue(client::CommitOp op, ServerId server, std::vector<Handle> touches);
  // Sends a round if one is due (after Enqueue returned true).
  void Kick();

  // Folds the rename of `h` from src/sname to dst/dname into the queued
  // change that put it at src/sname (its create in the same directory, or
  // the rename that moved it there) when nothing queued after that change
  // touches `dst`. A directory the file only passed through gets its mtime
  // and ctime set by a queued setattr instead (*kick as Enqueue). false:
  // queue the rename.
  bool FoldRename(Handle h, Handle src, const std::string& sname, Handle dst,
                  const std::string& dname, const client::Caller& caller, bool* kick);
  // The close of a file created and not written whose create is the file's
  // latest queued change: the create goes without its writer. false: queue
  // the report.
  bool DropCreateWriter(Handle h);
  // A setattr of `h` by `op.caller` joins the file's latest queued change
  // when that is a setattr of the same caller not yet sent (tar: times,
  // owner, mode one call after another). false: queue it.
  bool MergeSetAttr(Handle h, const client::CommitOp& op);

  // What is queued or committing (PendingIndex's questions).
  bool Touches(Handle h) const;
  bool TouchesBesidesUnlinks(Handle h) const;
  bool NameQueued(Handle dir, const std::string& name) const;
  bool AttrsQueued(Handle h) const;
  bool CreateQueued(Handle h) const;

  // If `queued(index)` (called under the lock): `then` runs once everything
  // queued now is committed, and true is returned. false: nothing to wait for.
  bool WaitIf(const std::function<bool(const PendingIndex&)>& queued, std::function<void()> then);
  // `then` once everything queued now is committed (at once if nothing is).
  void Flush(std::function<void()> then);

  // This mount changed h's attributes now (a setattr queued or sent here).
  void NoteAttrChange(Handle h);
  // An attribute change of `h` by this mount was queued, sent or committed
  // at or after `t`.
  bool AttrsChangedSince(Handle h, Clock::time_point t) const;
  // An unlink of one of h's names is queued, or was committed at or after `t`.
  bool NlinkChangedSince(Handle h, Clock::time_point t) const;

  // A file's write-behind landed: a report waiting for data may go.
  void DataLanded();
  // A failed change of `h` or in the directory `h` (taken once), else Ok.
  Status TakeError(Handle h);
  // From now on every change goes at once; ends the timer.
  void Stop();

  uint64_t committed() const;
  size_t queued() const;

 private:
  struct Op {
    client::CommitOp op;
    ServerId server = 0;
    std::vector<Handle> touches;
    uint64_t seq = 0;
    Clock::time_point queued;
  };

  bool EnqueueLocked(client::CommitOp op, ServerId server, std::vector<Handle> touches);
  // Queue not empty: when the next round may go without a reason to hurry.
  Clock::time_point NextRoundLocked() const;
  bool ReadyLocked(Clock::time_point now) const;
  // After adding a waiter: true when the caller must Kick().
  bool StartForWaiterLocked();
  bool WaitsForDataLocked(const Op& o) const;
  // The next round: take[i] for each queued change that goes in it (the
  // first 4 x max_batch are looked at); returns how many.
  size_t PlanRoundLocked(std::vector<bool>* take) const;
  void SendBatch(ServerId s, std::vector<Op> batch, Clock::time_point sent);
  void OnAnswered(ServerId s, const std::vector<Op>& batch, const Result<std::vector<Status>>& r,
                  Clock::time_point sent);
  void TimerLoop();
  // when[h] = now; entries older than a minute go once the map is large.
  static void Stamp(std::unordered_map<Handle, Clock::time_point>& when, Handle h);

  const Options opt_;
  const Hooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool inflight_ = false;                   // a round is on the wire (or being built)
  size_t batches_out_ = 0;                  // batches of the round not back yet
  Clock::time_point last_round_{};          // when the last round went
  std::multiset<uint64_t> inflight_first_;  // each batch on the wire: its first change
  bool blocked_on_data_ = false;            // the queue's head is a report waiting for its data
  uint64_t next_seq_ = 1, done_seq_ = 0;
  PendingIndex pending_;  // what queue_ and the batches on the wire hold
  std::multimap<uint64_t, std::function<void()>> waiters_;
  std::unordered_map<Handle, Status> errors_;
  // When an unlink of one of a file's names was last committed, and when this
  // mount last changed a file's attributes (queued, sent or committed).
  std::unordered_map<Handle, Clock::time_point> own_unlink_, own_attr_change_;
  uint64_t committed_ = 0;
  bool stop_ = false;
  std::thread timer_;
};

}  // namespace clf::fuse
