// The TCP data channel (wire format in tcp_protocol.h): a client pool of
// persistent authenticated connections per server, and the server's listener.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/credentials.h"
#include "common/transport/tcp_protocol.h"
#include "common/transport/transport.h"

struct ssl_st;

namespace clf::transport {

// How connections of the data channel authenticate (tcp_protocol.h): an HMAC
// challenge over the secret, or with `tls` set a mutual TLS handshake with that
// context (MakeDataTlsContext: the cluster CA, our certificate). On a listener,
// encrypt_data = false keeps bulk frames in plaintext after the handshake.
struct DataChannelAuth {
  std::string secret;
  SslCtxPtr tls;
  bool encrypt_data = true;
  // Listener without TLS: a connection that proves this secret instead of
  // `secret` is a server's (the servers' peer secret); empty: none is. With
  // TLS the role is the client certificate's OU. Only a server's connection
  // may send a forwarded copy's request (ObjectRef::forwarded: the acting
  // primary's forwarded writes, syncs and resync cuts).
  std::string server_secret;
};

// Client end for one server. Keeps up to `max_connections` connections; a call
// takes an idle one (or dials a new one, or waits for one), sends one request
// with writev straight from the caller's iovecs, and for reads receives the
// reply payload with readv straight into the caller's iovecs. A connection
// that failed is closed, never reused; a request that fails on a reused
// connection before any reply byte arrived is retried once on a new one
// (writes and reads of fixed extents are idempotent).
class TcpTransport final : public DataTransport {
 public:
  TcpTransport(std::string address, std::string secret, uint32_t timeout_ms,
               size_t max_connections = 4);
  TcpTransport(std::string address, DataChannelAuth auth, uint32_t timeout_ms,
               size_t max_connections = 4);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  TransportKind kind() const override { return TransportKind::kTcp; }
  const std::string& address() const { return address_; }
  // Dials and authenticates one connection and keeps it in the pool. kUnavailable
  // when nothing answers on the data port; kUnauthenticated on a secret mismatch
  // or a certificate either end refuses.
  Status Probe();

  Status Write(const ObjectRef& obj, const std::vector<Extent>& extents, const std::vector<iovec>& payload,
               bool sync) override;
  Status Read(const ObjectRef& obj, const std::vector<Extent>& extents,
              const std::vector<iovec>& dest) override;
  Status Sync(const ObjectRef& obj) override;
  Status ReadTagged(const ObjectRef& obj, const std::vector<Extent>& extents, const std::vector<iovec>& dest,
                    uint32_t sched_tag) override;
  // Over a plaintext connection the reply's payload is spliced from the
  // socket into the pipe (no copy); TLS connections read into *bytes.
  // Server to server (resync): cuts the copy obj names to `size` bytes. Only
  // the copy's acting primary may (a forwarded ObjectRef).
  Status Truncate(const ObjectRef& obj, uint64_t size);
  Status ReadToPipe(const ObjectRef& obj, const std::vector<Extent>& extents, uint64_t length, int pipe_w,
                    int pipe_r, uint32_t sched_tag, bool* in_pipe, std::string* bytes) override;

 private:
  struct Conn {
    int fd = -1;
    ssl_st* ssl = nullptr;  // null: no TLS (or TLS unwrapped after the handshake)
    ~Conn();
  };
  Status AuthenticateSecret(Conn& c);
  Status AuthenticateTls(Conn& c);
  enum class Op { kWrite, kRead, kSync, kTruncate };
  Result<std::unique_ptr<Conn>> Connect();
  // An idle connection (*reused) or a new one; fresh: drop the idle ones and dial.
  Result<std::unique_ptr<Conn>> Acquire(bool fresh, bool* reused);
  void Release(std::unique_ptr<Conn> c);  // back to the pool (healthy connections only)
  void Drop();                            // a connection was closed: a slot is free
  // A read's reply payload into a pipe (ReadToPipe): the pipe's ends, and
  // where the bytes go instead when they cannot be spliced.
  struct PipeDest {
    int w = -1, r = -1;
    uint64_t length = 0;
    bool* in_pipe = nullptr;
    std::string* bytes = nullptr;
  };
  // One request on one connection; *replied: some reply byte arrived. A read
  // with `pipe` receives into it instead of `iov`.
  Status Call(Conn& c, Op op, const ObjectRef& obj, const std::vector<Extent>& extents,
              const std::vector<iovec>& iov, bool sync, uint32_t sched_tag, bool* healthy,
              bool* replied, const PipeDest* pipe = nullptr);
  Status Run(Op op, const ObjectRef& obj, const std::vector<Extent>& extents, const std::vector<iovec>& iov,
             bool sync, uint32_t sched_tag = 0, const PipeDest* pipe = nullptr);

