// Fetches a model by URL for a job (the `fetch` stage): http and https only (redirects too, at
// most kMaxRedirects), a size cap that stops the transfer as soon as it is exceeded, a time
// limit, no proxy, and every address libcurl actually connects to (after DNS, on every redirect)
// checked against address_policy — so a name that resolves to a private address, or one that
// changes its answer between a check and the connection (DNS rebinding), is refused.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "service/server/address_policy.h"

namespace kiln::server {

inline constexpr long kMaxRedirects = 5;

struct UrlParts {
  std::string scheme;  // lower-case
  std::string host;    // without brackets
};
// Splits a URL with libcurl's parser; the error says what is wrong with it.
Result<UrlParts> url_parts(const std::string& url);

// Empty when the URL may be fetched as far as can be told without DNS: its scheme is http or
// https and, when its host is an IP literal, address_refusal allows it. Else why not.
std::string url_refusal(const std::string& url, const std::vector<Cidr>& allow);

struct UrlFetchOptions {
  uint64_t max_bytes = uint64_t{1} << 30;
  std::chrono::seconds time_limit{600};
  std::vector<Cidr> allow;
};

// Downloads `url` to `path` (removed again on failure). Errors: limit_exceeded names the cap;
// invalid_argument a refused scheme or address; io the transfer's failure or HTTP status.
Status url_fetch(const std::string& url, const std::string& path, const UrlFetchOptions& options);

}  // namespace kiln::server
