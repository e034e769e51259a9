#include "client/data_client.h"

#include <sys/ioctl.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <optional>

#include "client/list_io.h"
#include "client/rpc_channel.h"
#include "scheduler/copy_plan.h"

namespace clf::client {
namespace {

// Fan-in of one call's per-server requests.
struct Gather {
  std::mutex mu;
  int pending = 0;
  Status first;
  // Records one request's outcome; true for the last one, when `first` is final.
  bool Arrive(const Status& st) {
    std::lock_guard<std::mutex> l(mu);
    if (!st.ok() && first.ok()) first = st;
    return --pending == 0;
  }
};

std::vector<Extent> ExtentsOf(const std::vector<Piece>& pieces) {
  std::vector<Extent> out;
  out.reserve(pieces.size());
  for (const Piece& p : pieces) out.push_back(Extent{p.local_offset, p.length});
  return out;
}

// The caller's buffer (starting at logical offset `base`) cut into the pieces' order.
std::vector<iovec> IovecsOf(const std::vector<Piece>& pieces, char* buf, uint64_t base) {
  std::vector<iovec> out;
  out.reserve(pieces.size());
  for (const Piece& p : pieces) out.push_back(iovec{buf + (p.logical_offset - base), p.length});
  return out;
}

}  // namespace

Status DataClient::CheckRange(Handle h, const Layout& l, uint64_t off, uint64_t len) const {
  ServerId s;
  CLF_RETURN_IF_ERROR(RouteHandle(h, servers_, &s));
  if (off > kMaxFileSize || len > kMaxFileSize - off) {
    return Status(Code::kFileTooBig, "range past the maximum file size");
  }
  return ValidateLayout(l, servers_);
}

Status DataClient::Counted(ServerId s, uint64_t bytes, const ObjectRef& obj, const CopyIo& io) {
  Result<transport::DataTransport*> t = paths_.Choose(s);
  if (!t.ok()) return t.status();
  const auto start = std::chrono::steady_clock::now();
  load_.Start(s, bytes);
  Status st = io(**t, obj);
  load_.Finish(s, bytes, std::chrono::steady_clock::now() - start, st.ok());
  return st;
}

Status DataClient::OnCopies(Handle h, const Layout& l, ServerId primary, uint64_t bytes,
                            uint32_t first_slot, const CopyIo& io) {
  if (l.replicas <= 1) return Counted(primary, bytes, ObjectRef(h), io);
  if (first_slot >= l.replicas) first_slot = 0;
  // Every copy refusing (kNotCurrent) is a moment, not a state: the copies'
  // servers are between M's answers (a copy just marked stale, a server
  // whose new store M is recording): a few passes, 100 ms apart, doubling.
  Status last;
  for (int pass = 0; pass < 5; ++pass) {
    if (pass > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 << (pass - 1)));
    bool refused_only = true;
    for (uint32_t k = 0; k < l.replicas; ++k) {
      // first_slot, then the others in slot order.
      const uint32_t slot = k == 0 ? first_slot : (k <= first_slot ? k - 1 : k);
      Status st = Counted(ReplicaServer(primary, slot, servers_), bytes,
                          ObjectRef(h, slot, l.replicas), io);
      if (st.ok()) return st;
      const Code c = st.code();
      if (c != Code::kNotCurrent && c != Code::kUnavailable && c != Code::kTimedOut &&
          c != Code::kIo) {
        return st;
      }
      refused_only = refused_only && c == Code::kNotCurrent;
      last = st;
    }
    if (!refused_only) break;
  }
  return last;
}

Result<std::vector<scheduler::CopyPick>> DataClient::PickCopies(
    const std::vector<scheduler::DataBlock>& blocks, const Layout& layout, uint32_t lanes) {
  const uint64_t seed = plans_.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ULL;
  return scheduler::PlanCopies(blocks, layout, servers_, planner_.SchedFor(layout).read, lanes,
                               load_.Available(), seed);
}

