// The benchmark store: a round trip through SQLite, incremental identities, transactions that
// roll back, and refusal of files that are not stores or have another schema version.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <fstream>

#include "perfmodel/store.h"
#include "tests/perfmodel/store_samples.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln;
using namespace kiln::perf;
using namespace kiln::perf::testing;

namespace {

void sql(const std::string& path, const std::string& statements) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* msg = nullptr;
  const int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &msg);
  INFO((msg ? msg : ""));
  sqlite3_free(msg);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("store round trip: targets, runs and measurements by fingerprint", "[perfmodel][store]") {
  TempDir dir;
  const TargetFingerprint a = sample_fingerprint("CPU A"), b = sample_fingerprint("CPU B");
  {
    auto store = BenchmarkStore::open(dir.file("b.sqlite"));
    REQUIRE(store);
    REQUIRE((*store)->target_put(a, "measured"));
    REQUIRE((*store)->target_put(b, "imported"));
    auto run = (*store)->run_begin(a.id, "--quick");
    REQUIRE(run);
    REQUIRE((*store)->measurement_put(a.id, *run, sample_conv(1, 0.8)));
    REQUIRE((*store)->measurement_put(a.id, *run, sample_conv(2, 0.5)));
    REQUIRE((*store)->measurement_put(a.id, *run, sample_peak()));
    REQUIRE((*store)->measurement_put(b.id, *run, sample_conv(1, 9.0)));
    // The same identity again replaces (a --force re-measurement).
    REQUIRE((*store)->measurement_put(a.id, *run, sample_conv(1, 0.7)));
    REQUIRE((*store)->skipped_put(a.id, {kKindPeak, "int8", "no VNNI"}));
    REQUIRE((*store)->run_finish(*run, "complete", 3, 0));
  }
  auto store = BenchmarkStore::open(dir.file("b.sqlite"));  // reopened: everything was committed
  REQUIRE(store);
  auto targets = (*store)->targets();
  REQUIRE(targets);
  REQUIRE(targets->size() == 2);
  const StoredTarget& ta = targets->at(0).fingerprint.id == a.id ? targets->at(0) : targets->at(1);
  CHECK(ta.source == "measured");
  CHECK(ta.measurements == 3);
  CHECK(ta.fingerprint.cpu_model == "CPU A");
  CHECK(ta.fingerprint.isa == a.isa);
  CHECK(ta.fingerprint.memory_bytes == a.memory_bytes);
  CHECK(fingerprint_id(ta.fingerprint) == a.id);

  auto ms = (*store)->measurements(a.id);
  REQUIRE(ms);
  REQUIRE(ms->size() == 3);
  int matched = 0;
  for (const Measurement& m : *ms) {
    if (same_measurement(m, sample_conv(1, 0.7))) ++matched;
    if (same_measurement(m, sample_conv(2, 0.5))) ++matched;
    if (same_measurement(m, sample_peak())) ++matched;
  }
  CHECK(matched == 3);
  auto ids = (*store)->measurement_identities(a.id);
  REQUIRE(ids);
  CHECK(ids->count(measurement_identity(sample_conv(2, 0))) == 1);
  CHECK(ids->count(measurement_identity(sample_conv(4, 0))) == 0);
  auto other = (*store)->measurements(b.id);
  REQUIRE(other);
  REQUIRE(other->size() == 1);
  CHECK(other->at(0).median_ms == 9.0);
  auto skipped = (*store)->skipped(a.id);
  REQUIRE(skipped);
  REQUIRE(skipped->size() == 1);
  CHECK(skipped->at(0).reason == "no VNNI");
  auto runs = (*store)->runs(a.id);
  REQUIRE(runs);
  REQUIRE(runs->size() == 1);
  CHECK(runs->at(0).status == "complete");
  CHECK(runs->at(0).options == "--quick");
}

TEST_CASE("store transaction: a failure writes nothing", "[perfmodel][store]") {
  TempDir dir;
  auto store = BenchmarkStore::open(dir.file("b.sqlite"));
  REQUIRE(store);
  const TargetFingerprint fp = sample_fingerprint();
  const Status s = (*store)->transaction([&]() -> Status {
    KILN_TRY((*store)->target_put(fp, "measured"));
    return make_error(ErrorCode::parse, "fails after a write");
  });
  CHECK_FALSE(s);
  auto targets = (*store)->targets();
  REQUIRE(targets);
  CHECK(targets->empty());
}

TEST_CASE("store refuses newer, older and foreign databases with both versions named", "[perfmodel][store]") {
  TempDir dir;
  SECTION("newer schema") {
    const std::string path = dir.file("new.sqlite");
    REQUIRE(BenchmarkStore::open(path));
    sql(path, "PRAGMA user_version = 7");
    auto store = BenchmarkStore::open(path);
    REQUIRE_FALSE(store);
    CHECK_THAT(store.error().message, Catch::Contains("version 7") && Catch::Contains("newer") &&
                                          Catch::Contains("version " + std::to_string(kStoreSchemaVersion)));
  }
  SECTION("older schema") {
    const std::string path = dir.file("old.sqlite");
    sql(path, "CREATE TABLE measurements (x); PRAGMA application_id = " + std::to_string(kStoreApplicationId) +
                  "; PRAGMA user_version = 0");
    auto store = BenchmarkStore::open(path);
    REQUIRE_FALSE(store);
    CHECK_THAT(store.error().message, Catch::Contains("version 0") && Catch::Contains("older") &&
                                          Catch::Contains("version " + std::to_string(kStoreSchemaVersion)));
  }
  SECTION("another application's database") {
    const std::string path = dir.file("other.sqlite");
    sql(path, "CREATE TABLE t (x)");
    auto store = BenchmarkStore::open(path);
    REQUIRE_FALSE(store);
    CHECK_THAT(store.error().message, Catch::Contains("not a kiln benchmark store"));
  }
  SECTION("not SQLite at all") {
    const std::string path = dir.file("junk.sqlite");
    std::ofstream(path) << std::string(4096, 'x');
    auto store = BenchmarkStore::open(path);
    REQUIRE_FALSE(store);
    CHECK_THAT(store.error().message, Catch::Contains("not a kiln benchmark store"));
  }
  SECTION("a fresh store has the current version and WAL") {
    const std::string path = dir.file("fresh.sqlite");
    REQUIRE(BenchmarkStore::open(path));
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK(sqlite3_column_int(st, 0) == kStoreSchemaVersion);
    sqlite3_finalize(st);
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
}
