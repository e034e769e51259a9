// The binary-tree collectives of paper 004: this server's part of a
// CREATE, REMOVE, TRUNCATE or STAT over data objects, forwarding down the
// tree, and the size gathering built on STAT.
#include "server/ops/collective.h"

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "common/layout.h"
#include "common/log.h"
#include "server/ops/ops_internal.h"

namespace clf::server {

void CollectiveRunner::LocalPart(const v1::CollectiveRequest& r, v1::CollectiveReply* out) {
  Status first;
  for (const v1::CollFile& f : r.files()) {
    Layout l = FromProto(f.layout());
    for (uint32_t slot : SlotsOn(l, cluster_.size(), self_)) {
      Status s = LocalCopy(r.op(), f, l, slot, out);
      if (!s.ok() && first.ok()) first = s;
    }
  }
  if (first.ok()) {
    out->add_done(self_);
  } else {
    out->add_failed(self_);
    if (out->code() == 0) {
      out->set_code(static_cast<int>(first.code()));
      out->set_message("server " + std::to_string(self_) + ": " + first.message());
    }
  }
}

Status CollectiveRunner::LocalCopy(v1::CollectiveOp op, const v1::CollFile& f, const Layout& l,
                                   uint32_t slot, v1::CollectiveReply* out) {
  const uint32_t n = cluster_.size();
  // The copy in `slot` holds the units of the server `slot` before this one.
  const ServerId primary = PrimaryOfSlot(self_, slot, n);
  ObjectStore* store = objects_;
  if (slot > 0) {
    if (copies_ == nullptr) return Status(Code::kNotSupported, "no replica stores here");
    // A copy never written has no store yet: nothing to remove, truncate or report.
    if (op == v1::COLL_CREATE) {
      CLF_ASSIGN_OR_RETURN(store, copies_->For(slot));
    } else {
      store = copies_->IfOpen(slot);
    }
    if (store == nullptr) {
      if (op == v1::COLL_STAT) {
        v1::ObjectSize* o = out->add_sizes();
        o->set_handle(f.handle());
        o->set_server(primary);
        o->set_slot(slot);
      }
      return Status::Ok();
    }
  }
  switch (op) {
    case v1::COLL_CREATE:
      // A create that reaches this server after the file's objects were
      // removed here (this server was stopped while the initiator gave up,
      // undid the create and its removal got here first) is not done: an
      // object made now would be nobody's. Handles are never reused.
      if (RemovedHere(f.handle())) {
        return Status(Code::kUnavailable, "create arrived after the file was undone");
      }
      return store->Create(f.handle());
    case v1::COLL_REMOVE:
      NoteRemovedHere(f.handle());
      // A sized removal (GarbageCollector::QueueSized): no object where the file's
      // final size leaves this server's share empty.
      if (f.sized() && LocalSizeFor(l, n, primary, f.size()) == 0) return Status::Ok();
      return store->Remove(f.handle());
    case v1::COLL_TRUNCATE: {
      std::unique_ptr<WriteIntents::Writing> writing;
      if (l.replicas > 1 && intents_ != nullptr) {
        CLF_ASSIGN_OR_RETURN(writing, intents_->Begin(f.handle(), slot));
      }
      return store->Truncate(f.handle(), LocalSizeFor(l, n, primary, f.size()));
    }
    case v1::COLL_STAT: {
      CLF_ASSIGN_OR_RETURN(ObjectSize sz, store->Size(f.handle()));
      v1::ObjectSize* o = out->add_sizes();
      o->set_handle(f.handle());
      o->set_server(primary);
      o->set_slot(slot);
      o->set_size(sz.size);
      o->set_blocks(sz.blocks);
      return Status::Ok();
    }
    default:
      return Invalid("unknown collective op");
  }
}

void CollectiveRunner::NoteRemovedHere(Handle h) {
  // Only collective mode sends CREATE collectives.
  if (cluster_.metadata_mode != MetadataMode::kCollective) return;
  std::lock_guard<std::mutex> l(removed_mu_);
  if (!removed_.insert(h).second) return;
  removed_order_.push_back(h);
  if (removed_order_.size() > kRemovedKept) {
    removed_.erase(removed_order_.front());
    removed_order_.pop_front();
  }
}

bool CollectiveRunner::RemovedHere(Handle h) {
  std::lock_guard<std::mutex> l(removed_mu_);
  return removed_.count(h) != 0;
}

namespace {
void Merge(v1::CollectiveReply* into, const v1::CollectiveReply& from) {
  for (const auto& s : from.sizes()) *into->add_sizes() = s;
  for (uint32_t d : from.done()) into->add_done(d);
  for (uint32_t f : from.failed()) into->add_failed(f);
  if (into->code() == 0 && from.code() != 0) {
    into->set_code(from.code());
    into->set_message(from.message());
  }
}

// Binary tree: the targets after this server (the first, if it is one:
// *local) in two halves, each sent to its first member, which forwards the
// rest of it.
std::vector<std::vector<uint32_t>> SplitTargets(const v1::CollectiveRequest& r, ServerId self,
                                                bool* local) {
  std::vector<uint32_t> rest(r.targets().begin(), r.targets().end());
  *local = !rest.empty() && rest.front() == self;
  if (*local) rest.erase(rest.begin());
  std::vector<std::vector<uint32_t>> halves;
  if (rest.empty()) return halves;
  const size_t mid = (rest.size() + 1) / 2;
  halves.emplace_back(rest.begin(), rest.begin() + static_cast<long>(mid));
  if (mid < rest.size()) halves.emplace_back(rest.begin() + static_cast<long>(mid), rest.end());
  return halves;
}

// What one hop gathers: the replies of its halves and of its local part;
// `done` runs once, with the last of them.
class Gather {
 public:
  Gather(int parts, std::function<void(v1::CollectiveReply)> done)
      : pending_(parts), done_(std::move(done)) {}
  void Add(const v1::CollectiveReply& part) {
    std::unique_lock<std::mutex> l(mu_);
    Merge(&reply_, part);
    EndPart(&l);
  }
  // A half that did not answer: its servers failed.
  void AddFailed(const std::vector<uint32_t>& half, const Status& s) {
    std::unique_lock<std::mutex> l(mu_);
    for (uint32_t t : half) reply_.add_failed(t);
    if (reply_.code() == 0) {
      reply_.set_code(static_cast<int>(Code::kUnavailable));
      reply_.set_message("server " + std::to_string(half.front()) + ": " + s.ToString());
    }
    EndPart(&l);
  }

