// libclf's data calls (Client's write, read, list I/O and sync): each
// request planned into schedule blocks (IoPlanner, paper 000) and run on this
// client's data threads over each server's data path (DataPaths), at most the
// plan's window of blocks outstanding. Internal to client/.
// Thread safety: thread safe. Callbacks run on a data thread, or inline on the
// caller's before the call returns (validation errors, empty requests). The
// destructor finishes the requests already queued.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clf/client.h"
#include "client/data_paths.h"
#include "client/io_planner.h"
#include "client/list_io.h"
#include "client/server_load.h"
#include "common/executor.h"
#include "scheduler/copy_plan.h"
#include "scheduler/data_plan.h"

namespace clf::client {

class DataClient {
 public:
  // paths and planner outlive this.
  DataClient(uint32_t servers, DataPaths& paths, IoPlanner& planner)
      : servers_(servers), paths_(paths), planner_(planner), load_(servers) {}

  void Write(Handle h, const Layout& layout, uint64_t offset, std::string data,
             Callback<uint64_t> cb);
  void Read(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
            Callback<std::string> cb);
  void ReadInto(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                std::string buffer, Callback<std::string> cb);
  void ReadToPipe(Handle h, const Layout& layout, uint64_t offset, uint64_t length, int pipe_w,
                  int pipe_r, std::string buffer, Callback<Client::PipedRead> cb);
  void WriteList(Handle h, const Layout& layout, std::vector<FileExtent> extents, std::string data,
                 Callback<uint64_t> cb);
  void ReadList(Handle h, const Layout& layout, std::vector<FileExtent> extents,
                Callback<std::string> cb);
  void Sync(Handle h, const Layout& layout, StatusCallback cb);

 private:
  // One request's schedule blocks in flight: `blocks` in send order, at most
  // `window` outstanding. `io` moves one block (blocking, on a data_ex_
  // thread); `done` runs once with the first error, after every started block
  // finished. After an error no further block is started.
  struct BlockRun {
    std::mutex mu;  // guards win, first, workers
    std::vector<scheduler::DataBlock> blocks;
    std::vector<uint32_t> slots;  // the copy to ask first per block (replicated reads), else empty
    scheduler::BlockWindow win;
    Status first;
    int workers = 0;
    const uint32_t window;
    uint32_t tag = 0;  // reads: the scheduling tag for the servers' read queues
    std::function<Status(const scheduler::DataBlock&, uint32_t slot)> io;
    std::function<void(Status)> done;
    BlockRun(std::vector<scheduler::DataBlock> b, uint32_t w)
        : blocks(std::move(b)), win(blocks.size(), w), window(std::max<uint32_t>(1, w)) {}
  };

  Status CheckRange(Handle h, const Layout& l, uint64_t off, uint64_t len) const;
  using CopyIo = std::function<Status(transport::DataTransport&, const ObjectRef&)>;
  // Runs `io` (moving `bytes`) on a copy of the units whose primary is
  // `primary`: an unreplicated file's one object; a replicated file's copies,
  // `first_slot` first and then the others in slot order, until one succeeds
  // or fails with an error another copy cannot help (a copy that is stale,
  // does not answer or fails with EIO passes the request on to the next).
  // Writes go to slot 0, the copy that orders them (the server passes them
  // on when another one does); reads may be served by any current copy.
  // Counts the bytes in flight per server (load_).
  Status OnCopies(Handle h, const Layout& l, ServerId primary, uint64_t bytes,
                  uint32_t first_slot, const CopyIo& io);
  // Runs `io` on the copy's server `s`, counted in load_.
  Status Counted(ServerId s, uint64_t bytes, const ObjectRef& obj, const CopyIo& io);
  // A request's blocks in send order (paper 000). A replicated file's read:
  // reordered, each with the copy to ask first, by its read_sched (paper 001,
  // scheduler/copy_plan.h) fed with load_.
  Result<std::shared_ptr<BlockRun>> PlanRun(const Layout& layout, uint64_t offset,
                                            uint64_t length, bool read);
  // Paper 001's plan of a replicated file's read blocks (its read_sched,
  // `lanes` blocks at once, load_ as the servers' availability).
  Result<std::vector<scheduler::CopyPick>> PickCopies(
      const std::vector<scheduler::DataBlock>& blocks, const Layout& layout, uint32_t lanes);
  // Each of min(window, blocks) workers takes the next block when its last
  // one finished, so the window holds exactly.
  void RunBlocks(std::shared_ptr<BlockRun> run);
  struct SlottedRequest {
    ListRequest request;
    uint32_t slot = 0;  // the copy to ask first
  };
  // List I/O's requests as one task per server: a replicated file's read
  // scheduled over the copies (paper 001), else in the plan's order on slot 0.
  Result<std::vector<std::vector<SlottedRequest>>> GroupList(const Layout& layout,
                                                             std::vector<ListRequest> plan,
                                                             bool read);
  void RunList(Handle h, const Layout& layout, const std::vector<FileExtent>& extents,
               std::shared_ptr<std::string> buf, bool write,
               std::function<void(Status, std::shared_ptr<std::string>)> done);

  const uint32_t servers_;
  DataPaths& paths_;
  IoPlanner& planner_;
  ServerLoad load_;
  std::atomic<uint64_t> plans_{0};  // read plans made: varies kRandom's seed
  // Runs data requests (they block on sockets) and their callbacks. Declared
  // last: destroyed first, so queued requests finish while the rest lives.
  Executor data_ex_{"clf-data", 16};
};

}  // namespace clf::client
