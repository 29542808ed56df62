#include "service/runtime/serve/http_server.h"

#include <atomic>
#include <cctype>
#include <csignal>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "service/runtime/serve/v2_protocol.h"

namespace kiln::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// How long a rejected connection (413, 431, 400) is drained before it closes: closing a socket
// with unread bytes sends a reset, which can destroy the error response before the client reads it.
constexpr std::chrono::seconds kDrainTimeout{5};

class Session;

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::signal_set signals{ioc};
  net::steady_timer accept_retry{ioc};
  std::function<void(int)> on_signal;
  std::atomic<bool> stopping{false};
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<Session>> sessions;

  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  void do_stop();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {}

  void start() { net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::do_read, shared_from_this())); }

  // From the server's stop: idle connections close now, a busy one after its response.
  void shutdown() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      if (!self->busy_) {
        beast::error_code ec;
        self->stream_.socket().cancel(ec);
      }
    });
  }

 private:
  void do_read() {
    if (closing_ || server_.stopping.load()) return do_close();
    parser_.emplace();
    parser_->body_limit(server_.options.max_body_bytes);
    parser_->header_limit(server_.options.max_header_bytes);
    stream_.expires_after(server_.options.read_timeout);
    http::async_read_header(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // Clients that ask (curl does for large bodies) are told to send the body only once the header
  // has passed its checks; a body over the limit has already failed above.
  void on_header(beast::error_code ec, size_t) {
    if (ec) return on_read(ec, 0);
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code write_ec, size_t) {
        if (write_ec) return self->do_close();
        self->read_body();
      });
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, size_t) {
    if (ec == http::error::body_limit)
      return reject(413, "the request body exceeds the limit of " + std::to_string(server_.options.max_body_bytes) +
                             " bytes (" + server_.options.body_limit_hint + ")");
    if (ec == http::error::header_limit)
      return reject(431, "the request header exceeds the limit of " + std::to_string(server_.options.max_header_bytes) + " bytes");
    const bool malformed = ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
                           ec != http::error::end_of_stream && ec != http::error::partial_message;
    if (malformed)
      return reject(400, "malformed HTTP request: " + ec.message());
    if (ec) return do_close();  // end of stream, timeout, reset, cancelled by stop
    busy_ = true;
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    HttpRequest request{std::string(req.method_string()), std::string(req.target()), std::move(req.body()), {}};
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    stream_.expires_never();  // inference may wait in the batcher's queue; the write sets its own deadline
    auto guard = std::make_shared<net::executor_work_guard<net::io_context::executor_type>>(server_.ioc.get_executor());
    auto replied = std::make_shared<std::atomic<bool>>(false);
    auto self = shared_from_this();
    auto reply = [self, guard, replied](HttpResponse response) {
      if (replied->exchange(true)) return;
      net::post(self->stream_.get_executor(),
                [self, response = std::move(response)]() mutable { self->write(std::move(response), false); });
    };
    try {
      server_.handler(request, reply);
    } catch (const std::exception& e) {  // out of memory while parsing: answer, keep serving
      reply({500, v2_error_write(std::string("internal error: ") + e.what()), {}});
    }
  }

  void write(HttpResponse response, bool close) {
    if (response.stream && !close) return write_stream(std::move(response));
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), version_);
    res->set(http::field::server, "kiln-runtime");
    res->set(http::field::content_type, "application/json");
    for (const auto& [name, value] : response.headers) res->set(name, value);
    res->body() = std::move(response.body);
    res->keep_alive(keep_alive_ && !close && !closing_ && !server_.stopping.load());
    res->prepare_payload();
    stream_.expires_after(server_.options.read_timeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res, close](beast::error_code ec, size_t) {
      self->busy_ = false;
      if (ec) return self->do_close();
      if (close) return self->do_drain();
      if (res->need_eof()) return self->do_close();
      self->do_read();
    });
  }

  // A chunked response fed by polling response.stream on this session's strand; a server stop
  // ends it (the last chunk goes out, then the connection closes).
  void write_stream(HttpResponse response) {
    auto res = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(response.status), version_);
    res->set(http::field::server, "kiln-runtime");
    res->set(http::field::content_type, "application/json");
    for (const auto& [name, value] : response.headers) res->set(name, value);
    res->chunked(true);
    res->keep_alive(keep_alive_ && !closing_ && !server_.stopping.load());
    keep_alive_ = res->keep_alive();
    stream_fn_ = std::move(response.stream);
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    stream_.expires_after(server_.options.read_timeout);
    http::async_write_header(stream_, *sr, [self = shared_from_this(), res, sr](beast::error_code ec, size_t) {
      if (ec) return self->stream_end(true);
      self->stream_next();
    });
  }

  void stream_next() {
    StreamPoll poll;
    if (closing_ || server_.stopping.load()) poll.done = true;
    else poll = stream_fn_();
    if (poll.data.empty() && !poll.done) {
      stream_timer_.expires_after(server_.options.stream_poll);
      stream_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec) return self->stream_end(true);
        self->stream_next();
      });
      return;
    }
    auto data = std::make_shared<std::string>(std::move(poll.data));
    const bool done = poll.done;
    stream_.expires_after(server_.options.read_timeout);
    if (data->empty()) return stream_last();
    net::async_write(stream_, http::make_chunk(net::buffer(*data)), [self = shared_from_this(), data, done](beast::error_code ec, size_t) {
      if (ec) return self->stream_end(true);
      if (done) return self->stream_last();
      self->stream_next();
    });
  }

  void stream_last() {
    net::async_write(stream_, http::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->stream_end(ec || !self->keep_alive_);
    });
  }

  void stream_end(bool close) {
    stream_fn_ = nullptr;
    busy_ = false;
    if (close) return do_close();
    do_read();
  }

  // Answers a request that cannot be read (too large, malformed) and closes the connection.
  void reject(int status, const std::string& message) {
    busy_ = true;
    keep_alive_ = false;
    write({status, v2_error_write(message), {}}, true);
  }

  // Half-closes, then reads and discards what the client still sends until it closes too.
  void do_drain() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return do_close();
    stream_.expires_after(kDrainTimeout);
    drain_next();
  }
  void drain_next() {
    drain_.resize(64 * 1024);
    stream_.async_read_some(net::buffer(drain_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->do_close();
      self->drain_next();
    });
  }

  void do_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::vector<char> drain_;
  StreamFn stream_fn_;
  net::steady_timer stream_timer_{stream_.get_executor()};
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool busy_ = false;     // a request is being answered
  bool closing_ = false;  // the server stops: close after the current response
};

}  // namespace

