// The job store's targets table (docs/job-store.md): registered targets by name, each the
// validated document as JSON. Jobs copy the document into their folder when submitted, so
// replacing or deleting a target never changes a job already queued.
#include "service/jobs/job_store_db.h"

namespace kiln::jobs {

Result<bool> JobStore::target_put(const TargetRecord& t) {
  std::lock_guard lock(mu_);
  bool existed = false;
  {
    Statement q(db_->db, "SELECT 1 FROM targets WHERE name = ?");
    if (!q.ok()) return db_->error("preparing the target query");
    q.bind(1, t.name);
    existed = q.step() == SQLITE_ROW;
  }
  Statement s(db_->db, "INSERT OR REPLACE INTO targets (name, kind, document, updated_at) VALUES (?, ?, ?, ?)");
  s.bind(1, t.name).bind(2, t.kind).bind(3, t.document).bind(4, time_now_rfc3339());
  KILN_TRY(db_->run(s, "storing a target"));
  return !existed;
}

Result<std::optional<TargetRecord>> JobStore::target_get(const std::string& name) {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "SELECT name, kind, document, updated_at FROM targets WHERE name = ?");
  if (!s.ok()) return db_->error("preparing the target query");
  s.bind(1, name);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<TargetRecord>();
  if (rc != SQLITE_ROW) return db_->error("reading a target");
  return std::optional<TargetRecord>(TargetRecord{s.text(0), s.text(1), s.text(2), s.text(3)});
}

Result<std::vector<TargetRecord>> JobStore::target_list() {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "SELECT name, kind, '', updated_at FROM targets ORDER BY name");
  if (!s.ok()) return db_->error("preparing the target list");
  std::vector<TargetRecord> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back({s.text(0), s.text(1), s.text(2), s.text(3)});
  if (rc != SQLITE_DONE) return db_->error("listing targets");
  return out;
}

Result<bool> JobStore::target_delete(const std::string& name) {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "DELETE FROM targets WHERE name = ?");
  s.bind(1, name);
  KILN_TRY(db_->run(s, "deleting a target"));
  return sqlite3_changes(db_->db) > 0;
}

}  // namespace kiln::jobs
