// The KServe v2 endpoints as a function from request to response, testable without sockets:
//   GET  /v2/health/live, /v2/health/ready, /v2                       server health and metadata
//   GET  /v2/models/{name}, /v2/models/{name}/ready                   model metadata, readiness
//   POST /v2/models/{name}/infer                                      inference (through the batcher)
//   GET  /v2/models/{name}/stats                                      Triton statistics subset
// /v2/models/{name}/versions/1/... is the same model (a plan has one version).
// Every error is {"error": "..."}; errors map to HTTP status here and nowhere else.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "service/runtime/serve/batcher.h"
#include "service/runtime/serve/model_signature.h"

namespace kiln::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and optional query
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case, in arrival order

  // The first header named `name` (lower-case); empty when absent.
  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return v;
    return {};
  }
};

// One poll of a streamed response: bytes to send now (may be empty) and whether it has ended.
struct StreamPoll {
  std::string data;
  bool done = false;
};
// Called on an I/O thread, never concurrently, every HttpServerOptions::stream_poll until it
// returns done (or the server stops, or the client goes away); must not block.
using StreamFn = std::function<StreamPoll()>;

struct HttpResponse {
  int status = 200;
  std::string body;  // JSON
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type: application/json
  StreamFn stream;  // when set, the body is sent chunked from it instead (server-sent events)
};

struct ServedModel {
  std::string name;
  ModelSignature signature;
  Batcher* batcher = nullptr;
};

// Runs a task somewhere other than the batcher's worker (the I/O threads), so that writing large
// responses never delays the next engine run. Tests pass one that runs the task at once.
using PostFn = std::function<void(std::function<void()>)>;
using ReplyFn = std::function<void(HttpResponse)>;

class V2Router {
 public:
  V2Router(ServedModel model, std::string server_version, PostFn post);

  // Calls `reply` exactly once: at once, or for inference later from a task given to `post`.
  void handle(const HttpRequest& request, ReplyFn reply) const;

  // While draining before exit /v2/health/ready and the model's /ready answer 503.
  void set_ready(bool ready) { ready_.store(ready); }

 private:
  void infer(const HttpRequest& request, ReplyFn reply) const;

  ServedModel model_;
  std::string server_version_;
  PostFn post_;
  std::atomic<bool> ready_{true};
};

}  // namespace kiln::serve