Result<std::shared_ptr<DataClient::BlockRun>> DataClient::PlanRun(const Layout& layout,
                                                                  uint64_t offset,
                                                                  uint64_t length, bool read) {
  IoPlan p = planner_.Plan(layout, offset, length);
  std::vector<uint32_t> slots;
  if (read && layout.replicas > 1) {
    CLF_ASSIGN_OR_RETURN(std::vector<scheduler::CopyPick> picks,
                         PickCopies(p.blocks, layout, std::max<uint32_t>(1, p.window)));
    std::vector<scheduler::DataBlock> ordered;
    ordered.reserve(picks.size());
    slots.reserve(picks.size());
    for (const scheduler::CopyPick& pick : picks) {
      ordered.push_back(std::move(p.blocks[pick.block]));
      slots.push_back(pick.slot);
    }
    p.blocks = std::move(ordered);
  }
  auto run = std::make_shared<BlockRun>(std::move(p.blocks), p.window);
  run->slots = std::move(slots);
  run->tag = p.tag;
  return run;
}

void DataClient::RunBlocks(std::shared_ptr<BlockRun> run) {
  const size_t workers = std::min<size_t>(run->blocks.size(), run->window);
  run->workers = static_cast<int>(workers);
  for (size_t w = 0; w < workers; ++w) {
    data_ex_.Submit([run] {
      for (;;) {
        std::optional<size_t> i;
        {
          std::lock_guard<std::mutex> l(run->mu);
          if (run->first.ok()) i = run->win.Start();
          if (!i) {
            if (--run->workers > 0) return;
          }
        }
        if (!i) return run->done(run->first);
        Status st = run->io(run->blocks[*i], run->slots.empty() ? 0 : run->slots[*i]);
        std::lock_guard<std::mutex> l(run->mu);
        run->win.Finish();
        if (!st.ok() && run->first.ok()) run->first = st;
      }
    });
  }
}

void DataClient::Write(Handle h, const Layout& layout, uint64_t offset, std::string data,
                       Callback<uint64_t> cb) {
  if (Status st = CheckRange(h, layout, offset, data.size()); !st.ok()) return cb(st);
  if (data.empty()) return cb(uint64_t{0});
  const uint64_t total = data.size();
  Result<std::shared_ptr<BlockRun>> planned = PlanRun(layout, offset, total, false);
  if (!planned.ok()) return cb(planned.status());
  std::shared_ptr<BlockRun> run = std::move(*planned);
  // The payload moves from this buffer to the sockets: no per-block copy.
  auto buf = std::make_shared<std::string>(std::move(data));
  run->io = [this, h, layout, buf, offset](const scheduler::DataBlock& b, uint32_t) {
    const std::vector<Extent> extents = ExtentsOf(b.pieces);
    const std::vector<iovec> iov = IovecsOf(b.pieces, buf->data(), offset);
    return OnCopies(h, layout, b.server, b.bytes, 0,
                    [&](transport::DataTransport& t, const ObjectRef& obj) {
                      return t.Write(obj, extents, iov, false);
                    });
  };
  run->done = [cb = std::move(cb), total](Status st) {
    if (!st.ok()) return cb(st);
    cb(total);
  };
  RunBlocks(std::move(run));
}

void DataClient::Read(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                      Callback<std::string> cb) {
  ReadInto(h, layout, offset, length, std::string(), std::move(cb));
}

void DataClient::ReadInto(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                          std::string buffer, Callback<std::string> cb) {
  if (Status st = CheckRange(h, layout, offset, length); !st.ok()) return cb(st);
  if (length > kMaxIoBytes) return cb(Status(Code::kTooBig, "read larger than 64 MiB"));
  if (length == 0) return cb(std::string());
  Result<std::shared_ptr<BlockRun>> planned = PlanRun(layout, offset, length, true);
  if (!planned.ok()) return cb(planned.status());
  std::shared_ptr<BlockRun> run = std::move(*planned);
  // Each block receives straight into its own pieces of `out` (every byte
  // is overwritten: a reused buffer is not filled first).
  auto out = std::make_shared<std::string>(std::move(buffer));
  out->resize(length);
  run->io = [this, h, layout, out, offset, tag = run->tag](const scheduler::DataBlock& b,
                                                           uint32_t slot) {
    const std::vector<Extent> extents = ExtentsOf(b.pieces);
    const std::vector<iovec> iov = IovecsOf(b.pieces, out->data(), offset);
    return OnCopies(h, layout, b.server, b.bytes, slot,
                    [&](transport::DataTransport& t, const ObjectRef& obj) {
                      return t.ReadTagged(obj, extents, iov, tag);
                    });
  };
  run->done = [cb = std::move(cb), out](Status st) {
    if (!st.ok()) return cb(st);
    cb(std::move(*out));
  };
  RunBlocks(std::move(run));
}

