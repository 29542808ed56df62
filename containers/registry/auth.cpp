#include "containers/registry/auth.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace kiln::registry {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

void skip_space(std::string_view s, size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

bool is_token_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos; }

}  // namespace

std::vector<Challenge> challenge_parse(std::string_view header) {
  // challenge = scheme [ param *( "," param ) ]; param = name "=" ( token / quoted-string ).
  // A token not followed by '=' starts the next challenge.
  std::vector<Challenge> challenges;
  size_t i = 0;
  while (i < header.size()) {
    skip_space(header, i);
    if (i < header.size() && header[i] == ',') { ++i; continue; }
    size_t start = i;
    while (i < header.size() && is_token_char(header[i])) ++i;
    if (i == start) break;  // malformed: keep what was parsed
    std::string word(header.substr(start, i - start));
    size_t after = i;
    skip_space(header, after);
    const bool is_param = after < header.size() && header[after] == '=' && !challenges.empty() &&
                          !(after + 1 < header.size() && header[after + 1] == '=');
    if (!is_param) {
      challenges.push_back(Challenge{lower(word), {}});
      continue;
    }
    i = after + 1;
    skip_space(header, i);
    std::string value;
    if (i < header.size() && header[i] == '"') {
      ++i;
      while (i < header.size() && header[i] != '"') {
        if (header[i] == '\\' && i + 1 < header.size()) ++i;
        value += header[i++];
      }
      if (i < header.size()) ++i;
    } else {
      while (i < header.size() && header[i] != ',' && header[i] != ' ') value += header[i++];
    }
    challenges.back().params[lower(word)] = value;
  }
  return challenges;
}

std::string basic_authorization(const Credentials& credentials) {
  const std::string plain = credentials.username + ":" + credentials.password;
  std::string encoded(4 * ((plain.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                reinterpret_cast<const unsigned char*>(plain.data()), static_cast<int>(plain.size()));
  encoded.resize(static_cast<size_t>(std::max(n, 0)));
  return "Basic " + encoded;
}

std::string repository_scope(std::string_view repository, std::string_view actions) {
  return "repository:" + std::string(repository) + ":" + std::string(actions);
}

Result<std::string> bearer_token_fetch(HttpClient& http, const Challenge& challenge, const std::vector<std::string>& scopes,
                                       const Credentials& credentials) {
  auto realm_it = challenge.params.find("realm");
  KILN_REQUIRE(realm_it != challenge.params.end() && !realm_it->second.empty(), parse,
               "the registry asked for a bearer token but named no realm (token server) in WWW-Authenticate");
  std::string url = realm_it->second;
  if (auto service = challenge.params.find("service"); service != challenge.params.end())
    url = url_query_append(url, "service", service->second);
  for (const auto& scope : scopes) url = url_query_append(url, "scope", scope);
  HttpRequest request{.method = "GET", .url = url};
  if (!credentials.empty()) request.headers.push_back("Authorization: " + basic_authorization(credentials));
  KILN_ASSIGN(response, http.send(request));
  if (response.status == 401 || response.status == 403)
    return make_error(ErrorCode::io, "token server ", realm_it->second, " refused ",
                      credentials.empty() ? "an anonymous request" : "the credentials of '" + credentials.username + "'",
                      ": ", http_status_describe(response),
                      credentials.empty() ? " (pass --username and --password-stdin, or set KILN_REGISTRY_USERNAME and "
                                            "KILN_REGISTRY_PASSWORD)"
                                          : "");
  KILN_REQUIRE(response.ok(), io, "token server ", realm_it->second, " answered ", http_status_describe(response));
  auto json = nlohmann::json::parse(response.body, nullptr, false);
  KILN_REQUIRE(json.is_object(), parse, "token server ", realm_it->second, " answered something that is not JSON");
  for (const char* key : {"token", "access_token"}) {
    if (json.contains(key) && json[key].is_string() && !json[key].get<std::string>().empty())
      return json[key].get<std::string>();
  }
  return make_error(ErrorCode::parse, "token server ", realm_it->second, " answered JSON without a token");
}

Result<std::string> authorization_for(HttpClient& http, const HttpResponse& response, const std::string& url,
                                      const std::vector<std::string>& scopes, const Credentials& credentials) {
  const auto challenges = challenge_parse(response.header("www-authenticate"));
  for (const auto& c : challenges) {
    if (c.scheme == "bearer") {
      std::vector<std::string> wanted = scopes;
      if (auto scope = c.params.find("scope"); scope != c.params.end() &&
                                               std::find(wanted.begin(), wanted.end(), scope->second) == wanted.end())
        wanted.push_back(scope->second);
      KILN_ASSIGN(token, bearer_token_fetch(http, c, wanted, credentials));
      return "Bearer " + token;
    }
  }
  for (const auto& c : challenges) {
    if (c.scheme == "basic") {
      KILN_REQUIRE(!credentials.empty(), io, url, " answered ", http_status_describe(response),
                   ": the registry needs a username and password (pass --username and --password-stdin, or set "
                   "KILN_REGISTRY_USERNAME and KILN_REGISTRY_PASSWORD)");
      return basic_authorization(credentials);
    }
  }
  return make_error(ErrorCode::unsupported, url, " answered ", http_status_describe(response),
                    challenges.empty() ? std::string(" with no WWW-Authenticate challenge")
                                       : " with an authentication scheme kiln does not speak ('" + challenges[0].scheme + "')");
}

}  // namespace kiln::registry
