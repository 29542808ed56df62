// The job store's schema 2: jobs' owners, tokens, registered targets, and the migration of a
// version 1 store (made here with version 1's tables) that keeps its jobs.
#include <sqlite3.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "service/jobs/job_store.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("kiln-store-v2-" + jobs::job_id_new());
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("job store: a version 1 store migrates to version 2 and keeps its jobs", "[service][store]") {
  TempDir dir;
  const std::string path = (dir.path / "jobs.db").string();
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    const char* v1 = R"(
      CREATE TABLE jobs (id TEXT PRIMARY KEY, name TEXT NOT NULL, state TEXT NOT NULL, stage TEXT NOT NULL DEFAULT '',
        progress REAL NOT NULL DEFAULT 0, created_at TEXT NOT NULL, started_at TEXT NOT NULL DEFAULT '',
        finished_at TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 0);
      CREATE INDEX jobs_state ON jobs(state, id);
      CREATE TABLE stages (job_id TEXT NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
        started_at TEXT NOT NULL DEFAULT '', finished_at TEXT NOT NULL DEFAULT '', seconds REAL NOT NULL DEFAULT 0,
        message TEXT NOT NULL DEFAULT '', PRIMARY KEY (job_id, name));
      CREATE TABLE artifacts (job_id TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
        bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY (job_id, name));
      CREATE TABLE idempotency_keys (key TEXT PRIMARY KEY, body_sha256 TEXT NOT NULL, job_id TEXT NOT NULL, created_at TEXT NOT NULL);
      INSERT INTO jobs (id, name, state, created_at) VALUES ('0190000000000123456789abcdef', 'old', 'succeeded', '2026-01-01T00:00:00.000Z');
      PRAGMA user_version = 1;)";
    REQUIRE(sqlite3_exec(db, v1, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = jobs::JobStore::open(path);
  REQUIRE(store);
  auto old = (*store)->job_get("0190000000000123456789abcdef");
  REQUIRE(old);
  REQUIRE(old->has_value());
  CHECK((*old)->owner.empty());  // the local user's
  REQUIRE((*store)->token_add({"00112233aabbccdd", "ci", "submit,read", std::string(64, 'a'), "", ""}));
  CHECK((*store)->token_get("00112233aabbccdd")->has_value());
  // Reopening a version 2 store migrates nothing again.
  store->reset();
  auto again = jobs::JobStore::open(path);
  REQUIRE(again);
  CHECK((*again)->token_list()->size() == 1);
}

TEST_CASE("job store: owners filter lists, tokens revoke once, targets put, replace and delete", "[service][store]") {
  TempDir dir;
  auto opened = jobs::JobStore::open((dir.path / "jobs.db").string());
  REQUIRE(opened);
  jobs::JobStore& store = **opened;
  const std::vector<std::string> owners = {"alice", "bob", "alice"};
  for (const std::string& owner : owners) {
    jobs::JobRecord j{.id = jobs::job_id_new(), .name = "n", .owner = owner};
    REQUIRE(store.job_create(j, {"validate"}, "", ""));
  }
  jobs::JobListQuery q;
  q.owner = "alice";
  CHECK(store.job_list(q)->size() == 2);
  q.owner = std::nullopt;
  CHECK(store.job_list(q)->size() == 3);

  REQUIRE(store.token_add({"aaaaaaaaaaaaaaaa", "t", "read", std::string(64, 'b'), "", ""}));
  CHECK(*store.token_revoke("aaaaaaaaaaaaaaaa"));
  CHECK_FALSE(*store.token_revoke("aaaaaaaaaaaaaaaa"));
  CHECK_FALSE(*store.token_revoke("missing"));
  CHECK_FALSE((*store.token_get("aaaaaaaaaaaaaaaa"))->revoked_at.empty());

  CHECK(*store.target_put({"t1", "local", "{\"name\":\"t1\"}", ""}));
  CHECK_FALSE(*store.target_put({"t1", "cloud", "{\"name\":\"t1\",\"kind\":\"cloud\"}", ""}));
  CHECK((*store.target_get("t1"))->kind == "cloud");
  CHECK(store.target_list()->size() == 1);
  CHECK(*store.target_delete("t1"));
  CHECK_FALSE(*store.target_delete("t1"));
  CHECK_FALSE(store.target_get("t1")->has_value());
}