void DataClient::ReadToPipe(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                            int pipe_w, int pipe_r, std::string buffer,
                            Callback<Client::PipedRead> cb) {
  if (Status st = CheckRange(h, layout, offset, length); !st.ok()) return cb(st);
  if (length > kMaxIoBytes) return cb(Status(Code::kTooBig, "read larger than 64 MiB"));
  Result<std::shared_ptr<BlockRun>> planned = PlanRun(layout, offset, length, true);
  if (!planned.ok()) return cb(planned.status());
  std::shared_ptr<BlockRun> run = std::move(*planned);
  // The pipe takes the pieces in their order: one block whose pieces run
  // from offset to the end in order.
  bool one = run->blocks.size() == 1;
  uint64_t pos = offset;
  for (size_t i = 0; one && i < run->blocks[0].pieces.size(); ++i) {
    const Piece& p = run->blocks[0].pieces[i];
    one = p.logical_offset == pos;
    pos += p.length;
  }
  if (!one || pos != offset + length) {
    // Several blocks (servers): ReadInto's path, in memory.
    return ReadInto(h, layout, offset, length, std::move(buffer),
                    [cb = std::move(cb)](Result<std::string> r) {
                      if (!r.ok()) return cb(r.status());
                      cb(Client::PipedRead{false, std::move(*r)});
                    });
  }
  auto out = std::make_shared<Client::PipedRead>();
  out->bytes = std::move(buffer);
  run->io = [this, h, layout, out, length, pipe_w, pipe_r,
             tag = run->tag](const scheduler::DataBlock& b, uint32_t slot) {
    const std::vector<Extent> extents = ExtentsOf(b.pieces);
    return OnCopies(h, layout, b.server, b.bytes, slot,
                    [&](transport::DataTransport& t, const ObjectRef& obj) {
      Status st =
          t.ReadToPipe(obj, extents, length, pipe_w, pipe_r, tag, &out->in_pipe, &out->bytes);
      // A copy that failed after part of its bytes were spliced leaves them
      // in the pipe, where they cannot be taken back: not tried elsewhere.
      int queued = 0;
      if (!st.ok() && ::ioctl(pipe_r, FIONREAD, &queued) == 0 && queued > 0) {
        return Status(Code::kInternal, "read failed after part of it was spliced: " + st.ToString());
      }
      return st;
    });
  };
  run->done = [cb = std::move(cb), out](Status st) {
    if (!st.ok()) return cb(st);
    cb(std::move(*out));
  };
  RunBlocks(std::move(run));
}

// List I/O (client/list_io.*): one request per server, all servers at once.
void DataClient::WriteList(Handle h, const Layout& layout, std::vector<FileExtent> extents,
                           std::string data, Callback<uint64_t> cb) {
  RunList(h, layout, extents, std::make_shared<std::string>(std::move(data)), true,
          [cb = std::move(cb)](Status st, std::shared_ptr<std::string> buf) {
            if (!st.ok()) return cb(st);
            cb(static_cast<uint64_t>(buf->size()));
          });
}
void DataClient::ReadList(Handle h, const Layout& layout, std::vector<FileExtent> extents,
                          Callback<std::string> cb) {
  RunList(h, layout, extents, nullptr, false,
          [cb = std::move(cb)](Status st, std::shared_ptr<std::string> buf) {
            if (!st.ok()) return cb(st);
            cb(std::move(*buf));
          });
}
// A write sends `buf`; a read (buf null) allocates it. Each server's
// requests run on one data_ex_ task, in order.
void DataClient::RunList(Handle h, const Layout& layout, const std::vector<FileExtent>& extents,
                         std::shared_ptr<std::string> buf, bool write,
                         std::function<void(Status, std::shared_ptr<std::string>)> done) {
  if (Status st = CheckRange(h, layout, 0, 0); !st.ok()) return done(st, nullptr);
  uint64_t total = 0;
  Result<std::vector<ListRequest>> plan = PlanListIo(layout, servers_, extents, &total);
  if (!plan.ok()) return done(plan.status(), nullptr);
  if (write && buf->size() != total) {
    return done(Invalid("list write: data size differs from the extents' total length"), nullptr);
  }
  if (!write) buf = std::make_shared<std::string>(total, '\0');
  if (plan->empty()) return done(Status::Ok(), buf);
  Result<std::vector<std::vector<SlottedRequest>>> groups =
      GroupList(layout, std::move(*plan), !write);
  if (!groups.ok()) return done(groups.status(), nullptr);
  const uint32_t tag = planner_.TagFor(layout);
  auto g = std::make_shared<Gather>();
  g->pending = static_cast<int>(groups->size());
  auto shared_done = std::make_shared<decltype(done)>(std::move(done));
  for (std::vector<SlottedRequest>& group : *groups) {
    data_ex_.Submit([this, h, layout, g, buf, write, tag, shared_done, reqs = std::move(group)] {
      Status st;
      for (const auto& [r, slot] : reqs) {
        std::vector<iovec> iov = ListIovecs(r, buf->data());
        st = OnCopies(h, layout, r.server, r.bytes, slot,
                      [&](transport::DataTransport& t, const ObjectRef& obj) {
                        return write ? t.Write(obj, r.extents, iov, false)
                                     : t.ReadTagged(obj, r.extents, iov, tag);
                      });
        if (!st.ok()) break;
      }
      if (g->Arrive(st)) (*shared_done)(g->first, buf);
    });
  }
}

