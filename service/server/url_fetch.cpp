#include "service/server/url_fetch.h"

#include <curl/curl.h>
#include <sys/socket.h>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace kiln::server {
namespace {

struct Transfer {
  const UrlFetchOptions* options = nullptr;
  std::FILE* out = nullptr;
  uint64_t bytes = 0;
  bool over_cap = false;
  bool write_failed = false;
  std::string refused;  // set by the socket callback
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  t->bytes += n;
  if (t->bytes > t->options->max_bytes) {
    t->over_cap = true;
    return 0;  // aborts the transfer
  }
  if (std::fwrite(data, 1, n, t->out) != n) {
    t->write_failed = true;
    return 0;
  }
  return n;
}

// Called for every connection libcurl opens, with the address it is about to connect to.
curl_socket_t on_open_socket(void* user, curlsocktype purpose, curl_sockaddr* address) {
  auto* t = static_cast<Transfer*>(user);
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKET_BAD;
  const auto ip = ip_from_sockaddr(&address->addr);
  if (!ip) {
    t->refused = "not an IP connection";
    return CURL_SOCKET_BAD;
  }
  if (std::string why = address_refusal(*ip, t->options->allow); !why.empty()) {
    t->refused = why;
    return CURL_SOCKET_BAD;
  }
  return ::socket(address->family, address->socktype, address->protocol);
}

}  // namespace

Result<UrlParts> url_parts(const std::string& url) {
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), curl_url_cleanup);
  KILN_REQUIRE(u != nullptr, internal, "out of memory");
  // Not CURLU_NON_SUPPORT_SCHEME's opposite: an unknown scheme must parse so it can be named.
  const CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME);
  KILN_REQUIRE(rc == CURLUE_OK, invalid_argument, "model URL '", url.substr(0, 200), "' does not parse: ", curl_url_strerror(rc));
  UrlParts parts;
  char* part = nullptr;
  if (curl_url_get(u.get(), CURLUPART_SCHEME, &part, 0) == CURLUE_OK) parts.scheme = part;
  curl_free(part);
  part = nullptr;
  if (curl_url_get(u.get(), CURLUPART_HOST, &part, 0) == CURLUE_OK) parts.host = part;
  curl_free(part);
  for (char& c : parts.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (parts.host.size() >= 2 && parts.host.front() == '[') parts.host = parts.host.substr(1, parts.host.size() - 2);
  // A zone id ("fe80::1%eth0") is not part of the address.
  if (const size_t zone = parts.host.find('%'); zone != std::string::npos && parts.host.find(':') != std::string::npos)
    parts.host.resize(zone);
  return parts;
}

std::string url_refusal(const std::string& url, const std::vector<Cidr>& allow) {
  auto parts = url_parts(url);
  if (!parts) return parts.error().message;
  if (parts->scheme != "http" && parts->scheme != "https")
    return "model URL scheme '" + parts->scheme + "' is not allowed (only http and https)";
  if (parts->host.empty()) return "model URL '" + url.substr(0, 200) + "' has no host";
  if (auto ip = ip_parse(parts->host))
    if (std::string why = address_refusal(*ip, allow); !why.empty()) return "model URL: " + why;
  return "";
}

Status url_fetch(const std::string& url, const std::string& path, const UrlFetchOptions& options) {
  if (std::string why = url_refusal(url, options.allow); !why.empty()) return make_error(ErrorCode::invalid_argument, why);
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  KILN_REQUIRE(curl != nullptr, internal, "libcurl failed to start");
  std::unique_ptr<std::FILE, decltype(&std::fclose)> out(std::fopen(path.c_str(), "wb"), std::fclose);
  KILN_REQUIRE(out != nullptr, io, "cannot write '", path, "'");
  Transfer t;
  t.options = &options;
  t.out = out.get();
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, kMaxRedirects);
  curl_easy_setopt(c, CURLOPT_PROXY, "");  // a proxy would hide the address actually fetched from
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(options.time_limit.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_bytes));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &t);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "kiln-serve");
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(c);
  const bool closed = std::fclose(out.release()) == 0;
  auto failed = [&](Error e) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return Status(std::move(e));
  };
  const std::string cap = std::to_string(options.max_bytes >> 20) + " MiB (kiln serve --max-model-mb)";
  if (t.over_cap || rc == CURLE_FILESIZE_EXCEEDED)
    return failed(make_error(ErrorCode::limit_exceeded, "the model at ", url, " is larger than the limit of ", cap));
  if (t.write_failed || !closed) return failed(make_error(ErrorCode::io, "cannot write '", path, "'"));
  // A refused address only matters when no other address of the host connected (a name may
  // resolve to a refused ::1 and an allowed 127.0.0.1).
  if (rc != CURLE_OK && !t.refused.empty()) return failed(make_error(ErrorCode::invalid_argument, "model URL ", url, ": ", t.refused));
  if (rc != CURLE_OK)
    return failed(make_error(ErrorCode::io, "fetching ", url, ": ", error[0] ? error : curl_easy_strerror(rc)));
  return Status::ok();
}

}  // namespace kiln::server
