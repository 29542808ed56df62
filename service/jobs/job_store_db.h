// Inside the job store (not for other callers): the SQLite connection and a prepared-statement
// wrapper, shared by job_store.cpp and the files that add tables to the same database
// (token_store.cpp, target_store.cpp). One connection serves them all, behind JobStore's mutex.
#pragma once

#include <sqlite3.h>

#include <map>
#include <string>

#include "service/jobs/job_store.h"

namespace kiln::jobs {

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  // Borrows a statement prepared once (JobStore::Db::cached): reset, not finalized, when done.
  explicit Statement(sqlite3_stmt* borrowed) : stmt_(borrowed), borrowed_(true) {}
  ~Statement() {
    if (!borrowed_) {
      sqlite3_finalize(stmt_);
    } else if (stmt_) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return stmt_ != nullptr; }
  Statement& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(stmt_); }
  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : "";
  }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  bool borrowed_ = false;
};

struct JobStore::Db {
  sqlite3* db = nullptr;
  std::string path;
  std::map<std::string, sqlite3_stmt*> prepared;  // the hot queries, prepared once
  ~Db() {
    for (auto& [sql, stmt] : prepared) sqlite3_finalize(stmt);
    sqlite3_close(db);
  }

  // A statement of the hot path (job and token lookups: every GET /v1/jobs/{id}), prepared on
  // first use and kept; callers hold JobStore's mutex, and one use of a statement ends before
  // the next begins.
  Statement cached(const std::string& sql) {
    auto it = prepared.find(sql);
    if (it == prepared.end()) {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK)
        return Statement(static_cast<sqlite3_stmt*>(nullptr));
      it = prepared.emplace(sql, stmt).first;
    }
    return Statement(it->second);
  }

  Error error(const std::string& what) const {
    return make_error(ErrorCode::io, "job store '", path, "': ", what, ": ", sqlite3_errmsg(db));
  }
  Status exec(const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      std::string m = message ? message : "unknown error";
      sqlite3_free(message);
      return make_error(ErrorCode::io, "job store '", path, "': ", m);
    }
    return Status::ok();
  }
  // Runs a statement that returns no rows.
  Status run(Statement& s, const char* what) {
    if (!s.ok()) return error(std::string("preparing ") + what);
    if (s.step() != SQLITE_DONE) return error(what);
    return Status::ok();
  }
};

}  // namespace kiln::jobs
