// Inside the job store (not for other callers): the SQLite connection and a prepared-statement
// wrapper, shared by job_store.cpp and the files that add tables to the same database
// (token_store.cpp, target_store.cpp). One connection serves them all, behind JobStore's mutex.
#pragma once

#include <sqlite3.h>

#include <string>

#include "service/jobs/job_store.h"

namespace kiln::jobs {

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
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
};

struct JobStore::Db {
  sqlite3* db = nullptr;
  std::string path;
  ~Db() { sqlite3_close(db); }

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
