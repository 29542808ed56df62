#include "service/jobs/job_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "service/jobs/job_store_db.h"

namespace kiln::jobs {
namespace {

constexpr int kApplicationId = 0x6b6a6f62;  // "kjob"

// What version 2 added to version 1 besides jobs.owner: API tokens and registered targets.
const char* kSchemaV2Tables = R"(
CREATE INDEX jobs_owner ON jobs(owner, id);
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  scopes TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  created_at TEXT NOT NULL,
  revoked_at TEXT NOT NULL DEFAULT ''
);
CREATE TABLE targets (
  name TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  document TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
)";

const std::string kSchemaSql = R"(
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  stage TEXT NOT NULL DEFAULT '',
  progress REAL NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  started_at TEXT NOT NULL DEFAULT '',
  finished_at TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_state ON jobs(state, id);
CREATE TABLE stages (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed', 'skipped')),
  started_at TEXT NOT NULL DEFAULT '',
  finished_at TEXT NOT NULL DEFAULT '',
  seconds REAL NOT NULL DEFAULT 0,
  message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, name)
);
CREATE TABLE artifacts (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (job_id, name)
);
CREATE TABLE idempotency_keys (
  key TEXT PRIMARY KEY,
  body_sha256 TEXT NOT NULL,
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  created_at TEXT NOT NULL
);
)" + std::string(kSchemaV2Tables);

std::string iso_from_ms(int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Seconds between two times this file wrote (same format), for stage durations.
double seconds_between(const std::string& from, const std::string& to) {
  auto parse = [](const std::string& s) -> double {
    std::tm tm{};
    int ms = 0;
    if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                    &tm.tm_min, &tm.tm_sec, &ms) != 7)
      return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<double>(timegm(&tm)) + ms / 1000.0;
  };
  const double d = parse(to) - parse(from);
  return d > 0 ? d : 0;
}

Result<std::vector<StageRecord>> stages_read(JobStore::Db& db, const std::string& id) {
  Statement s = db.cached("SELECT name, state, started_at, finished_at, seconds, message FROM stages WHERE job_id = ? ORDER BY position");
  if (!s.ok()) return db.error("preparing the stage query");
  s.bind(1, id);
  std::vector<StageRecord> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW)
    out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), s.real(4), s.text(5)});
  if (rc != SQLITE_DONE) return db.error("reading stages");
  return out;
}

constexpr const char* kJobColumns = "id, name, state, stage, progress, created_at, started_at, finished_at, error, attempts, owner";

JobRecord job_row(const Statement& s) {
  JobRecord j;
  j.id = s.text(0);
  j.name = s.text(1);
  j.state = s.text(2);
  j.stage = s.text(3);
  j.progress = s.real(4);
  j.created_at = s.text(5);
  j.started_at = s.text(6);
  j.finished_at = s.text(7);
  j.error = s.text(8);
  j.attempts = static_cast<int>(s.integer(9));
  j.owner = s.text(10);
  return j;
}

