// The benchmark store: one SQLite file (docs/benchmark-store.md) holding targets (fingerprints),
// runs of `kiln bench-target`, measurements and the benchmarks skipped with their reason.
// Each write commits on its own unless inside transaction(), so an interrupted run keeps every
// point measured so far; WAL lets readers (the planner) read while a benchmark writes.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/measurement.h"

namespace kiln::perf {

inline constexpr int kStoreSchemaVersion = 1;          // PRAGMA user_version
inline constexpr int32_t kStoreApplicationId = 0x6B6C6E62;  // PRAGMA application_id: "klnb"

struct StoredTarget {
  TargetFingerprint fingerprint;
  std::string source;  // "measured" (on this machine) or "imported" (from a JSON profile)
  int64_t measurements = 0;
  std::string first_seen;
  std::string last_measured;  // empty without measurements
};

struct SkippedBenchmark {
  std::string kind;   // kKindPeak, ...
  std::string dtype;
  std::string reason;
};

struct RunRecord {
  int64_t id = 0;
  std::string started_at, finished_at;
  std::string status;   // "running", "complete", "interrupted", "failed", "imported"
  std::string options;  // the command line's choices, e.g. "--quick --only sweep --threads 1,2"
  int64_t measured = 0, skipped = 0;
};

class BenchmarkStore {
 public:
  // Opens or creates the store at `path`. A file that is not a kiln store, or whose schema version
  // is older or newer than kStoreSchemaVersion, is refused with a message naming both versions.
  static Result<std::unique_ptr<BenchmarkStore>> open(const std::string& path);
  ~BenchmarkStore();
  BenchmarkStore(const BenchmarkStore&) = delete;
  BenchmarkStore& operator=(const BenchmarkStore&) = delete;

  // Inserts the target, or refreshes its informative fields (host, usable threads) when known.
  Status target_put(const TargetFingerprint& fp, const std::string& source);
  Result<std::vector<StoredTarget>> targets();

  Result<int64_t> run_begin(const std::string& target_id, const std::string& options, const std::string& status = "running");
  Status run_finish(int64_t run_id, const std::string& status, int64_t measured, int64_t skipped);
  Result<std::vector<RunRecord>> runs(const std::string& target_id);

  // Inserts or replaces the measurement with the same (target, kind, key, dtype, threads).
  Status measurement_put(const std::string& target_id, int64_t run_id, const Measurement& m);
  Result<std::vector<Measurement>> measurements(const std::string& target_id);
  // "kind|key|dtype|threads" of every stored measurement of the target (measurement_identity).
  // `quiet_only`: leave out points measured under load (load_avg above threads + kLoadSlack).
  Result<std::set<std::string>> measurement_identities(const std::string& target_id, bool quiet_only = false);

  Status skipped_put(const std::string& target_id, const SkippedBenchmark& s);
  Result<std::vector<SkippedBenchmark>> skipped(const std::string& target_id);

  // Runs `fn` in one transaction: committed when it succeeds, rolled back (nothing written) when
  // it fails.
  Status transaction(const std::function<Status()>& fn);

  const std::string& path() const { return path_; }

  struct Db;  // defined in store.cpp

 private:
  BenchmarkStore(std::unique_ptr<Db> db, std::string path);
  std::unique_ptr<Db> db_;
  std::string path_;
};

std::string measurement_identity(const Measurement& m);

// Now, UTC, ISO 8601 with seconds ("2026-11-24T07:41:02Z").
std::string utc_now();

}  // namespace kiln::perf
