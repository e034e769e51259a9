#include "server/metrics/server_gauges.h"

#include <sys/statvfs.h>

#include <chrono>

#include "common/version.h"
#include "server/data/object_store.h"
#include "server/store/meta_store.h"

namespace clf::server::metrics {

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
  r->AddGauge("clf_garbage_backlog_files",
              "Removed files whose data objects are not yet freed (committed garbage records).",
              [c] { return static_cast<double>(c->store->Garbage().size()); });
  auto fs = [c](bool total) {
    struct statvfs sv;
    if (::statvfs(c->objects->dir().c_str(), &sv) != 0) return 0.0;
    return static_cast<double>(total ? sv.f_blocks : sv.f_bavail) * static_cast<double>(sv.f_frsize);
  };
  r->AddGauge("clf_data_fs_bytes", "Size of the file system holding the data directory.",
              [fs] { return fs(true); }, {{"kind", "total"}});
  r->AddGauge("clf_data_fs_bytes", "Size of the file system holding the data directory.",
              [fs] { return fs(false); }, {{"kind", "available"}});
}

}  // namespace clf::server::metrics