void HttpServer::Impl::do_accept() {
  acceptor.async_accept(net::make_strand(ioc), beast::bind_front_handler(&Impl::on_accept, this));
}

void HttpServer::Impl::on_accept(beast::error_code ec, tcp::socket socket) {
  if (stopping.load() || !acceptor.is_open()) return;
  if (ec) {  // e.g. out of file descriptors: retry shortly instead of spinning
    accept_retry.expires_after(std::chrono::milliseconds(50));
    accept_retry.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && !stopping.load()) do_accept();
    });
    return;
  }
  beast::error_code opt_ec;
  socket.set_option(tcp::no_delay(true), opt_ec);  // small JSON responses: no Nagle delay
  auto session = std::make_shared<Session>(std::move(socket), *this);
  {
    std::lock_guard lock(sessions_mu);
    std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
    sessions.push_back(session);
  }
  session->start();
  do_accept();
}

void HttpServer::Impl::do_stop() {
  stopping.store(true);
  beast::error_code ec;
  acceptor.close(ec);
  signals.cancel(ec);
  accept_retry.cancel();
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(sessions_mu);
    for (const auto& weak : sessions)
      if (auto s = weak.lock()) live.push_back(std::move(s));
    sessions.clear();
  }
  for (const auto& s : live) s->shutdown();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

Result<std::unique_ptr<HttpServer>> HttpServer::create(const HttpServerOptions& options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  KILN_REQUIRE(!ec, invalid_argument, "--host '", options.host, "' is not an IP address (", ec.message(), ")");
  const tcp::endpoint endpoint(address, options.port);
  const std::string where = options.host + ":" + std::to_string(options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  KILN_REQUIRE(!ec, io, "cannot open a socket for ", where, ": ", ec.message());
  impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  KILN_REQUIRE(!ec, io, "cannot set SO_REUSEADDR on ", where, ": ", ec.message());
  impl->acceptor.bind(endpoint, ec);
  KILN_REQUIRE(!ec, io, "cannot bind ", where, ": ", ec.message());
  impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  KILN_REQUIRE(!ec, io, "cannot listen on ", where, ": ", ec.message());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::stop_on_signals(std::function<void(int)> on_signal) {
  Impl& s = *impl_;
  s.on_signal = std::move(on_signal);
  s.signals.add(SIGINT);
  s.signals.add(SIGTERM);
  s.signals.async_wait([&s](beast::error_code ec, int signal) {
    if (ec) return;
    if (s.on_signal) s.on_signal(signal);
    s.do_stop();
  });
}

void HttpServer::run(int threads) {
  impl_->do_accept();
  auto loop = [this] {
    for (;;) {
      try {
        impl_->ioc.run();
        return;
      } catch (const std::exception& e) {  // a handler threw (out of memory): log and keep serving
        std::cerr << "kiln-runtime: error: HTTP I/O: " << e.what() << '\n';
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(loop);
  loop();
  for (std::thread& t : pool) t.join();
}

void HttpServer::stop() {
  net::post(impl_->ioc, [impl = impl_.get()] { impl->do_stop(); });
}

void HttpServer::post(std::function<void()> task) { net::post(impl_->ioc, std::move(task)); }

}  // namespace kiln::serve
