// The Beast server (service/runtime/serve/http_server.h) on a loopback socket: keep-alive, the
// body and header limits, replies from another thread, and a graceful stop() that lets a request
// in flight finish before run() returns.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "service/runtime/serve/http_server.h"

using namespace kiln;
using namespace kiln::serve;
using namespace std::chrono_literals;

namespace {

// A blocking loopback client that reads one response at a time (Content-Length framed).
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }

  void send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  // The next response (head and body), or "" when the connection closed first.
  std::string response() {
    for (;;) {
      const size_t head_end = buffer_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t cl = buffer_.find("Content-Length: ");
        const size_t length = cl < head_end ? std::stoul(buffer_.substr(cl + 16)) : 0;
        if (buffer_.size() >= head_end + 4 + length) {
          std::string r = buffer_.substr(0, head_end + 4 + length);
          buffer_.erase(0, r.size());
          return r;
        }
      }
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Everything up to and including `marker` (for chunked responses), or "" when closed first.
  std::string until(const std::string& marker) {
    for (;;) {
      const size_t at = buffer_.find(marker);
      if (at != std::string::npos) {
        std::string r = buffer_.substr(0, at + marker.size());
        buffer_.erase(0, r.size());
        return r;
      }
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  bool closed_by_peer() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

std::string get(const std::string& target) { return "GET " + target + " HTTP/1.1\r\nHost: t\r\n\r\n"; }

}  // namespace

TEST_CASE("http server: keep-alive, limits, deferred replies and a graceful stop", "[serve]") {
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.max_body_bytes = 100;
  options.max_header_bytes = 1024;
  std::mutex repliers_mu;
  std::vector<std::thread> repliers;
  auto server = HttpServer::create(options, [&](const HttpRequest& req, ReplyFn reply) {
    if (req.target == "/slow") {  // replies later from another thread, like the batcher
      std::lock_guard lock(repliers_mu);
      repliers.emplace_back([reply] {
        std::this_thread::sleep_for(300ms);
        reply({200, "{\"slow\":true}", {}});
      });
      return;
    }
    reply({req.target == "/missing" ? 404 : 200, "{\"echo\":\"" + req.method + " " + req.target + " " + req.body + "\"}",
           {{"X-Test", "1"}}});
  });
  REQUIRE(server);
  HttpServer& srv = **server;
  const uint16_t port = srv.port();
  REQUIRE(port != 0);
  std::thread io([&srv] { srv.run(2); });

  {
    Client c(port);
    REQUIRE(c.connected());
    c.send(get("/a"));
    const std::string first = c.response();
    CHECK_THAT(first, Catch::StartsWith("HTTP/1.1 200 OK"));
    CHECK_THAT(first, Catch::Contains("X-Test: 1"));
    CHECK_THAT(first, Catch::Contains("Content-Type: application/json"));
    CHECK_THAT(first, Catch::EndsWith("{\"echo\":\"GET /a \"}"));
    c.send("POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");  // same connection
    CHECK_THAT(c.response(), Catch::EndsWith("{\"echo\":\"POST /b hi\"}"));
    c.send(get("/missing"));
    CHECK_THAT(c.response(), Catch::StartsWith("HTTP/1.1 404 Not Found"));
  }
  {
    Client c(port);
    c.send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
    const std::string r = c.response();
    CHECK_THAT(r, Catch::StartsWith("HTTP/1.1 413"));
    CHECK_THAT(r, Catch::Contains("exceeds the limit of 100 bytes"));
    CHECK_THAT(r, Catch::Contains("Connection: close"));
  }
  {
    Client c(port);
    c.send("GET / HTTP/1.1\r\nX: " + std::string(2000, 'x') + "\r\n\r\n");
    CHECK_THAT(c.response(), Catch::StartsWith("HTTP/1.1 431"));
  }
  {
    Client idle(port);  // connected, sends nothing: closed by the stop
    Client busy(port);
    busy.send(get("/slow"));
    std::this_thread::sleep_for(100ms);  // the server has read it and waits for the reply
    srv.stop();
    const std::string r = busy.response();
    CHECK_THAT(r, Catch::StartsWith("HTTP/1.1 200 OK"));
    CHECK_THAT(r, Catch::Contains("Connection: close"));
    CHECK_THAT(r, Catch::EndsWith("{\"slow\":true}"));
    CHECK(idle.closed_by_peer());
  }
  io.join();  // run() returns once every connection is done
  for (std::thread& t : repliers) t.join();
  Client after(port);
  CHECK_FALSE(after.connected());
}

TEST_CASE("http server: request headers reach the handler, streamed responses are chunked and keep the connection", "[serve]") {
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.stream_poll = 10ms;
  auto server = HttpServer::create(options, [](const HttpRequest& req, ReplyFn reply) {
    if (req.target != "/events") return reply({200, "{\"h\":\"" + req.header("x-name") + "\"}", {}});
    auto polls = std::make_shared<int>(0);
    HttpResponse r{200, "", {{"Content-Type", "text/event-stream"}}, nullptr};
    r.stream = [polls]() -> StreamPoll {
      const int n = ++*polls;
      if (n % 2 == 0) return {"", false};  // nothing new this time
      return {"data: " + std::to_string(n) + "\n\n", n >= 5};
    };
    reply(std::move(r));
  });
  REQUIRE(server);
  HttpServer& srv = **server;
  std::thread io([&srv] { srv.run(1); });
  {
    Client c(srv.port());
    REQUIRE(c.connected());
    c.send("GET /h HTTP/1.1\r\nHost: t\r\nX-Name: kiln\r\n\r\n");
    CHECK_THAT(c.response(), Catch::EndsWith("{\"h\":\"kiln\"}"));
    c.send(get("/events"));
    const std::string r = c.until("\r\n0\r\n\r\n");
    CHECK_THAT(r, Catch::Contains("Transfer-Encoding: chunked"));
    CHECK_THAT(r, Catch::Contains("Content-Type: text/event-stream"));
    CHECK_THAT(r, Catch::Contains("data: 1\n\n"));
    CHECK_THAT(r, Catch::Contains("data: 3\n\n"));
    CHECK_THAT(r, Catch::Contains("data: 5\n\n"));
    c.send(get("/again"));  // the same connection after the stream ended
    CHECK_THAT(c.response(), Catch::StartsWith("HTTP/1.1 200 OK"));
  }
  srv.stop();
  io.join();
}

TEST_CASE("http server: bad addresses are errors, not crashes", "[serve]") {
  HttpServerOptions options;
  options.host = "not-an-ip";
  auto server = HttpServer::create(options, [](const HttpRequest&, ReplyFn reply) { reply({}); });
  REQUIRE_FALSE(server);
  CHECK_THAT(server.error().message, Catch::Contains("--host 'not-an-ip' is not an IP address"));
}
