// The job store's tokens table (docs/job-store.md): API tokens by id, with their scopes and the
// SHA-256 of the secret token; revoking keeps the row so `kiln token list` shows it.
#include "service/jobs/job_store_db.h"

namespace kiln::jobs {
namespace {

TokenRecord token_row(const Statement& s) {
  return {s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)};
}

}  // namespace

Status JobStore::token_add(const TokenRecord& t) {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "INSERT INTO tokens (id, name, scopes, sha256, created_at) VALUES (?, ?, ?, ?, ?)");
  s.bind(1, t.id).bind(2, t.name).bind(3, t.scopes).bind(4, t.sha256).bind(5, t.created_at.empty() ? time_now_rfc3339() : t.created_at);
  return db_->run(s, "adding a token");
}

Result<std::optional<TokenRecord>> JobStore::token_get(const std::string& id) {
  std::lock_guard lock(mu_);
  Statement s = db_->cached("SELECT id, name, scopes, sha256, created_at, revoked_at FROM tokens WHERE id = ?");
  if (!s.ok()) return db_->error("preparing the token query");
  s.bind(1, id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<TokenRecord>();
  if (rc != SQLITE_ROW) return db_->error("reading a token");
  return std::optional<TokenRecord>(token_row(s));
}

Result<std::vector<TokenRecord>> JobStore::token_list() {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "SELECT id, name, scopes, sha256, created_at, revoked_at FROM tokens ORDER BY created_at, id");
  if (!s.ok()) return db_->error("preparing the token list");
  std::vector<TokenRecord> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(token_row(s));
  if (rc != SQLITE_DONE) return db_->error("listing tokens");
  return out;
}

Result<bool> JobStore::token_revoke(const std::string& id) {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at = ''");
  s.bind(1, time_now_rfc3339()).bind(2, id);
  KILN_TRY(db_->run(s, "revoking a token"));
  return sqlite3_changes(db_->db) > 0;
}

}  // namespace kiln::jobs