 private:
  void EndPart(std::unique_lock<std::mutex>* l) {
    if (--pending_ != 0) return;
    l->unlock();
    done_(std::move(reply_));
  }

  std::mutex mu_;
  int pending_;
  v1::CollectiveReply reply_;
  std::function<void(v1::CollectiveReply)> done_;
};

}  // namespace

void CollectiveRunner::Run(const v1::CollectiveRequest& r,
                           std::function<void(v1::CollectiveReply)> done) {
  bool local = false;
  std::vector<std::vector<uint32_t>> halves = SplitTargets(r, self_, &local);
  // A removal's local part (unlinks of objects, with the file system's
  // discard) runs on the reaper, off the RPC thread.
  const bool on_reaper = local && r.op() == v1::COLL_REMOVE && reaper_ != nullptr;
  if (halves.empty() && !on_reaper) {
    v1::CollectiveReply mine;
    if (local) LocalPart(r, &mine);
    return done(std::move(mine));
  }
  // The local part counts as one more participant; it runs after the halves are
  // sent, so this server's disk work overlaps the subtrees'.
  auto g = std::make_shared<Gather>(static_cast<int>(halves.size()) + (local ? 1 : 0),
                                    std::move(done));
  // Each half gets the time this hop was given (relative: a subtree's own
  // deadline is counted on its sender's clock, never compared across servers).
  const uint32_t budget = r.budget_ms() != 0 ? r.budget_ms() : cluster_.rpc_timeout_ms;
  for (std::vector<uint32_t>& half : halves) {
    v1::CollectiveRequest sub = r;
    sub.set_budget_ms(budget);
    sub.clear_targets();
    for (uint32_t t : half) sub.add_targets(t);
    peers_->Collective(half.front(), sub, [g, half](Status s, v1::CollectiveReply rep) {
      if (s.ok()) {
        g->Add(rep);
      } else {
        g->AddFailed(half, s);
      }
    });
  }
  if (!local) return;
  auto part = [this, g](const v1::CollectiveRequest& req) {
    v1::CollectiveReply mine;
    LocalPart(req, &mine);
    g->Add(mine);
  };
  if (on_reaper) {
    reaper_->Submit([part, req = r] { part(req); });
  } else {
    part(r);
  }
}

v1::CollectiveRequest CollectiveRunner::Build(v1::CollectiveOp op,
                                              std::vector<v1::CollFile> files) const {
  std::set<uint32_t> servers;
  for (const v1::CollFile& f : files) {
    for (ServerId s : CopyServers(FromProto(f.layout()), cluster_.size())) servers.insert(s);
  }
  v1::CollectiveRequest r;
  r.set_op(op);
  r.set_server_count(cluster_.size());
  r.set_budget_ms(cluster_.rpc_timeout_ms);
  // The initiator goes first when it takes part, so its local part runs here.
  if (servers.count(self_)) r.add_targets(self_);
  for (uint32_t s : servers) {
    if (s != self_) r.add_targets(s);
  }
  for (v1::CollFile& f : files) *r.add_files() = std::move(f);
  return r;
}

v1::CollectiveReply CollectiveRunner::CollectiveReport(v1::CollectiveOp op,
                                                      std::vector<v1::CollFile> files) {
  std::promise<v1::CollectiveReply> p;
  std::future<v1::CollectiveReply> fut = p.get_future();
  Run(Build(op, std::move(files)), [&p](v1::CollectiveReply rep) { p.set_value(std::move(rep)); });
  return fut.get();
}

Result<v1::CollectiveReply> CollectiveRunner::Collective(v1::CollectiveOp op,
                                                         std::vector<v1::CollFile> files) {
  v1::CollectiveReply rep = CollectiveReport(op, std::move(files));
  if (rep.code() != 0) {
    return Status(static_cast<Code>(rep.code()), "collective: " + rep.message());
  }
  return rep;
}

void CollectiveRunner::FillSizesAsync(std::vector<v1::Attr*> attrs,
                                      std::function<void(Status)> done) {
  // metadata_mode = "collective" is paper 004's server-driven mode: a stat
  // gathers every regular file's size from its data servers (STAT collective).
  GatherSizesAsync(std::move(attrs), cluster_.metadata_mode == MetadataMode::kCollective,
                   std::move(done));
}

void CollectiveRunner::GatherSizesAsync(std::vector<v1::Attr*> attrs, bool all,
                                        std::function<void(Status)> done) {
  std::vector<v1::CollFile> files;
  auto by_handle = std::make_shared<std::unordered_map<Handle, std::vector<v1::Attr*>>>();
  auto layouts = std::make_shared<std::unordered_map<Handle, Layout>>();
  for (v1::Attr* a : attrs) {
    if (a->type() != v1::FT_REGULAR) continue;
    // No open writer: the size and allocation M keeps are exact (sizes on M).
    if (!all && a->writers() == 0) continue;
    auto& v = (*by_handle)[a->handle()];
    if (v.empty()) {
      v1::CollFile f;
      f.set_handle(a->handle());
      *f.mutable_layout() = a->layout();
      (*layouts)[a->handle()] = FromProto(a->layout());
      files.push_back(std::move(f));
    }
    v.push_back(a);
  }
  if (files.empty()) return done(Status::Ok());
  const uint32_t n_servers = cluster_.size();
  Run(Build(v1::COLL_STAT, std::move(files)),
      [by_handle, layouts, n_servers, done = std::move(done)](v1::CollectiveReply rep) {
        // Per file and primary: the size of its lowest copy that answered
        // (replicated files: a server down leaves its units' replicas).
        std::map<std::pair<Handle, ServerId>, std::pair<uint32_t, uint64_t>> lowest;
        std::unordered_map<Handle, std::pair<uint64_t, uint64_t>> sizes;
        for (const v1::ObjectSize& o : rep.sizes()) {
          auto [it, fresh] = lowest.try_emplace({o.handle(), o.server()}, o.slot(), o.size());
          if (!fresh && o.slot() < it->second.first) it->second = {o.slot(), o.size()};
          sizes[o.handle()].second += o.blocks();
        }
        if (rep.code() != 0) {
          // An error only when some file's units have no copy that answered.
          for (const auto& [h, l] : *layouts) {
            for (ServerId p : DataServers(l, n_servers)) {
              if (lowest.count({h, p}) == 0) {
                return done(
                    Status(static_cast<Code>(rep.code()), "stat collective: " + rep.message()));
              }
            }
          }
        }
        for (const auto& [key, v] : lowest) {
          auto& e = sizes[key.first];
          e.first = std::max(e.first, LogicalEnd((*layouts)[key.first], n_servers, key.second,
                                                 v.second));
        }
        for (auto& [h, list] : *by_handle) {
          auto it = sizes.find(h);
          for (v1::Attr* a : list) {
            // The stored size is a lower bound (reported by writers, set by
            // truncate); the objects may show more written since.
            const uint64_t gathered = it == sizes.end() ? 0 : it->second.first;
            a->set_size(std::max<uint64_t>(a->size(), gathered));
            a->set_blocks(it == sizes.end() ? 0 : it->second.second);
          }
        }
        done(Status::Ok());
      });
}

Status CollectiveRunner::FillSizes(std::vector<v1::Attr*> attrs) {
  std::promise<Status> p;
  std::future<Status> f = p.get_future();
  GatherSizesAsync(std::move(attrs), cluster_.metadata_mode == MetadataMode::kCollective,
                   [&p](Status s) { p.set_value(std::move(s)); });
  return f.get();
}

Status CollectiveRunner::GatherSizes(std::vector<v1::Attr*> attrs) {
  std::promise<Status> p;
  std::future<Status> f = p.get_future();
  GatherSizesAsync(std::move(attrs), true, [&p](Status s) { p.set_value(std::move(s)); });
  return f.get();
}

}  // namespace clf::server
