// Bearer API tokens and scopes (`kiln serve --auth tokens`). A token is
// "kiln_<id>_<secret>": the id (16 hex digits) is public and names the token's row and the owner
// of the jobs it submits; the secret is 256 random bits. The store keeps only the SHA-256 of
// the whole token and compares digests in constant time.
//
// Which scope an endpoint needs is decided here (auth_route_scope), so the routers below see an
// authenticated Caller and only decide ownership. Answers: 401 with WWW-Authenticate: Bearer for
// a missing, malformed, unknown or revoked token; 403 naming the scope for a valid token without it.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "kernels/core/status.h"
#include "service/jobs/job_store.h"
#include "service/runtime/serve/v2_router.h"

namespace kiln::server {

enum class Scope { submit, read, admin };
const char* scope_name(Scope scope);

enum class AuthMode { none, tokens };

// Who sent a request. In --auth none mode every request is the local user (all scopes, sees every job).
struct Caller {
  std::string id;  // the token's id; empty for the local user (and jobs' owner '' then)
  bool scope_submit = false, scope_read = false, scope_admin = false;
  bool local = false;

  static Caller local_user();
  bool has(Scope scope) const;
  // Admins and the local user see every owner's jobs; others only their own.
  bool sees_all() const { return local || scope_admin; }
  bool sees_owner(const std::string& owner) const { return sees_all() || owner == id; }
};

// "submit,read" → the canonical list (known scopes, no duplicates, in the order submit, read,
// admin); an error names the unknown scope.
Result<std::string> scopes_parse(const std::string& text);

struct NewToken {
  jobs::TokenRecord record;  // what the store keeps
  std::string token;         // shown once, never stored
};
// A fresh token with random id and secret (OpenSSL RAND_bytes).
Result<NewToken> token_new(const std::string& name, const std::string& scopes);

// The scope an endpoint needs; nullopt when it is public (/healthz, /readyz, and everything
// outside /v1/ and /metrics: the web form and its static files).
std::optional<Scope> auth_route_scope(const std::string& method, const std::string& path);

// The caller of `request`, or the 401/403 answer. In AuthMode::none, always the local user.
std::variant<Caller, serve::HttpResponse> auth_authenticate(jobs::JobStore& store, AuthMode mode,
                                                            const serve::HttpRequest& request);

}  // namespace kiln::server
