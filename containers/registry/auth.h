// Registry authentication (the distribution spec's token flow): a request answered 401 carries a
// WWW-Authenticate challenge. "Basic" means send the username and password on every request;
// "Bearer realm=…,service=…,scope=…" means get a token from the realm (with the username and
// password as Basic auth when there are any, anonymously otherwise) for the scopes the push
// needs, then send it as "Authorization: Bearer <token>".
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "containers/registry/http_client.h"
#include "kernels/core/status.h"

namespace kiln::registry {

struct Credentials {
  std::string username;
  std::string password;
  bool empty() const { return username.empty() && password.empty(); }
};

struct Challenge {
  std::string scheme;                         // lowercase: "basic", "bearer"
  std::map<std::string, std::string> params;  // names lowercase: realm, service, scope, error
};

// Parses one WWW-Authenticate value (several challenges may share it, separated by commas).
std::vector<Challenge> challenge_parse(std::string_view header);

// "Basic <base64(username:password)>"
std::string basic_authorization(const Credentials& credentials);

// "repository:team/model:pull,push"
std::string repository_scope(std::string_view repository, std::string_view actions);

// Fetches a bearer token from the challenge's realm for `scopes` (GET realm?service=…&scope=…).
// The error names the realm and what it answered.
Result<std::string> bearer_token_fetch(HttpClient& http, const Challenge& challenge, const std::vector<std::string>& scopes,
                                       const Credentials& credentials);

// Answers the 401 in `response` (to a request for `url`): the Authorization header to retry
// with, or an error that says why there is none (no credentials, unknown scheme, token refused).
Result<std::string> authorization_for(HttpClient& http, const HttpResponse& response, const std::string& url,
                                      const std::vector<std::string>& scopes, const Credentials& credentials);

}  // namespace kiln::registry
