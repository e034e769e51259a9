#include "server/metrics/server_gauges.h"

#include <sys/statvfs.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>

#include "common/version.h"
#include "server/data/object_store.h"
#include "server/store/meta_store.h"

namespace clf::server::metrics {
namespace {

// One scrape's reading of the lock service and of the open files, shared by
// the gauges that show it (filled by a scrape hook; two scrapes may overlap,
// each then shows values of one of the two readings).
struct Snapshot {
  std::mutex mu;  // guards everything below
  LockOps::Counts locks;
  uint64_t reclaim_sessions = 0;
  uint64_t open_files = 0, open_writers = 0, orphans = 0;
  bool open_ok = true;  // the open-files scan of this reading succeeded
};

// Files open for writing as this server knows them: its attribute records with
// writers > 0 (Meta.Create with open_for_write and Meta.ReportWrite keep that
// count). A scan of every attribute record, in pages: O(inodes of this server).
// False if the scan failed (the gauges then read NaN rather than a partial count).
bool CountOpenFiles(const RocksMetaStore& store, uint64_t* files, uint64_t* writers) {
  constexpr size_t kPage = 4096;
  Handle after = 0;
  for (bool eof = false; !eof;) {
    Result<std::vector<v1::Attr>> page = store.ScanAttrs(after, kPage, &eof);
    if (!page.ok()) return false;
    if (page->empty()) return true;
    for (const v1::Attr& a : *page) {
      if (a.type() == v1::FT_REGULAR && a.writers() > 0) {
        ++*files;
        *writers += a.writers();
      }
    }
    // Keys are 'a' + handle: a record whose handle field is not past the page's
    // start would restart the scan there forever.
    if (page->back().handle() <= after) return false;
    after = page->back().handle();
  }
  return true;
}

}  // namespace

// Long on purpose: a flat list of registrations, one per metric, so what the
// server exports reads in one place.
void RegisterServerGauges(Registry* r, const ServiceContext* c) {
  r->AddGauge("clf_build_info", "Always 1; the labels name the clfd version and server id.",
              [] { return 1.0; }, {{"version", kVersion}, {"server", std::to_string(c->id)}});
  r->AddGauge("clf_uptime_seconds", "Seconds since this clfd started.", [c] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - c->started).count();
  });
  r->AddCounter("clf_requests_total", "Calls that reached a clfd handler (as in clf status).",
                [c] { return static_cast<double>(c->requests.load(std::memory_order_relaxed)); });
  r->AddGauge("clf_inodes", "Metadata objects (files, directories, symlinks) this server owns.",
              [c] { return static_cast<double>(c->ops->inode_count()); });
  r->AddGauge("clf_rocksdb_bytes", "Approximate size of this server's RocksDB (SST and memtables).",
              [c] { return static_cast<double>(c->store->ApproximateBytes()); });
  r->AddGauge("clf_object_store_bytes", "Bytes allocated by this server's data objects.",
              [c] { return static_cast<double>(c->objects->BytesUsed()); });
  r->AddGauge("clf_object_store_objects", "Data objects on this server.",
              [c] { return static_cast<double>(c->objects->Count()); });
  r->AddCounter("clf_object_syncs_total",
                "fdatasync calls on this server's data objects (a client's fsync, an O_SYNC "
                "write, a write asked to be synced).",
                [c] { return static_cast<double>(c->objects->Syncs()); });
  r->AddCounter("clf_object_direct_writes_total",
                "Writes this server put on its disk with O_DIRECT, around its page cache "
                "(direct_write_kib).",
                [c] { return static_cast<double>(c->objects->DirectWrites()); });
  if (c->replica_state != nullptr) {
    r->AddGauge("clf_replica_stale_copies",
                "Stale copies of the replicated files whose metadata is on this server (degraded "
                "objects; counted every 2 s).",
                [c] { return static_cast<double>(c->replica_state->stale_copies()); });
  }
  if (c->replication != nullptr) {
    r->AddCounter("clf_replica_forwarded_writes_total",
                  "Writes and syncs this server ordered and forwarded to another copy.",
                  [c] { return static_cast<double>(c->replication->forwarded()); });
    r->AddCounter("clf_replica_copy_reads_total",
                  "Reads this server served from a copy in slot 1 or later (the client's "
                  "read_sched chose that copy, or an earlier one could not serve).",
                  [c] { return static_cast<double>(c->replication->copy_reads()); });
    r->AddCounter("clf_replica_marked_stale_total",
                  "Copies this server recorded stale on their metadata server (a missed write).",
                  [c] { return static_cast<double>(c->replication->marked_stale()); });
  }
  if (c->resyncer != nullptr) {
    r->AddCounter("clf_resync_bytes_total",
                  "Bytes this server copied to stale copies (their rate: rate() of this).",
                  [c] { return static_cast<double>(c->resyncer->bytes()); });
    r->AddCounter("clf_resync_copies_total", "Stale copies this server made current.",
                  [c] { return static_cast<double>(c->resyncer->resynced()); });
    r->AddGauge("clf_resync_running", "1 while this server copies a stale copy.",
                [c] { return c->resyncer->busy() ? 1.0 : 0.0; });
  }
  r->AddGauge("clf_garbage_backlog_files",
              "Removed files whose data objects are not yet freed (committed garbage records).",
              [c] { return static_cast<double>(c->store->Garbage().size()); });
  if (c->data_bytes != nullptr) {
    const DataBytes* b = c->data_bytes;
    for (DataBytes::Path p : {DataBytes::kTcp, DataBytes::kRdma, DataBytes::kGrpc}) {
      const char* help =
          "File data payload bytes moved by this server, by data path (tcp: the TCP data "
          "channel, rdma: the RDMA listener, grpc: inline Data.Write/Read) and direction "
          "(in: written to this server, out: read from it).";
      r->AddCounter("clf_data_bytes_total", help, [b, p] { return static_cast<double>(b->in(p)); },
                    {{"transport", DataBytes::Name(p)}, {"direction", "in"}});
      r->AddCounter("clf_data_bytes_total", help, [b, p] { return static_cast<double>(b->out(p)); },
                    {{"transport", DataBytes::Name(p)}, {"direction", "out"}});
    }
    r->AddCounter("clf_data_zero_copy_bytes_total",
                  "Of the TCP data channel's write payload bytes, those spliced from the socket "
                  "into the data object without a buffer. TLS connections and payloads the "
                  "splice pipe cannot hold go through a buffer.",
                  [b] { return static_cast<double>(b->zero_copy_in()); }, {{"direction", "in"}});
  }
  if (c->reads != nullptr) {
    const ReadGate* g = c->reads;
    const char* help =
        "Tagged reads of the data channel by how the read schedule (paper 000) let them in: "
        "queued (waited for a slot, then let in in the clients' policy order) or immediate.";
    r->AddCounter("clf_read_schedule_reads_total", help,
                  [g] { return static_cast<double>(g->waited()); }, {{"admitted", "queued"}});
    r->AddCounter("clf_read_schedule_reads_total", help,
                  [g] { return static_cast<double>(g->immediate()); }, {{"admitted", "immediate"}});
  }
  auto snap = std::make_shared<Snapshot>();
  r->AddScrapeHook([c, snap] {
    Snapshot s;
    if (c->locks != nullptr) {
      s.locks = c->locks->counts();
      s.reclaim_sessions = c->locks->reclaim_sessions();
    }
    s.open_ok = CountOpenFiles(*c->store, &s.open_files, &s.open_writers);
    s.orphans = c->store->Orphans().size();
    std::lock_guard<std::mutex> l(snap->mu);
    snap->locks = s.locks;
    snap->reclaim_sessions = s.reclaim_sessions;
    snap->open_files = s.open_files;
    snap->open_writers = s.open_writers;
    snap->orphans = s.orphans;
    snap->open_ok = s.open_ok;
  });
  auto read = [snap](uint64_t Snapshot::*field) {
    return [snap, field] {
      std::lock_guard<std::mutex> l(snap->mu);
      return static_cast<double>((*snap).*field);
    };
  };
  auto read_lock = [snap](uint64_t LockOps::Counts::*field) {
    return [snap, field] {
      std::lock_guard<std::mutex> l(snap->mu);
      return static_cast<double>(snap->locks.*field);
    };
  };
  auto read_scanned = [snap](uint64_t Snapshot::*field) {
    return [snap, field] {
      std::lock_guard<std::mutex> l(snap->mu);
      return snap->open_ok ? static_cast<double>((*snap).*field) : std::nan("");
    };
  };
  r->AddGauge("clf_open_files",
              "Regular files of this server open for writing (writers > 0); opens for reading "
              "only are not reported to servers. NaN if reading the metadata failed.",
              read_scanned(&Snapshot::open_files));
  r->AddGauge("clf_open_writers",
              "Opens for writing of this server's files (sum of writers). NaN if reading the "
              "metadata failed.",
              read_scanned(&Snapshot::open_writers));
  r->AddGauge("clf_orphan_files",
              "Unlinked files kept because a client still has them open (until Meta.Destroy).",
              read(&Snapshot::orphans));
  if (c->locks != nullptr) {
    const LockOps* locks = c->locks;
    r->AddGauge("clf_lock_sessions", "Open lock sessions (leases) on this server.",
                read_lock(&LockOps::Counts::sessions));
    r->AddGauge("clf_lock_reclaim_sessions",
                "Lock sessions opened to reclaim locks of the previous incarnation; 0 outside "
                "the grace period.",
                read(&Snapshot::reclaim_sessions));
    r->AddGauge("clf_lock_grace", "1 while the lock service's reclaim grace period runs, else 0.",
                [locks] { return locks->in_grace() ? 1.0 : 0.0; });
    const char* help =
        "Locks on this server's files (list locks and POSIX record/flock locks), "
        "granted or waiting.";
    r->AddGauge("clf_locks", help, read_lock(&LockOps::Counts::granted), {{"state", "granted"}});
    r->AddGauge("clf_locks", help, read_lock(&LockOps::Counts::waiting), {{"state", "waiting"}});
  }
  auto fs = [c](bool total) {
    struct statvfs sv;
    if (::statvfs(c->objects->dir().c_str(), &sv) != 0) return 0.0;
    return static_cast<double>(total ? sv.f_blocks : sv.f_bavail) *
           static_cast<double>(sv.f_frsize);
  };
  r->AddGauge("clf_data_fs_bytes", "Size of the file system holding the data directory.",
              [fs] { return fs(true); }, {{"kind", "total"}});
  r->AddGauge("clf_data_fs_bytes", "Size of the file system holding the data directory.",
              [fs] { return fs(false); }, {{"kind", "available"}});
}

}  // namespace clf::server::metrics