  const std::string address_;
  const DataChannelAuth auth_;
  const uint32_t timeout_ms_;
  const size_t max_connections_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;  // guards idle_ and open_
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> idle_;
  size_t open_ = 0;  // connections alive (idle or in use)
};

// The server's side of one request on an authenticated connection: reads a
// frame (header, extents, payload) from `l`, checks it, calls `handler` and
// writes the reply. Returns false when the connection must be closed (peer
// closed, malformed or oversized frame: answered with an error reply first,
// stalled mid-frame past `frame_timeout_ms`). `stop_fd` (or -1) readable
// aborts the reads. `buf` is scratch space kept across calls. With `pipe`
// (a plaintext connection) and a handler that gives object descriptors
// (DataHandler::ObjectFd), writes are spliced into the object
// (common/transport/zero_copy.h); otherwise, and for reads, bytes go through
// `buf`. TcpDataListener runs it per frame; the frame fuzz harness
// (test/fuzz/frame_fuzz.cc) drives it over a socketpair.
class SplicePipe;
// `from_server`: the connection is a server's; a forwarded copy's request
// from any other is refused (kPermission) and the connection closed.
bool ServeDataFrame(tcp::Link l, DataHandler* handler, uint32_t frame_timeout_ms, int stop_fd,
                    std::string* buf, bool from_server, SplicePipe* pipe = nullptr);

// Server end: one acceptor thread and one thread per connection (at most
// max_connections; more are refused). Suited to a few persistent connections
// per client. A frame that has started must complete within `frame_timeout_ms`
// (a peer that stalls mid-frame is cut off); an idle connection may wait
// between frames indefinitely. Unauthenticated connections get
// frame_timeout_ms to authenticate. Malformed frames (bad magic or version,
// unknown op, oversized lengths, extents the handler rejects) get an error
// reply and the connection is closed.
class TcpDataListener final : public DataListener {
 public:
  TcpDataListener(std::string address, std::string secret, DataHandler* handler,
                  uint32_t frame_timeout_ms, size_t max_connections = 256);
  TcpDataListener(std::string address, DataChannelAuth auth, DataHandler* handler,
                  uint32_t frame_timeout_ms, size_t max_connections = 256);
  ~TcpDataListener() override;
  TcpDataListener(const TcpDataListener&) = delete;
  TcpDataListener& operator=(const TcpDataListener&) = delete;

  TransportKind kind() const override { return TransportKind::kTcp; }
  Status Start() override;
  void Stop() override;
  std::string address() const override { return address_; }
  size_t connections() const;

 private:
  struct Conn {
    int fd = -1;
    ssl_st* ssl = nullptr;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void AcceptLoop();
  void Serve(Conn* c);
  // The connection's role (kClient or kServer) once authenticated.
  Result<Role> Authenticate(int fd);
  Result<Role> AuthenticateTls(Conn* c);
  void Reap(bool all);

  const std::string address_;
  const DataChannelAuth auth_;
  DataHandler* handler_;
  const uint32_t frame_timeout_ms_;
  const size_t max_connections_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};  // readable once stopping: wakes every poll
  std::thread acceptor_;
  mutable std::mutex mu_;  // guards conns_
  std::list<std::unique_ptr<Conn>> conns_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace clf::transport
