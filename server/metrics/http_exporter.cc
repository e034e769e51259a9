#include "server/metrics/http_exporter.h"

#include <netdb.h>
#include <sys/socket.h>

#include <civetweb.h>

#include <cstring>
#include <mutex>

#include "common/log.h"

namespace clf::server::metrics {

struct HttpExporter::Impl {
  mg_context* ctx = nullptr;
  const Registry* registry = nullptr;
};

namespace {

// civetweb's listening_ports wants a numeric host: "1.2.3.4:9570" or "[::1]:9570".
Result<std::string> NumericListenSpec(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 >= address.size()) {
    return Invalid("metrics_address must be host:port: " + address);
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) {
    return Invalid("metrics_address port is not a number: " + address);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Invalid("metrics_address " + address + ": " + ::gai_strerror(rc));
  }
  char num[NI_MAXHOST];
  const int nrc = ::getnameinfo(res->ai_addr, res->ai_addrlen, num, sizeof num, nullptr, 0, NI_NUMERICHOST);
  const bool v6 = res->ai_family == AF_INET6;
  ::freeaddrinfo(res);
  if (nrc != 0) return Invalid("metrics_address " + address + ": " + ::gai_strerror(nrc));
  return v6 ? "[" + std::string(num) + "]:" + port : std::string(num) + ":" + port;
}

int HandleMetrics(mg_connection* conn, void* cbdata) {
  const auto* impl = static_cast<const HttpExporter::Impl*>(cbdata);
  const mg_request_info* ri = mg_get_request_info(conn);
  const bool head = ri != nullptr && ri->request_method != nullptr &&
                    std::strcmp(ri->request_method, "HEAD") == 0;
  const bool get = ri != nullptr && ri->request_method != nullptr &&
                   std::strcmp(ri->request_method, "GET") == 0;
  if (!get && !head) {
    mg_send_http_error(conn, 405, "%s", "only GET and HEAD\n");
    return 405;
  }
  const std::string body = impl->registry->Render();
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            "Content-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            body.size());
  if (!head) mg_write(conn, body.data(), body.size());
  return 200;
}

int LogMessage(const mg_connection*, const char* message) {
  CLF_LOG_WARN("metrics http: {}", message != nullptr ? message : "");
  return 1;  // handled: civetweb prints nothing itself
}

}  // namespace

Result<std::unique_ptr<HttpExporter>> HttpExporter::Start(const std::string& address,
                                                          const Registry* registry) {
  CLF_ASSIGN_OR_RETURN(std::string spec, NumericListenSpec(address));
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  std::unique_ptr<HttpExporter> e(new HttpExporter());
  e->impl_ = std::make_unique<Impl>();
  e->impl_->registry = registry;
  const char* options[] = {"listening_ports", spec.c_str(),
                           "num_threads", "2",
                           "request_timeout_ms", "10000",
                           "enable_keep_alive", "no",
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = LogMessage;
  e->impl_->ctx = mg_start(&callbacks, nullptr, options);
  if (e->impl_->ctx == nullptr) {
    return Unavailable("metrics: cannot listen on " + address + " (" + spec + ")");
  }
  mg_set_request_handler(e->impl_->ctx, "/metrics$", HandleMetrics, e->impl_.get());
  mg_server_port ports[4];
  const int n = mg_get_server_ports(e->impl_->ctx, 4, ports);
  e->port_ = n > 0 ? ports[0].port : 0;
  return e;
}

HttpExporter::~HttpExporter() {
  if (impl_ && impl_->ctx != nullptr) mg_stop(impl_->ctx);
}

}  // namespace clf::server::metrics
