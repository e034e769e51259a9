// The metrics of one clfd, rendered in the Prometheus text exposition format
// (version 0.0.4). Three kinds:
//  - gauges read on every scrape from a callback (sizes, counts, uptime);
//  - per-RPC counters and latency histograms, recorded by the gRPC interceptor
//    (rpc_interceptor.h) once per finished call;
//  - byte counters of messages received and sent, per transport.
// No HTTP here: http_exporter.h serves Render().
//
// Thread safety: every method may be called from any thread. Gauge callbacks
// run on the scraping thread (civetweb's) and must be thread safe themselves.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace clf::server::metrics {

// Upper bounds (seconds) of the latency histogram buckets; +Inf is implied.
inline constexpr std::array<double, 14> kLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};

class Registry {
 public:
  // A gauge named `name` (clf_ prefix expected) with an optional label set
  // ("{k=\"v\"}" form is built here from `labels`); `read` is called per scrape.
  void AddGauge(std::string name, std::string help, std::function<double()> read,
                std::vector<std::pair<std::string, std::string>> labels = {});
  // The same for a value that only grows (exposed as a counter; name ends in _total).
  void AddCounter(std::string name, std::string help, std::function<double()> read,
                  std::vector<std::pair<std::string, std::string>> labels = {});
  // Runs at the start of every Render, before any gauge is read (on the
  // scraping thread, without the registry's lock): lets the gauges of one
  // scrape share one reading of something costly (lock counts, a scan).
  void AddScrapeHook(std::function<void()> hook);

  // One finished RPC: method is the full gRPC path ("/clf.v1.Meta/Lookup"),
  // code the gRPC status code name ("OK", "NOT_FOUND", ...).
  void RecordRpc(const std::string& method, const std::string& code, double seconds);

  // Bytes of request (in) and reply (out) messages on a transport ("grpc").
  void AddBytes(const std::string& transport, uint64_t in, uint64_t out);

  // The exposition text: every family with # HELP and # TYPE lines.
  std::string Render() const;

 private:
  struct Gauge {
    std::string name, help, labels;
    std::function<double()> read;
    const char* type = "gauge";
  };
  struct Rpc {
    std::map<std::string, uint64_t> by_code;
    std::array<uint64_t, kLatencyBuckets.size()> buckets{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;  // guards everything below
  std::vector<Gauge> gauges_;
  std::vector<std::function<void()>> hooks_;
  std::map<std::string, Rpc> rpcs_;  // by method
  std::map<std::string, std::pair<uint64_t, uint64_t>> bytes_;  // transport -> in, out
};

// Escapes a label value for the exposition format (backslash, quote, newline).
std::string EscapeLabel(const std::string& v);

}  // namespace clf::server::metrics