// A batch read of a replicated file is one problem for paper 001's heuristic
// (each request a transfer, all of them at once); everything else keeps the
// plan's server order on slot 0.
Result<std::vector<std::vector<DataClient::SlottedRequest>>> DataClient::GroupList(
    const Layout& layout, std::vector<ListRequest> plan, bool read) {
  std::vector<scheduler::CopyPick> picks;
  if (read && layout.replicas > 1) {
    std::vector<scheduler::DataBlock> blocks;
    blocks.reserve(plan.size());
    for (const ListRequest& r : plan) blocks.push_back(scheduler::DataBlock{r.server, {}, r.bytes});
    CLF_ASSIGN_OR_RETURN(picks,
                         PickCopies(blocks, layout, static_cast<uint32_t>(blocks.size())));
  } else {
    for (size_t i = 0; i < plan.size(); ++i) picks.push_back(scheduler::CopyPick{i, 0});
  }
  // One task per server asked first, its requests in the plan's order.
  std::vector<std::vector<SlottedRequest>> groups;
  std::vector<int> group_of(servers_, -1);
  for (const scheduler::CopyPick& p : picks) {
    const ServerId to = ReplicaServer(plan[p.block].server, p.slot, servers_);
    if (group_of[to] < 0) {
      group_of[to] = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[group_of[to]].push_back(SlottedRequest{std::move(plan[p.block]), p.slot});
  }
  return groups;
}

void DataClient::Sync(Handle h, const Layout& layout, StatusCallback cb) {
  // What to sync: each data server's objects (a replicated file's units:
  // through the copy that orders them, which syncs every copy and records
  // one that fails stale), and the metadata server's WAL.
  std::vector<ServerId> servers;
  const bool dir = layout == Layout{0, 0, 0, 0};
  if (dir) {  // a directory: its metadata server only
    if (Status st = RouteHandle(h, servers_, &servers.emplace_back()); !st.ok()) return cb(st);
  } else {
    if (Status st = CheckRange(h, layout, 0, 0); !st.ok()) return cb(st);
    servers = DataServers(layout, servers_);
  }
  // The metadata server's WAL too (it may hold no data of this file).
  const bool wal_apart = !dir && (layout.replicas > 1 || std::find(servers.begin(), servers.end(),
                                                                   ServerOf(h)) == servers.end());
  auto g = std::make_shared<Gather>();
  g->pending = static_cast<int>(servers.size()) + (wal_apart ? 1 : 0);
  auto shared_cb = std::make_shared<StatusCallback>(std::move(cb));
  for (ServerId s : servers) {
    // A directory's layout is empty (replicas 0): OnCopies syncs its one server.
    data_ex_.Submit([this, h, layout, g, shared_cb, s] {
      Status st = OnCopies(h, layout, s, 0, 0, [&](transport::DataTransport& t, const ObjectRef& obj) {
        return t.Sync(obj);
      });
      if (g->Arrive(st)) (*shared_cb)(g->first);
    });
  }
  if (wal_apart) {
    // A plain sync of the file's handle on its metadata server: its WAL (and
    // its unreplicated object, if any, which a replicated file does not have there as slot 0).
    data_ex_.Submit([this, h, g, shared_cb] {
      Result<transport::DataTransport*> t = paths_.Choose(ServerOf(h));
      Status st = t.ok() ? (*t)->Sync(h) : t.status();
      if (g->Arrive(st)) (*shared_cb)(g->first);
    });
  }
}

}  // namespace clf::client
