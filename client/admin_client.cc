#include "client/admin_client.h"

#include <chrono>
#include <future>
#include <mutex>

namespace clf::client {

void AdminClient::StatusAll(
    std::function<void(std::vector<std::pair<Status, v1::StatusReply>>)> done,
    uint32_t timeout_ms) {
  struct G {
    std::mutex mu;
    int pending;
    std::vector<std::pair<Status, v1::StatusReply>> out;
  };
  auto g = std::make_shared<G>();
  g->pending = static_cast<int>(rpc_.cluster().size());
  g->out.resize(rpc_.cluster().size());
  auto shared_done = std::make_shared<decltype(done)>(std::move(done));
  for (ServerId s = 0; s < rpc_.cluster().size(); ++s) {
    rpc_.Unary<v1::StatusRequest, v1::StatusReply>(
        [stub = rpc_.admin(s)](grpc::ClientContext* ctx, v1::StatusRequest* rq, v1::StatusReply* rs,
                               std::function<void(grpc::Status)> cb) {
          stub->async()->Status(ctx, rq, rs, std::move(cb));
        },
        v1::StatusRequest(),
        std::function<void(Status, v1::StatusReply&)>(
            [g, s, shared_done](Status st, v1::StatusReply& r) {
              std::unique_lock<std::mutex> l(g->mu);
              g->out[s] = {st, r};
              if (--g->pending > 0) return;
              l.unlock();
              (*shared_done)(std::move(g->out));
            }),
        timeout_ms);
  }
}

void AdminClient::StatFs(Callback<struct StatFs> cb) {
  StatusAll(
      [cb = std::move(cb)](std::vector<std::pair<Status, v1::StatusReply>> all) {
        struct StatFs f;
        for (auto& [st, r] : all) {
          if (!st.ok()) {
            ++f.servers_down;
            continue;
          }
          ++f.servers_up;
          f.bytes_total += r.bytes_total();
          f.bytes_free += r.bytes_free();
          f.files += r.inodes() + r.files_free();
          f.files_free += r.files_free();
        }
        if (f.servers_up == 0) return cb(Unavailable("no server answers"));
        cb(f);
      },
      rpc_.timeout_ms());
}

std::vector<ServerStatus> AdminClient::ServerStatuses() {
  std::promise<std::vector<std::pair<Status, v1::StatusReply>>> p;
  auto fut = p.get_future();
  auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t sent_ms = wall_ms();
  StatusAll(
      [&p](std::vector<std::pair<Status, v1::StatusReply>> all) { p.set_value(std::move(all)); },
      std::min<uint32_t>(rpc_.timeout_ms(), 3000));
  auto all = fut.get();
  const int64_t done_ms = wall_ms();
  std::vector<ServerStatus> out;
  for (ServerId s = 0; s < all.size(); ++s) {
    ServerStatus ss;
    ss.id = s;
    ss.address = rpc_.cluster().servers[s].address;
    ss.up = all[s].first.ok();
    if (!ss.up) {
      ss.error = all[s].first.ToString();
    } else {
      const v1::StatusReply& r = all[s].second;
      ss.uptime_s = r.uptime_s();
      ss.objects = r.objects();
      ss.inodes = r.inodes();
      ss.bytes_used = r.bytes_used();
      ss.bytes_free = r.bytes_free();
      ss.bytes_total = r.bytes_total();
      ss.files_free = r.files_free();
      ss.rocksdb_bytes = r.rocksdb_bytes();
      ss.requests = r.requests();
      ss.lock_sessions = r.lock_sessions();
      ss.locks_granted = r.locks_granted();
      ss.locks_waiting = r.locks_waiting();
      ss.garbage = r.garbage();
      ss.version = r.version();
      ss.clock_skew_ms = r.wall_time_ms() - (sent_ms + done_ms) / 2;
      ss.clock_skew_error_ms = (done_ms - sent_ms + 1) / 2;
      ss.transport = r.transport().empty() ? "grpc" : r.transport();
      ss.data_address = r.data_address();
      ss.rename_intents = r.rename_intents();
      ss.rename_outcomes = r.rename_outcomes();
      ss.stale_copies = r.stale_copies();
      ss.resync_bytes = r.resync_bytes();
      ss.resynced_copies = r.resynced_copies();
      ss.resync_running = r.resync_running();
    }
    out.push_back(std::move(ss));
  }
  return out;
}

Result<Client::ObjectListing> AdminClient::ListObjects(ServerId server) {
  if (server >= rpc_.cluster().size()) return Invalid("no such server");
  grpc::ClientContext ctx;
  rpc_.Prepare(&ctx, 60000);
  v1::ListObjectsReply rep;
  Status st = FromGrpc(rpc_.admin(server)->ListObjects(&ctx, v1::ListObjectsRequest(), &rep));
  if (!st.ok()) return st;
  Client::ObjectListing l;
  l.data_objects.assign(rep.data_objects().begin(), rep.data_objects().end());
  l.meta_objects.assign(rep.meta_objects().begin(), rep.meta_objects().end());
  l.orphans.assign(rep.orphans().begin(), rep.orphans().end());
  return l;
}

Status AdminClient::RemoveDataObject(ServerId server, Handle h) {
  if (server >= rpc_.cluster().size()) return Invalid("no such server");
  grpc::ClientContext ctx;
  rpc_.Prepare(&ctx);
  v1::RemoveObjectRequest r;
  r.set_handle(h);
  v1::RemoveObjectReply rep;
  return FromGrpc(rpc_.admin(server)->RemoveObject(&ctx, r, &rep));
}

}  // namespace clf::client
