// A small HTTP/1.1 server on Boost.Beast: one asynchronous session per connection (keep-alive,
// bounded header and body, a read timeout), a handler called per request, and a graceful stop:
// stop accepting, close idle connections, let busy ones finish their request, then return from
// run(). Beast and Asio stay inside http_server.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/core/status.h"
#include "service/runtime/serve/v2_router.h"

namespace kiln::serve {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8080;  // 0: an ephemeral port (see HttpServer::port)
  uint64_t max_body_bytes = uint64_t{64} << 20;  // larger bodies get 413 before they are read
  std::string body_limit_hint = "serve-model --max-body-mb";  // the option that raises it, for the 413 message
  uint32_t max_header_bytes = 16 * 1024;         // larger headers get 431
  std::chrono::seconds read_timeout{30};         // per request, and for idle keep-alive connections
  std::chrono::milliseconds stream_poll{250};    // how often a streamed response is asked for more
};

// Called on an I/O thread; must call `reply` exactly once, from any thread.
using HttpHandler = std::function<void(const HttpRequest& request, ReplyFn reply)>;

class HttpServer {
 public:
  // Binds and listens (errors name the address and why), but serves nothing until run().
  static Result<std::unique_ptr<HttpServer>> create(const HttpServerOptions& options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;  // the bound port

  // Stops gracefully on SIGINT or SIGTERM, calling `on_signal` first (on an I/O thread).
  void stop_on_signals(std::function<void(int signal)> on_signal);

  // Serves on `threads` I/O threads (the caller's among them) until stop() has taken effect and
  // every connection is closed.
  void run(int threads);

  // Graceful stop; callable from any thread, any number of times.
  void stop();

  // Runs a task on an I/O thread (never inline).
  void post(std::function<void()> task);

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serve
