// Serves a Registry's Render() as Prometheus text on http://ADDRESS/metrics,
// with civetweb (Debian's libcivetweb). No civetweb type leaves this pair.
//
// Only GET and HEAD of /metrics are answered (other paths 404, other methods
// 405); civetweb parses and bounds the requests. Two worker threads serve
// scrapes; a scrape reads the registry's gauges on a worker thread.
// Thread safety: Start and destruction from one thread; the exporter stops
// serving (and joins its threads) in its destructor.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "server/metrics/registry.h"

namespace clf::server::metrics {

class HttpExporter {
 public:
  // Listens on "host:port" (host resolved to a numeric address; port 0 picks
  // a free one, see port()). `registry` must outlive the exporter.
  static Result<std::unique_ptr<HttpExporter>> Start(const std::string& address,
                                                     const Registry* registry);
  ~HttpExporter();
  HttpExporter(const HttpExporter&) = delete;
  HttpExporter& operator=(const HttpExporter&) = delete;

  int port() const { return port_; }

  struct Impl;  // opaque: civetweb's context

 private:
  HttpExporter() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace clf::server::metrics
