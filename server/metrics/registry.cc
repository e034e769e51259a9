#include "server/metrics/registry.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace clf::server::metrics {
namespace {

// Shortest text that reads back as the same double; Prometheus spells the
// special values +Inf, -Inf and NaN.
std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  double back = 0;
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::sscanf(buf, "%lf", &back) == 1 && back == v) break;
  }
  return buf;
}

void Header(std::ostringstream& os, const std::string& name, const char* type,
            const std::string& help) {
  os << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {

// {k="v",...} (empty for no labels).
std::string LabelSet(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string l;
  for (const auto& [k, v] : labels) l += (l.empty() ? "{" : ",") + k + "=\"" + EscapeLabel(v) + "\"";
  if (!l.empty()) l += "}";
  return l;
}

}  // namespace

void Registry::AddGauge(std::string name, std::string help, std::function<double()> read,
                        std::vector<std::pair<std::string, std::string>> labels) {
  std::string l = LabelSet(labels);
  std::lock_guard<std::mutex> g(mu_);
  gauges_.push_back(Gauge{std::move(name), std::move(help), std::move(l), std::move(read), "gauge"});
}

void Registry::AddCounter(std::string name, std::string help, std::function<double()> read,
                          std::vector<std::pair<std::string, std::string>> labels) {
  std::string l = LabelSet(labels);
  std::lock_guard<std::mutex> g(mu_);
  gauges_.push_back(
      Gauge{std::move(name), std::move(help), std::move(l), std::move(read), "counter"});
}

void Registry::AddScrapeHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> g(mu_);
  hooks_.push_back(std::move(hook));
}

void Registry::RecordRpc(const std::string& method, const std::string& code, double seconds) {
  size_t b = 0;
  while (b < kLatencyBuckets.size() && seconds > kLatencyBuckets[b]) ++b;
  std::lock_guard<std::mutex> g(mu_);
  Rpc& r = rpcs_[method];
  ++r.by_code[code];
  if (b < kLatencyBuckets.size()) ++r.buckets[b];
  ++r.count;
  r.sum += seconds;
}

void Registry::AddBytes(const std::string& transport, uint64_t in, uint64_t out) {
  std::lock_guard<std::mutex> g(mu_);
  auto& [i, o] = bytes_[transport];
  i += in;
  o += out;
}

std::string Registry::Render() const {
  // Gauge callbacks may take their own locks (RocksDB, the object store): read
  // them without holding mu_, from a copy of the list.
  std::vector<Gauge> gauges;
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> g(mu_);
    gauges = gauges_;
    hooks = hooks_;
  }
  for (const auto& hook : hooks) hook();
  std::ostringstream os;
  std::string last;
  for (const Gauge& g : gauges) {
    if (g.name != last) Header(os, g.name, g.type, g.help);
    last = g.name;
    os << g.name << g.labels << ' ' << Num(g.read()) << '\n';
  }
  std::lock_guard<std::mutex> l(mu_);
  Header(os, "clf_rpc_handled_total", "counter",
         "gRPC calls this server finished, by method and status code.");
  for (const auto& [method, r] : rpcs_) {
    for (const auto& [code, n] : r.by_code) {
      os << "clf_rpc_handled_total{method=\"" << EscapeLabel(method) << "\",code=\""
         << EscapeLabel(code) << "\"} " << n << '\n';
    }
  }
  Header(os, "clf_rpc_duration_seconds", "histogram",
         "Time from a gRPC call's arrival to its status being sent, by method.");
  for (const auto& [method, r] : rpcs_) {
    const std::string m = EscapeLabel(method);
    uint64_t cum = 0;
    for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
      cum += r.buckets[b];
      os << "clf_rpc_duration_seconds_bucket{method=\"" << m << "\",le=\"" << Num(kLatencyBuckets[b])
         << "\"} " << cum << '\n';
    }
    os << "clf_rpc_duration_seconds_bucket{method=\"" << m << "\",le=\"+Inf\"} " << r.count << '\n'
       << "clf_rpc_duration_seconds_sum{method=\"" << m << "\"} " << Num(r.sum) << '\n'
       << "clf_rpc_duration_seconds_count{method=\"" << m << "\"} " << r.count << '\n';
  }
  Header(os, "clf_transport_received_bytes_total", "counter",
         "Bytes of request messages received, by transport.");
  for (const auto& [t, io] : bytes_) {
    os << "clf_transport_received_bytes_total{transport=\"" << EscapeLabel(t) << "\"} " << io.first
       << '\n';
  }
  Header(os, "clf_transport_sent_bytes_total", "counter",
         "Bytes of reply messages sent, by transport.");
  for (const auto& [t, io] : bytes_) {
    os << "clf_transport_sent_bytes_total{transport=\"" << EscapeLabel(t) << "\"} " << io.second
       << '\n';
  }
  return os.str();
}

}  // namespace clf::server::metrics