Result<std::optional<JobRecord>> job_read(JobStore::Db& db, const std::string& id) {
  Statement s = db.cached(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
  if (!s.ok()) return db.error("preparing the job query");
  s.bind(1, id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<JobRecord>();
  if (rc != SQLITE_ROW) return db.error("reading job " + id);
  JobRecord j = job_row(s);
  KILN_ASSIGN(stages_of_job, stages_read(db, id));
  j.stages = std::move(stages_of_job);
  return std::optional<JobRecord>(std::move(j));
}

}  // namespace

bool job_state_is_final(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

std::string time_now_rfc3339() { return iso_from_ms(now_ms()); }

std::string job_id_new() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  static int64_t last_ms = 0;
  uint64_t random;
  int64_t ms;
  {
    // Strictly increasing within a process, so two jobs created in one millisecond still list
    // in creation order.
    std::lock_guard lock(mu);
    random = rng();
    ms = std::max(now_ms(), last_ms + 1);
    last_ms = ms;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%012llx%016llx", static_cast<unsigned long long>(ms),
                static_cast<unsigned long long>(random));
  return buf;
}

bool job_id_valid(const std::string& id) {
  if (id.size() != 28) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

JobStore::JobStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
JobStore::~JobStore() = default;

Result<std::unique_ptr<JobStore>> JobStore::open(const std::string& path) {
  auto db = std::make_unique<Db>();
  db->path = path;
  if (sqlite3_open_v2(path.c_str(), &db->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    return db->error("cannot open");
  sqlite3_busy_timeout(db->db, 5000);
  int version = 0;
  {
    Statement s(db->db, "PRAGMA user_version");
    if (!s.ok() || s.step() != SQLITE_ROW) return db->error("reading user_version");
    version = static_cast<int>(s.integer(0));
  }
  KILN_REQUIRE(version <= kJobStoreSchemaVersion, unsupported, "job store '", path, "' has schema version ", version,
               "; this kiln knows up to ", kJobStoreSchemaVersion, " (use a newer kiln or another --data-dir)");
  KILN_TRY(db->exec("PRAGMA journal_mode=WAL"));
  if (version == 0)
    KILN_TRY(db->exec(std::string("BEGIN IMMEDIATE; ") + kSchemaSql + "PRAGMA application_id=" +
                      std::to_string(kApplicationId) + "; PRAGMA user_version=" +
                      std::to_string(kJobStoreSchemaVersion) + "; COMMIT;"));
  // Version 1 → 2: jobs gain their owner (the token's id; '' = the local single user) and the
  // tokens and targets tables appear. Jobs of a version 1 store belong to the local user.
  if (version == 1)
    KILN_TRY(db->exec(std::string("BEGIN IMMEDIATE; ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''; ") +
                      kSchemaV2Tables + "PRAGMA user_version=2; COMMIT;"));
  KILN_TRY(db->exec("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL"));
  return std::unique_ptr<JobStore>(new JobStore(std::move(db)));
}

Result<JobCreated> JobStore::job_create(const JobRecord& job, const std::vector<std::string>& stages,
                                        const std::string& idempotency_key, const std::string& body_sha256) {
  std::lock_guard lock(mu_);
  KILN_TRY(db_->exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> Result<JobCreated> {
    if (!idempotency_key.empty()) {
      // Keys are kept for 24 hours (openapi IdempotencyKey); RFC 3339 UTC times compare as text.
      Statement expire(db_->db, "DELETE FROM idempotency_keys WHERE created_at < ?");
      expire.bind(1, iso_from_ms(now_ms() - int64_t{24} * 3600 * 1000));
      KILN_TRY(db_->run(expire, "expiring idempotency keys"));
      Statement s(db_->db, "SELECT job_id, body_sha256 FROM idempotency_keys WHERE key = ?");
      if (!s.ok()) return db_->error("preparing the idempotency query");
      s.bind(1, idempotency_key);
      const int rc = s.step();
      if (rc == SQLITE_ROW) return JobCreated{s.text(0), false, s.text(1) != body_sha256};
      if (rc != SQLITE_DONE) return db_->error("reading idempotency keys");
    }
    Statement ins(db_->db, "INSERT INTO jobs (id, name, state, created_at, owner) VALUES (?, ?, 'queued', ?, ?)");
    ins.bind(1, job.id).bind(2, job.name).bind(3, job.created_at.empty() ? time_now_rfc3339() : job.created_at).bind(4, job.owner);
    KILN_TRY(db_->run(ins, "inserting a job"));
    for (size_t i = 0; i < stages.size(); ++i) {
      Statement st(db_->db, "INSERT INTO stages (job_id, position, name, state) VALUES (?, ?, ?, 'pending')");
      st.bind(1, job.id).bind(2, static_cast<int64_t>(i)).bind(3, stages[i]);
      KILN_TRY(db_->run(st, "inserting a stage"));
    }
    if (!idempotency_key.empty()) {
      Statement key(db_->db, "INSERT INTO idempotency_keys (key, body_sha256, job_id, created_at) VALUES (?, ?, ?, ?)");
      key.bind(1, idempotency_key).bind(2, body_sha256).bind(3, job.id).bind(4, time_now_rfc3339());
      KILN_TRY(db_->run(key, "inserting an idempotency key"));
    }
    return JobCreated{job.id, true, false};
  };
  Result<JobCreated> created = body();
  if (!created) {
    (void)db_->exec("ROLLBACK");
    return created;
  }
  KILN_TRY(db_->exec("COMMIT"));
  return created;
}

Result<std::optional<JobRecord>> JobStore::job_get(const std::string& id) {
  std::lock_guard lock(mu_);
  return job_read(*db_, id);
}

Result<std::vector<JobRecord>> JobStore::job_list(const JobListQuery& query) {
  std::lock_guard lock(mu_);
  std::string sql = std::string("SELECT ") + kJobColumns +
                    " FROM jobs WHERE (? = '' OR state = ?) AND (? = '' OR id < ?) AND (?6 = 0 OR owner = ?7) ORDER BY id DESC LIMIT ?5";
  Statement s(db_->db, sql);
  if (!s.ok()) return db_->error("preparing the job list");
  s.bind(1, query.state).bind(2, query.state).bind(3, query.cursor).bind(4, query.cursor).bind(5, static_cast<int64_t>(query.limit));
  s.bind(6, static_cast<int64_t>(query.owner.has_value())).bind(7, query.owner.value_or(""));
  std::vector<JobRecord> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(job_row(s));
  if (rc != SQLITE_DONE) return db_->error("listing jobs");
  for (JobRecord& j : out) {
    KILN_ASSIGN(stages, stages_read(*db_, j.id));
    j.stages = std::move(stages);
  }
  return out;
}

Result<std::optional<JobRecord>> JobStore::job_claim() {
  std::lock_guard lock(mu_);
  std::string id;
  {
    Statement s(db_->db, "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1");
    if (!s.ok()) return db_->error("preparing the queue query");
    const int rc = s.step();
    if (rc == SQLITE_DONE) return std::optional<JobRecord>();
    if (rc != SQLITE_ROW) return db_->error("reading the queue");
    id = s.text(0);
  }
  Statement u(db_->db,
              "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = CASE WHEN started_at = '' THEN ? "
              "ELSE started_at END WHERE id = ? AND state = 'queued'");
  u.bind(1, time_now_rfc3339()).bind(2, id);
  KILN_TRY(db_->run(u, "claiming a job"));
  return job_read(*db_, id);
}

Status JobStore::stage_start(const std::string& id, const std::string& stage) {
  std::lock_guard lock(mu_);
  const std::string now = time_now_rfc3339();
  Statement s(db_->db, "UPDATE stages SET state = 'running', started_at = ?, finished_at = '', message = '' WHERE job_id = ? AND name = ?");
  s.bind(1, now).bind(2, id).bind(3, stage);
  KILN_TRY(db_->run(s, "starting a stage"));
  Statement j(db_->db, "UPDATE jobs SET stage = ? WHERE id = ?");
  j.bind(1, stage).bind(2, id);
  return db_->run(j, "recording the job's stage");
}

Status JobStore::stage_finish(const std::string& id, const std::string& stage, const std::string& state,
                              const std::string& message) {
  std::lock_guard lock(mu_);
  const std::string now = time_now_rfc3339();
  std::string started;
  {
    Statement q(db_->db, "SELECT started_at FROM stages WHERE job_id = ? AND name = ?");
    q.bind(1, id).bind(2, stage);
    if (q.ok() && q.step() == SQLITE_ROW) started = q.text(0);
  }
  Statement s(db_->db, "UPDATE stages SET state = ?, finished_at = ?, seconds = ?, message = ? WHERE job_id = ? AND name = ?");
  s.bind(1, state).bind(2, now).bind(3, started.empty() ? 0.0 : seconds_between(started, now)).bind(4, message).bind(5, id).bind(6, stage);
  KILN_TRY(db_->run(s, "finishing a stage"));
  Statement p(db_->db,
              "UPDATE jobs SET progress = 100.0 * (SELECT COUNT(*) FROM stages WHERE job_id = ?1 AND state IN ('done', 'skipped')) / "
              "MAX(1, (SELECT COUNT(*) FROM stages WHERE job_id = ?1)) WHERE id = ?1");
  p.bind(1, id);
  return db_->run(p, "updating progress");
}

Status JobStore::job_finish(const std::string& id, const std::string& state, const std::string& error) {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "UPDATE jobs SET state = ?, error = ?, finished_at = ? WHERE id = ? AND state = 'running'");
  s.bind(1, state).bind(2, error).bind(3, time_now_rfc3339()).bind(4, id);
  return db_->run(s, "finishing a job");
}

Result<bool> JobStore::job_cancel(const std::string& id, const std::string& reason) {
  std::lock_guard lock(mu_);
  Statement s(db_->db,
              "UPDATE jobs SET state = 'cancelled', error = ?, finished_at = ? WHERE id = ? AND state IN ('queued', 'running')");
  s.bind(1, reason).bind(2, time_now_rfc3339()).bind(3, id);
  KILN_TRY(db_->run(s, "cancelling a job"));
  const bool changed = sqlite3_changes(db_->db) > 0;
  if (changed) {
    Statement st(db_->db, "UPDATE stages SET state = 'skipped' WHERE job_id = ? AND state IN ('pending', 'running')");
    st.bind(1, id);
    KILN_TRY(db_->run(st, "skipping the cancelled job's stages"));
  }
  return changed;
}

Result<int> JobStore::jobs_recover(int max_attempts) {
  std::lock_guard lock(mu_);
  KILN_TRY(db_->exec("BEGIN IMMEDIATE"));
  int requeued = 0;
  const Status body = [&]() -> Status {
    Statement fail(db_->db,
                   "UPDATE jobs SET state = 'failed', finished_at = ?, error = 'interrupted by a server restart ' || attempts || "
                   "' times (in stage ' || stage || '); not retried again' WHERE state = 'running' AND attempts >= ?");
    fail.bind(1, time_now_rfc3339()).bind(2, static_cast<int64_t>(max_attempts));
    KILN_TRY(db_->run(fail, "failing interrupted jobs"));
    Statement stages(db_->db,
                     "UPDATE stages SET state = 'pending', message = 'interrupted by a server restart; runs again' "
                     "WHERE state = 'running' AND job_id IN (SELECT id FROM jobs WHERE state = 'running')");
    KILN_TRY(db_->run(stages, "resetting interrupted stages"));
    Statement requeue(db_->db, "UPDATE jobs SET state = 'queued' WHERE state = 'running'");
    KILN_TRY(db_->run(requeue, "requeueing interrupted jobs"));
    requeued = sqlite3_changes(db_->db);
    return db_->exec("COMMIT");
  }();
  if (body.is_ok()) return requeued;
  (void)db_->exec("ROLLBACK");
  return Error{body.code(), body.message()};
}

Status JobStore::artifact_add(const std::string& id, const ArtifactRecord& a) {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "INSERT OR REPLACE INTO artifacts (job_id, name, kind, path, bytes, sha256) VALUES (?, ?, ?, ?, ?, ?)");
  s.bind(1, id).bind(2, a.name).bind(3, a.kind).bind(4, a.path).bind(5, a.bytes).bind(6, a.sha256);
  return db_->run(s, "recording an artifact");
}

Result<std::vector<ArtifactRecord>> JobStore::artifacts_list(const std::string& id) {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "SELECT name, kind, path, bytes, sha256 FROM artifacts WHERE job_id = ? ORDER BY name");
  if (!s.ok()) return db_->error("preparing the artifact query");
  s.bind(1, id);
  std::vector<ArtifactRecord> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back({s.text(0), s.text(1), s.text(2), s.integer(3), s.text(4)});
  if (rc != SQLITE_DONE) return db_->error("reading artifacts");
  return out;
}

Result<std::map<std::string, int64_t>> JobStore::job_counts() {
  std::lock_guard lock(mu_);
  std::map<std::string, int64_t> out;
  for (const char* state : kJobStates) out[state] = 0;
  Statement s(db_->db, "SELECT state, COUNT(*) FROM jobs GROUP BY state");
  if (!s.ok()) return db_->error("preparing the count query");
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out[s.text(0)] = s.integer(1);
  if (rc != SQLITE_DONE) return db_->error("counting jobs");
  return out;
}

Result<std::vector<std::pair<std::string, double>>> JobStore::stage_durations() {
  std::lock_guard lock(mu_);
  Statement s(db_->db, "SELECT name, seconds FROM stages WHERE state = 'done'");
  if (!s.ok()) return db_->error("preparing the stage duration query");
  std::vector<std::pair<std::string, double>> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.emplace_back(s.text(0), s.real(1));
  if (rc != SQLITE_DONE) return db_->error("reading stage durations");
  return out;
}

}  // namespace kiln::jobs
