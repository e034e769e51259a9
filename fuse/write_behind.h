// WriteBehind: the mount answers a write once it has its bytes and sends
// them to the servers in the background; a failure is reported by the file's
// next flush/fsync (TakeError), as with the kernel's write-back cache.
//
// Contiguous writes of a file gather into one run of up to run_bytes, sent
// when full, when a write does not continue it, when something needs the
// file's data (AfterWrites, Take), once it is run_age old (a timer thread),
// or at FlushAll. A write overlapping one still in flight is never sent
// beside it (the servers could apply them in either order): the caller waits
// (AfterWrites) and asks again. Past max_bytes gathering or in flight,
// writes go synchronously.
//
// Which files may go behind is the caller's decision (Offer's `eligible`);
// this class only keeps the bytes, their order and the waiters.
//
// Thread safety: every method is thread safe; its lock is never held while
// the sender or a waiter runs. Methods that take runs out return them
// (Sends) for the caller to pass to Send() once it holds no lock of its own,
// so a caller may call them under its own lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/handle.h"
#include "common/layout.h"
#include "common/status.h"

namespace clf::fuse {

class WriteBehind {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    uint64_t max_bytes = 64ull << 20;  // gathering + in flight; past it, writes go synchronously
    uint64_t run_bytes = 1ull << 20;   // a run is sent once this large (the mount's max_write)
    Clock::duration run_age = std::chrono::milliseconds(20);  // ... or this old
    size_t runs_per_file = 8;  // runs gathering per file (writers at different offsets)
  };
  // Sends one run; the outcome must come back through EndWrite.
  using Sender =
      std::function<void(Handle ino, const Layout& layout, uint64_t offset, std::string data)>;
  struct Run {
    Layout layout;
    uint64_t offset = 0;
    std::string data;
    Clock::time_point started;
  };
  struct Send {
    Handle ino = 0;
    Run run;
  };
  using Sends = std::vector<Send>;

  // start_timer: a thread sends runs once they are run_age old (without it,
  // runs go out only when full, displaced or asked for).
  explicit WriteBehind(Options o, bool start_timer = true);
  ~WriteBehind();
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  void SetSender(Sender s);
  bool has_sender() const;

  // kBehind: *data was taken (reply now). kSync: write it now, synchronously.
  // kWaitFirst: AfterWrites(ino), then offer it again.
  // eligible false (a file not allowed behind, or shutting down): any runs
  // of `ino` go out and the write is synchronous, after writes in flight.
  enum class Mode { kBehind, kSync, kWaitFirst };
  Mode Offer(Handle ino, const Layout& layout, uint64_t offset, std::string* data, bool eligible,
             Sends* out);
  // A sent run's outcome (from the sender). Returns true when `ino` has no
  // write in flight any more.
  bool EndWrite(Handle ino, uint64_t offset, uint64_t bytes, const Status& s);
  // `then` once no write of `ino` is gathering or in flight (true; its runs
  // are sent now), or false at once.
  bool AfterWrites(Handle ino, std::function<void()> then);
  // Every run out now; `then` once nothing is in flight (at once if nothing is).
  void FlushAll(std::function<void()> then);
  // The runs of `ino` taken out to be sent (the caller calls Send()).
  void Take(Handle ino, Sends* out);
  void SendAll(Sends sends);

  // Bytes of `ino` gathering or in flight.
  bool Has(Handle ino) const;
  // `ino` has a write in flight (gathering runs not counted).
  bool InFlight(Handle ino) const;
  // The end of the bytes of `ino` acknowledged here that may not be on the
  // servers yet, 0 if none.
  uint64_t End(Handle ino) const;
  // A failed write of `ino` (taken once), else Ok.
  Status TakeError(Handle ino);
  // Ends the timer (runs still gathering stay until FlushAll).
  void Stop();

  uint64_t bytes() const;  // gathering + in flight

 private:
  void TakeRunLocked(Handle ino, size_t i, Sends* out);
  void TakeRunsLocked(Handle ino, Sends* out);
  void TimerLoop();

  const Options opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Sender send_;
  std::unordered_map<Handle, std::map<uint64_t, uint64_t>> writes_;  // in flight: off -> end, disjoint
  uint64_t bytes_ = 0, writes_total_ = 0;
  // Gathering, not sent (bytes counted in bytes_); a few per file.
  std::unordered_map<Handle, std::vector<Run>> runs_;
  std::unordered_map<Handle, std::vector<std::function<void()>>> waiters_;
  std::vector<std::function<void()>> all_waiters_;
  std::unordered_map<Handle, Status> errors_;
  bool stop_ = false;
  std::thread timer_;
};

}  // namespace clf::fuse
