#include "containers/registry/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

namespace kiln::registry {
namespace {

struct CurlSlist {
  curl_slist* list = nullptr;
  ~CurlSlist() { curl_slist_free_all(list); }
};

struct BodyReader {
  std::FILE* file = nullptr;
  const std::string* text = nullptr;
  size_t offset = 0;
};

size_t read_body(char* dst, size_t size, size_t count, void* user) {
  auto* reader = static_cast<BodyReader*>(user);
  const size_t want = size * count;
  if (reader->file) {
    const size_t got = std::fread(dst, 1, want, reader->file);
    if (got == 0 && std::ferror(reader->file)) return CURL_READFUNC_ABORT;
    return got;
  }
  const size_t n = std::min(want, reader->text->size() - reader->offset);
  std::copy_n(reader->text->data() + reader->offset, n, dst);
  reader->offset += n;
  return n;
}

size_t write_body(char* src, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  const size_t n = size * count;
  if (body->size() + n > kMaxResponseBody) return 0;  // makes curl fail with CURLE_WRITE_ERROR
  body->append(src, n);
  return n;
}

size_t write_header(char* src, size_t size, size_t count, void* user) {
  auto* response = static_cast<HttpResponse*>(user);
  const size_t n = size * count;
  std::string_view line(src, n);
  // A new status line (after a redirect or a 100 Continue) starts a new header set.
  if (line.starts_with("HTTP/")) {
    response->headers.clear();
    return n;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
  response->headers.emplace(std::move(name), std::string(value));
  return n;
}

bool curl_code_retryable(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

void curl_global_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string HttpResponse::header(std::string_view lowercase_name) const {
  auto it = headers.find(std::string(lowercase_name));
  return it == headers.end() ? std::string() : it->second;
}

std::vector<std::string> HttpResponse::headers_named(std::string_view lowercase_name) const {
  std::vector<std::string> values;
  auto [first, last] = headers.equal_range(std::string(lowercase_name));
  for (auto it = first; it != last; ++it) values.push_back(it->second);
  return values;
}

bool http_status_retryable(long status) { return status == 429 || status >= 500; }

HttpClient::HttpClient(TlsOptions tls, RetryPolicy retry) : tls_(std::move(tls)), retry_(retry) {
  curl_global_once();
  curl_ = curl_easy_init();
}

HttpClient::~HttpClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

void HttpClient::sleep_backoff(int attempt) const {
  auto delay = retry_.backoff;
  for (int i = 0; i < attempt && delay < retry_.max_backoff; ++i) delay *= 2;
  std::this_thread::sleep_for(std::min(delay, retry_.max_backoff));
}

Result<HttpResponse> HttpClient::send(const HttpRequest& request) {
  const int max_attempts = request.retry ? 1 + std::max(0, retry_.retries) : 1;
  for (int attempt = 0;; ++attempt) {
    bool transport_retryable = false;
    auto response = send_once(request, transport_retryable);
    const bool last = attempt + 1 >= max_attempts;
    if (response) {
      response->attempts = attempt + 1;
      if (last || !http_status_retryable(response->status)) return response;
    } else if (last || !transport_retryable) {
      if (attempt > 0) return make_error(ErrorCode::io, response.error().message, " (after ", attempt + 1, " attempts)");
      return response;
    }
    sleep_backoff(attempt);
  }
}

Result<HttpResponse> HttpClient::send_once(const HttpRequest& request, bool& transport_retryable) {
  KILN_REQUIRE(curl_ != nullptr, internal, "libcurl could not be initialized");
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);

  HttpResponse response;
  BodyReader reader;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(nullptr, &std::fclose);
  if (!request.body_file.empty()) {
    file.reset(std::fopen(request.body_file.c_str(), "rb"));
    KILN_REQUIRE(file != nullptr, io, "cannot open '", request.body_file, "' to upload it");
    reader.file = file.get();
  } else {
    reader.text = &request.body;
  }
  CurlSlist headers;
  for (const auto& h : request.headers) headers.list = curl_slist_append(headers.list, h.c_str());
  // No "Expect: 100-continue" round trip: registries answer auth failures before the body anyway.
  headers.list = curl_slist_append(headers.list, "Expect:");

  char error_buffer[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "kiln-push");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
  // A stalled transfer (under 1 byte/s for 60 s) fails instead of hanging forever.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, tls_.verify ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, tls_.verify ? 2L : 0L);
  if (!tls_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, tls_.ca_file.c_str());
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, write_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);

  const uint64_t body_size = reader.file ? request.body_file_size : request.body.size();
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);  // blob HEADs may redirect to storage
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
  } else if (request.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(curl, CURLOPT_READDATA, &reader);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body_size));
  } else if (request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(curl, CURLOPT_READDATA, &reader);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body_size));
  } else {
    return make_error(ErrorCode::internal, "unsupported HTTP method ", request.method);
  }

  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) {
    transport_retryable = curl_code_retryable(code);
    if (code == CURLE_WRITE_ERROR && response.body.size() + 1 > kMaxResponseBody)
      return make_error(ErrorCode::io, request.method, " ", request.url, ": answer larger than ", kMaxResponseBody,
                        " bytes");
    const std::string reason = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
    if (code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE || code == CURLE_SSL_CONNECT_ERROR)
      return make_error(ErrorCode::io, "TLS failed for ", request.url, ": ", reason,
                        " (pass --ca-cert FILE for a private CA, or --insecure to skip verification)");
    if (code == CURLE_READ_ERROR || code == CURLE_ABORTED_BY_CALLBACK)
      return make_error(ErrorCode::io, "cannot read '", request.body_file, "' while uploading it");
    return make_error(ErrorCode::io, "cannot reach ", request.url, ": ", reason);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

Result<std::string> url_resolve(const std::string& base, const std::string& location) {
  curl_global_once();
  std::unique_ptr<CURLU, void (*)(CURLU*)> url(curl_url(), &curl_url_cleanup);
  KILN_REQUIRE(url != nullptr, internal, "libcurl could not allocate a URL");
  KILN_REQUIRE(curl_url_set(url.get(), CURLUPART_URL, base.c_str(), 0) == CURLUE_OK, invalid_argument, "'", base,
               "' is not a URL");
  // With a base set, libcurl resolves a relative URL against it (RFC 3986), query included.
  KILN_REQUIRE(curl_url_set(url.get(), CURLUPART_URL, location.c_str(), 0) == CURLUE_OK, parse,
               "the registry sent a Location header that is not a URL: '", location, "'");
  char* text = nullptr;
  KILN_REQUIRE(curl_url_get(url.get(), CURLUPART_URL, &text, 0) == CURLUE_OK, parse, "cannot resolve Location '",
               location, "' against ", base);
  std::string resolved(text);
  curl_free(text);
  return resolved;
}

std::string url_encode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string url_query_append(const std::string& url, std::string_view key, std::string_view value) {
  const auto hash = url.find('#');
  std::string head = url.substr(0, hash);
  const char sep = head.find('?') == std::string::npos ? '?' : (head.back() == '?' || head.back() == '&' ? '\0' : '&');
  if (sep) head += sep;
  head += url_encode(key);
  head += '=';
  head += url_encode(value);
  return head;
}

std::string http_status_describe(const HttpResponse& response) {
  std::string text = std::to_string(response.status);
  if (const char* reason = [&]() -> const char* {
        switch (response.status) {
          case 400: return "Bad Request";
          case 401: return "Unauthorized";
          case 403: return "Forbidden";
          case 404: return "Not Found";
          case 405: return "Method Not Allowed";
          case 409: return "Conflict";
          case 413: return "Payload Too Large";
          case 416: return "Range Not Satisfiable";
          case 429: return "Too Many Requests";
          case 500: return "Internal Server Error";
          case 502: return "Bad Gateway";
          case 503: return "Service Unavailable";
          case 504: return "Gateway Timeout";
          default: return nullptr;
        }
      }())
    text += std::string(" ") + reason;
  std::string said;
  auto json = nlohmann::json::parse(response.body, nullptr, false);
  if (json.is_object() && json.contains("errors") && json["errors"].is_array()) {
    for (const auto& e : json["errors"]) {
      if (!e.is_object()) continue;
      if (!said.empty()) said += "; ";
      said += e.value("code", std::string("?"));
      const std::string message = e.value("message", std::string());
      if (!message.empty()) said += ": " + message;
      if (e.contains("detail") && !e["detail"].is_null()) said += " (" + e["detail"].dump() + ")";
    }
  } else {
    std::string body = response.body.substr(0, 200);
    std::replace(body.begin(), body.end(), '\n', ' ');
    while (!body.empty() && body.back() == ' ') body.pop_back();
    said = body;
  }
  if (!said.empty()) text += ": registry said: " + said;
  if (response.attempts > 1) text += " (after " + std::to_string(response.attempts) + " attempts)";
  return text;
}

}  // namespace kiln::registry
