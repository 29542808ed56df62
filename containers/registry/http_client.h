// A small libcurl wrapper for the registry protocol: one request at a time, TLS verification on
// unless the caller turns it off, bounded response bodies, and retries with exponential backoff
// on connection errors, 429 and 5xx (requests marked retryable only: a blob PUT is retried by
// restarting its upload, see push.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/status.h"

namespace kiln::registry {

struct TlsOptions {
  bool verify = true;   // false: accept any certificate (--insecure); never the default
  std::string ca_file;  // extra CA bundle; "" for the system store
};

struct RetryPolicy {
  int retries = 3;                             // attempts after the first
  std::chrono::milliseconds backoff{500};      // doubled after each attempt
  std::chrono::milliseconds max_backoff{8000};
};

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, POST, PUT
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent when body_file is empty
  std::string body_file;             // streamed from this file (blob uploads)
  uint64_t body_file_size = 0;
  bool retry = true;  // retry on connection errors, 429 and 5xx
};

struct HttpResponse {
  long status = 0;
  std::multimap<std::string, std::string> headers;  // names in lowercase
  std::string body;                                 // at most kMaxResponseBody bytes
  int attempts = 1;

  std::string header(std::string_view lowercase_name) const;  // first value or ""
  std::vector<std::string> headers_named(std::string_view lowercase_name) const;
  bool ok() const { return status >= 200 && status < 300; }
};

inline constexpr size_t kMaxResponseBody = 4u << 20;  // registry answers are small JSON documents

class HttpClient {
 public:
  HttpClient(TlsOptions tls, RetryPolicy retry);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request`; an HTTP error status is a response, not an error. Errors are transport
  // failures (after the retries): "cannot reach URL: <curl's reason> (after N attempts)".
  Result<HttpResponse> send(const HttpRequest& request);

  const RetryPolicy& retry_policy() const { return retry_; }
  void sleep_backoff(int attempt) const;  // attempt 0, 1, …: backoff · 2^attempt, capped

 private:
  Result<HttpResponse> send_once(const HttpRequest& request, bool& transport_retryable);

  TlsOptions tls_;
  RetryPolicy retry_;
  void* curl_ = nullptr;  // CURL*, reused so connections are kept alive
};

bool http_status_retryable(long status);  // 429 and 5xx

// Resolves a Location header against the URL of the request that returned it: absolute URLs
// stay, relative ones ("/v2/…?_state=…") take the request's scheme and host; the query string is
// kept either way.
Result<std::string> url_resolve(const std::string& base, const std::string& location);

// Appends key=value (value percent-encoded) with '&' when the URL has a query, else '?'.
std::string url_query_append(const std::string& url, std::string_view key, std::string_view value);

std::string url_encode(std::string_view text);

// "401 Unauthorized: UNAUTHORIZED: authentication required" — the status and what the registry
// said (the OCI error list when the body is one, else the start of the body).
std::string http_status_describe(const HttpResponse& response);

}  // namespace kiln::registry
