#include "service/server/auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <array>
#include <vector>

#include "service/server/api_error.h"

namespace kiln::server {
namespace {

constexpr const char* kTokenPrefix = "kiln_";
constexpr size_t kIdHexDigits = 16;
constexpr size_t kSecretHexDigits = 64;  // 256 bits

std::string hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

// Tokens are 256-bit random secrets, not passwords: nothing can be guessed from a fast hash of
// one, so a plain SHA-256 is enough and a slow KDF (bcrypt, argon2) would only cost every request.
std::array<unsigned char, SHA256_DIGEST_LENGTH> token_digest(const std::string& token) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> d{};
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), d.data());
  return d;
}

bool is_lower_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The id inside a well-formed token; empty when malformed.
std::string token_id_of(const std::string& token) {
  const size_t prefix = std::char_traits<char>::length(kTokenPrefix);
  if (token.size() != prefix + kIdHexDigits + 1 + kSecretHexDigits || token.compare(0, prefix, kTokenPrefix) != 0 ||
      token[prefix + kIdHexDigits] != '_')
    return "";
  const std::string id = token.substr(prefix, kIdHexDigits);
  if (!is_lower_hex(id) || !is_lower_hex(std::string_view(token).substr(prefix + kIdHexDigits + 1))) return "";
  return id;
}

serve::HttpResponse unauthorized(const std::string& why) {
  serve::HttpResponse r = api_error(401, "unauthorized", why + " (send Authorization: Bearer <token from `kiln token create`>)");
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kiln\", error=\"invalid_token\"");
  return r;
}

}  // namespace

const char* scope_name(Scope scope) {
  switch (scope) {
    case Scope::submit: return "submit";
    case Scope::read: return "read";
    case Scope::admin: return "admin";
  }
  return "?";
}

Caller Caller::local_user() {
  Caller c;
  c.scope_submit = c.scope_read = c.scope_admin = true;
  c.local = true;
  return c;
}

bool Caller::has(Scope scope) const {
  switch (scope) {
    case Scope::submit: return scope_submit;
    case Scope::read: return scope_read;
    case Scope::admin: return scope_admin;
  }
  return false;
}

Result<std::string> scopes_parse(const std::string& text) {
  bool want[3] = {false, false, false};
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool known = false;
    for (Scope s : {Scope::submit, Scope::read, Scope::admin})
      if (item == scope_name(s)) want[static_cast<int>(s)] = known = true;
    KILN_REQUIRE(known, invalid_argument, "unknown scope '", item, "' (expected submit, read or admin, comma-separated)");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::string out;
  for (Scope s : {Scope::submit, Scope::read, Scope::admin})
    if (want[static_cast<int>(s)]) {
      if (!out.empty()) out += ',';
      out += scope_name(s);
    }
  return out;
}

Result<NewToken> token_new(const std::string& name, const std::string& scopes) {
  KILN_ASSIGN(canonical, scopes_parse(scopes));
  unsigned char id[kIdHexDigits / 2], secret[kSecretHexDigits / 2];
  KILN_REQUIRE(RAND_bytes(id, sizeof id) == 1 && RAND_bytes(secret, sizeof secret) == 1, internal,
               "the system's random generator failed");
  NewToken t;
  t.record.id = hex(id, sizeof id);
  t.token = kTokenPrefix + t.record.id + "_" + hex(secret, sizeof secret);
  const auto digest = token_digest(t.token);
  t.record.sha256 = hex(digest.data(), digest.size());
  t.record.name = name;
  t.record.scopes = canonical;
  return t;
}

std::optional<Scope> auth_route_scope(const std::string& method, const std::string& path) {
  if (path == "/metrics") return Scope::admin;
  if (path.rfind("/v1/", 0) != 0) return std::nullopt;  // /healthz, /readyz, the web form
  if (path == "/v1/benchmarks") return Scope::admin;
  if (path == "/v1/plan") return Scope::submit;  // it keeps the uploaded model
  if (path.rfind("/v1/targets", 0) == 0) return method == "GET" || method == "HEAD" ? Scope::read : Scope::admin;
  if (path.rfind("/v1/jobs", 0) == 0) return method == "POST" || method == "DELETE" ? Scope::submit : Scope::read;
  return Scope::read;
}

std::variant<Caller, serve::HttpResponse> auth_authenticate(jobs::JobStore& store, AuthMode mode,
                                                            const serve::HttpRequest& request) {
  if (mode == AuthMode::none) return Caller::local_user();
  const std::string path = request.target.substr(0, request.target.find('?'));
  const std::optional<Scope> needed = auth_route_scope(request.method, path);
  if (!needed) return Caller{};
  const std::string header = request.header("authorization");
  if (header.empty()) return unauthorized("missing token");
  if (header.size() < 7 || !std::equal(header.begin(), header.begin() + 7, "bearer ", [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == b;
      }))
    return unauthorized("the Authorization header is not 'Bearer <token>'");
  const std::string token = header.substr(7);
  const std::string id = token_id_of(token);
  if (id.empty()) return unauthorized("malformed token (expected kiln_<16 hex>_<64 hex>)");
  auto record = store.token_get(id);
  if (!record) return api_error(500, "internal", record.error().message);
  // One digest comparison whatever the outcome, in constant time, so timing says nothing about
  // the stored digest.
  const auto digest = token_digest(token);
  const std::string stored = record->has_value() ? (*record)->sha256 : std::string(2 * SHA256_DIGEST_LENGTH, '0');
  const std::string given = hex(digest.data(), digest.size());
  const bool match = stored.size() == given.size() && CRYPTO_memcmp(stored.data(), given.data(), given.size()) == 0;
  if (!record->has_value() || !match) return unauthorized("unknown token");
  const jobs::TokenRecord& t = **record;
  if (!t.revoked_at.empty()) return unauthorized("token " + t.id + " was revoked");
  Caller c;
  c.id = t.id;
  const std::string list = t.scopes;  // canonical (scopes_parse) when stored
  std::string_view rest = list;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    c.scope_submit = c.scope_submit || item == scope_name(Scope::submit);
    c.scope_read = c.scope_read || item == scope_name(Scope::read);
    c.scope_admin = c.scope_admin || item == scope_name(Scope::admin);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (!c.has(*needed))
    return api_error(403, "forbidden", std::string("token ") + t.id + " lacks the '" + scope_name(*needed) + "' scope that " +
                                           request.method + " " + path + " needs (it has: " + (list.empty() ? "none" : list) + ")");
  return c;
}

}  // namespace kiln::server
