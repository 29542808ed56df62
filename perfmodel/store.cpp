#include "perfmodel/store.h"

#include <sqlite3.h>

#include <ctime>
#include <map>
#include <sstream>
#include <type_traits>

namespace kiln::perf {
namespace {

// The SQL type of a Measurement field, from its C++ type.
template <typename T>
constexpr const char* sql_type() {
  if constexpr (std::is_same_v<T, std::string>) return "TEXT NOT NULL";
  else if constexpr (std::is_integral_v<T>) return "INTEGER NOT NULL";
  else return "REAL NOT NULL";
}

std::string measurement_columns_sql() {
  std::string out;
  Measurement m;
#define KILN_COLUMN(f) out += std::string("  ") + #f + " " + sql_type<decltype(m.f)>() + ",\n";
  KILN_MEASUREMENT_FIELDS(KILN_COLUMN)
#undef KILN_COLUMN
  return out;
}

std::string measurement_names(const char* sep, bool placeholders) {
  std::string out;
#define KILN_NAME(f) out += (out.empty() ? "" : sep) + std::string(placeholders ? "?" : #f);
  KILN_MEASUREMENT_FIELDS(KILN_NAME)
#undef KILN_NAME
  return out;
}

std::string schema_sql() {
  return R"(
CREATE TABLE targets (
  id TEXT PRIMARY KEY,
  source TEXT NOT NULL CHECK (source IN ('measured', 'imported')),
  cpu_model TEXT NOT NULL,
  vendor TEXT NOT NULL,
  isa TEXT NOT NULL,
  logical_cpus INTEGER NOT NULL,
  usable_threads INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  caches TEXT NOT NULL,
  onednn_version TEXT NOT NULL,
  kiln_version TEXT NOT NULL,
  host TEXT NOT NULL,
  first_seen TEXT NOT NULL
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  target_id TEXT NOT NULL REFERENCES targets(id),
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted', 'failed', 'imported')),
  options TEXT NOT NULL,
  measured INTEGER NOT NULL DEFAULT 0,
  skipped INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE measurements (
  id INTEGER PRIMARY KEY,
  target_id TEXT NOT NULL REFERENCES targets(id),
  run_id INTEGER NOT NULL REFERENCES runs(id),
)" + measurement_columns_sql() +
         R"(  UNIQUE (target_id, kind, key, dtype, threads)
);
CREATE INDEX measurements_by_op ON measurements (target_id, kind, op, dtype);
CREATE TABLE skipped (
  target_id TEXT NOT NULL REFERENCES targets(id),
  kind TEXT NOT NULL,
  dtype TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (target_id, kind, dtype)
);
)";
}

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() const { return stmt_; }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  void bind(int i, const std::string& v) { sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, int v) { sqlite3_bind_int(stmt_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void read(int i, std::string& v) const {
    const unsigned char* t = sqlite3_column_text(stmt_, i);
    v = t ? reinterpret_cast<const char*>(t) : "";
  }
  void read(int i, int64_t& v) const { v = sqlite3_column_int64(stmt_, i); }
  void read(int i, int& v) const { v = sqlite3_column_int(stmt_, i); }
  void read(int i, double& v) const { v = sqlite3_column_double(stmt_, i); }
  int step() { return sqlite3_step(stmt_); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

struct BenchmarkStore::Db {
  sqlite3* db = nullptr;
  std::map<std::string, std::unique_ptr<Statement>> statements;  // prepared once, reused
  ~Db() {
    statements.clear();
    sqlite3_close(db);
  }
  Error error(const std::string& what) const {
    return make_error(ErrorCode::io, "benchmark store: ", what, ": ", db ? sqlite3_errmsg(db) : "no database");
  }
  Status exec(const std::string& sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      const std::string text = msg ? msg : "unknown error";
      sqlite3_free(msg);
      return make_error(ErrorCode::io, "benchmark store: ", text);
    }
    return Status::ok();
  }
  Result<Statement*> prepared(const std::string& sql) {
    auto& slot = statements[sql];
    if (!slot) {
      slot = std::make_unique<Statement>(db, sql);
      if (!slot->ok()) {
        const Error e = error("preparing '" + sql.substr(0, 40) + "...'");
        statements.erase(sql);
        return e;
      }
    }
    slot->reset();
    return slot.get();
  }
  Result<int64_t> pragma(const std::string& name) {
    Statement s(db, "PRAGMA " + name);
    if (!s.ok() || s.step() != SQLITE_ROW) return error("reading PRAGMA " + name);
    int64_t v = 0;
    s.read(0, v);
    return v;
  }
  Status done(Statement* s, const std::string& what) {
    const int rc = s->step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return error(what);
    return Status::ok();
  }
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string measurement_identity(const Measurement& m) {
  return m.kind + "|" + m.key + "|" + m.dtype + "|" + std::to_string(m.threads);
}

BenchmarkStore::BenchmarkStore(std::unique_ptr<Db> db, std::string path) : db_(std::move(db)), path_(std::move(path)) {}
BenchmarkStore::~BenchmarkStore() = default;

Result<std::unique_ptr<BenchmarkStore>> BenchmarkStore::open(const std::string& path) {
  auto db = std::make_unique<Db>();
  if (sqlite3_open_v2(path.c_str(), &db->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    return make_error(ErrorCode::io, path, ": cannot open the benchmark store: ", db->db ? sqlite3_errmsg(db->db) : "out of memory");
  sqlite3_busy_timeout(db->db, 5000);
  // A file that is not SQLite fails here, on the first read.
  auto app_id = db->pragma("application_id");
  if (!app_id) return make_error(ErrorCode::parse, path, ": not a kiln benchmark store (not an SQLite database?)");
  KILN_ASSIGN(version, db->pragma("user_version"));
  KILN_ASSIGN(tables, db->pragma("schema_version"));  // 0 for an empty file
  const bool empty = tables == 0;
  if (empty) {
    KILN_TRY(db->exec("PRAGMA journal_mode=WAL"));
    KILN_TRY(db->exec("BEGIN IMMEDIATE; " + schema_sql() + "PRAGMA application_id=" + std::to_string(kStoreApplicationId) +
                      "; PRAGMA user_version=" + std::to_string(kStoreSchemaVersion) + "; COMMIT;"));
  } else {
    if (*app_id != kStoreApplicationId)
      return make_error(ErrorCode::unsupported, path, ": not a kiln benchmark store (SQLite application_id ", *app_id,
                        ", expected ", kStoreApplicationId, "); pass another --db");
    if (version > kStoreSchemaVersion)
      return make_error(ErrorCode::unsupported, path, ": benchmark store schema version ", version,
                        " is newer than this kiln supports (version ", kStoreSchemaVersion,
                        "); use the kiln that wrote it, or another --db");
    if (version < kStoreSchemaVersion)
      return make_error(ErrorCode::unsupported, path, ": benchmark store schema version ", version,
                        " is older than this kiln supports (version ", kStoreSchemaVersion,
                        ") and cannot be migrated; export it with the kiln that wrote it, or move it aside and re-run");
    KILN_TRY(db->exec("PRAGMA journal_mode=WAL"));
  }
  KILN_TRY(db->exec("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL"));
  return std::unique_ptr<BenchmarkStore>(new BenchmarkStore(std::move(db), path));
}

Status BenchmarkStore::target_put(const TargetFingerprint& fp, const std::string& source) {
  std::string isa;
  for (const std::string& f : fp.isa) isa += (isa.empty() ? "" : " ") + f;
  KILN_ASSIGN(s, db_->prepared(
                     "INSERT INTO targets (id, source, cpu_model, vendor, isa, logical_cpus, usable_threads, memory_bytes, "
                     "caches, onednn_version, kiln_version, host, first_seen) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
                     "ON CONFLICT (id) DO UPDATE SET host = excluded.host, usable_threads = excluded.usable_threads, "
                     "source = CASE WHEN targets.source = 'measured' THEN 'measured' ELSE excluded.source END"));
  int i = 1;
  s->bind(i++, fp.id);
  s->bind(i++, source);
  s->bind(i++, fp.cpu_model);
  s->bind(i++, fp.vendor);
  s->bind(i++, isa);
  s->bind(i++, fp.logical_cpus);
  s->bind(i++, fp.usable_threads);
  s->bind(i++, fp.memory_bytes);
  s->bind(i++, fp.caches);
  s->bind(i++, fp.onednn_version);
  s->bind(i++, fp.kiln_version);
  s->bind(i++, fp.host);
  s->bind(i++, utc_now());
  return db_->done(s, "storing target " + fp.id);
}

Result<std::vector<StoredTarget>> BenchmarkStore::targets() {
  KILN_ASSIGN(s, db_->prepared(
                     "SELECT t.id, t.source, t.cpu_model, t.vendor, t.isa, t.logical_cpus, t.usable_threads, t.memory_bytes, "
                     "t.caches, t.onednn_version, t.kiln_version, t.host, t.first_seen, "
                     "(SELECT COUNT(*) FROM measurements m WHERE m.target_id = t.id), "
                     "(SELECT COALESCE(MAX(measured_at), '') FROM measurements m WHERE m.target_id = t.id) "
                     "FROM targets t ORDER BY t.first_seen, t.id"));
  std::vector<StoredTarget> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    StoredTarget t;
    TargetFingerprint& fp = t.fingerprint;
    std::string isa;
    int i = 0;
    s->read(i++, fp.id);
    s->read(i++, t.source);
    s->read(i++, fp.cpu_model);
    s->read(i++, fp.vendor);
    s->read(i++, isa);
    s->read(i++, fp.logical_cpus);
    s->read(i++, fp.usable_threads);
    s->read(i++, fp.memory_bytes);
    s->read(i++, fp.caches);
    s->read(i++, fp.onednn_version);
    s->read(i++, fp.kiln_version);
    s->read(i++, fp.host);
    s->read(i++, t.first_seen);
    s->read(i++, t.measurements);
    s->read(i++, t.last_measured);
    std::istringstream words(isa);
    for (std::string w; words >> w;) fp.isa.push_back(w);
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return db_->error("listing targets");
  return out;
}

Result<int64_t> BenchmarkStore::run_begin(const std::string& target_id, const std::string& options, const std::string& status) {
  KILN_ASSIGN(s, db_->prepared("INSERT INTO runs (target_id, started_at, status, options) VALUES (?,?,?,?)"));
  s->bind(1, target_id);
  s->bind(2, utc_now());
  s->bind(3, status);
  s->bind(4, options);
  KILN_TRY(db_->done(s, "starting a run"));
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_->db));
}

Status BenchmarkStore::run_finish(int64_t run_id, const std::string& status, int64_t measured, int64_t skipped) {
  KILN_ASSIGN(s, db_->prepared("UPDATE runs SET finished_at = ?, status = ?, measured = ?, skipped = ? WHERE id = ?"));
  s->bind(1, utc_now());
  s->bind(2, status);
  s->bind(3, measured);
  s->bind(4, skipped);
  s->bind(5, run_id);
  return db_->done(s, "finishing run " + std::to_string(run_id));
}

Result<std::vector<RunRecord>> BenchmarkStore::runs(const std::string& target_id) {
  KILN_ASSIGN(s, db_->prepared("SELECT id, started_at, finished_at, status, options, measured, skipped FROM runs "
                               "WHERE target_id = ? ORDER BY id"));
  s->bind(1, target_id);
  std::vector<RunRecord> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    RunRecord r;
    s->read(0, r.id);
    s->read(1, r.started_at);
    s->read(2, r.finished_at);
    s->read(3, r.status);
    s->read(4, r.options);
    s->read(5, r.measured);
    s->read(6, r.skipped);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return db_->error("listing runs");
  return out;
}

Status BenchmarkStore::measurement_put(const std::string& target_id, int64_t run_id, const Measurement& m) {
  KILN_ASSIGN(s, db_->prepared("INSERT OR REPLACE INTO measurements (target_id, run_id, " + measurement_names(", ", false) +
                               ") VALUES (?, ?, " + measurement_names(", ", true) + ")"));
  s->bind(1, target_id);
  s->bind(2, run_id);
  int i = 3;
#define KILN_BIND(f) s->bind(i++, m.f);
  KILN_MEASUREMENT_FIELDS(KILN_BIND)
#undef KILN_BIND
  return db_->done(s, "storing measurement " + m.key);
}

Result<std::vector<Measurement>> BenchmarkStore::measurements(const std::string& target_id) {
  KILN_ASSIGN(s, db_->prepared("SELECT " + measurement_names(", ", false) +
                               " FROM measurements WHERE target_id = ? ORDER BY kind, op, key, dtype, threads"));
  s->bind(1, target_id);
  std::vector<Measurement> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    Measurement m;
    int i = 0;
#define KILN_READ(f) s->read(i++, m.f);
    KILN_MEASUREMENT_FIELDS(KILN_READ)
#undef KILN_READ
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return db_->error("reading measurements");
  return out;
}

Result<std::set<std::string>> BenchmarkStore::measurement_identities(const std::string& target_id, bool quiet_only) {
  KILN_ASSIGN(s, db_->prepared(std::string("SELECT kind, key, dtype, threads FROM measurements WHERE target_id = ?") +
                               (quiet_only ? " AND load_avg <= threads + ?" : "")));
  s->bind(1, target_id);
  if (quiet_only) s->bind(2, kLoadSlack);
  std::set<std::string> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    Measurement m;
    s->read(0, m.kind);
    s->read(1, m.key);
    s->read(2, m.dtype);
    s->read(3, m.threads);
    out.insert(measurement_identity(m));
  }
  if (rc != SQLITE_DONE) return db_->error("reading measurement keys");
  return out;
}

Status BenchmarkStore::skipped_put(const std::string& target_id, const SkippedBenchmark& sk) {
  KILN_ASSIGN(s, db_->prepared("INSERT OR REPLACE INTO skipped (target_id, kind, dtype, reason) VALUES (?,?,?,?)"));
  s->bind(1, target_id);
  s->bind(2, sk.kind);
  s->bind(3, sk.dtype);
  s->bind(4, sk.reason);
  return db_->done(s, "storing a skipped benchmark");
}

Result<std::vector<SkippedBenchmark>> BenchmarkStore::skipped(const std::string& target_id) {
  KILN_ASSIGN(s, db_->prepared("SELECT kind, dtype, reason FROM skipped WHERE target_id = ? ORDER BY kind, dtype"));
  s->bind(1, target_id);
  std::vector<SkippedBenchmark> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    SkippedBenchmark sk;
    s->read(0, sk.kind);
    s->read(1, sk.dtype);
    s->read(2, sk.reason);
    out.push_back(std::move(sk));
  }
  if (rc != SQLITE_DONE) return db_->error("reading skipped benchmarks");
  return out;
}

Status BenchmarkStore::transaction(const std::function<Status()>& fn) {
  KILN_TRY(db_->exec("BEGIN IMMEDIATE"));
  Status s = fn();
  if (!s) {
    (void)db_->exec("ROLLBACK");
    return s;
  }
  return db_->exec("COMMIT");
}

}  // namespace kiln::perf
