// The service's job store: jobs, their stages, their artifacts and idempotency keys in one SQLite
// database (WAL) under the data directory, so a restarted server loses nothing. Schema and
// migrations: docs/job-store.md. One connection behind a mutex: callers on any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kernels/core/status.h"

namespace kiln::jobs {

inline constexpr int kJobStoreSchemaVersion = 2;

// Job states (openapi JobState) and stage states (openapi Stage.state), as stored.
inline constexpr const char* kJobStates[] = {"queued", "running", "succeeded", "failed", "cancelled"};
bool job_state_is_final(const std::string& state);

struct StageRecord {
  std::string name;
  std::string state = "pending";  // pending | running | done | failed | skipped
  std::string started_at, finished_at;  // RFC 3339 UTC, empty when not yet
  double seconds = 0;
  std::string message;
};

struct ArtifactRecord {
  std::string name;  // unique per job; the URL's last segment
  std::string kind;  // openapi Artifact.kind
  std::string path;  // relative to the job's directory; never taken from a request
  int64_t bytes = 0;
  std::string sha256;  // hex
};

struct JobRecord {
  std::string id;
  std::string name;  // the description's name
  std::string state = "queued";
  std::string stage;  // current or last stage; empty before the first
  double progress = 0;  // percent
  std::string created_at, started_at, finished_at;
  std::string error;
  int attempts = 0;  // runs started (a restart that resumes the job counts one more)
  std::string owner;  // the submitting token's id; empty: the local single user (--auth none)
  std::vector<StageRecord> stages;  // in run order
};

struct JobCreated {
  std::string id;
  bool created = false;   // false: an idempotent retry found the job the key first created
  bool conflict = false;  // the key was used with a different body
};

struct JobListQuery {
  std::string state;  // empty: any
  int limit = 50;
  std::string cursor;  // the last id of the previous page
  std::optional<std::string> owner;  // set: only that owner's jobs
};

// An API token as stored: never the token itself, only its SHA-256 (service/server/auth.h).
struct TokenRecord {
  std::string id;  // public; also the owner of the jobs the token submits
  std::string name;
  std::string scopes;  // comma-separated: submit, read, admin
  std::string sha256;  // hex of the whole token
  std::string created_at, revoked_at;  // revoked_at empty while valid
};

// A registered target: its document as validated JSON (the contract's TargetInfrastructure).
struct TargetRecord {
  std::string name;
  std::string kind;  // hpc, cloud, local
  std::string document;
  std::string updated_at;
};

std::string time_now_rfc3339();  // "2026-11-24T08:55:01.123Z"

class JobStore {
 public:
  // Opens or creates `path`; a newer schema than this build knows is refused.
  static Result<std::unique_ptr<JobStore>> open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Inserts a queued job with its stages pending, unless `idempotency_key` is set and already
  // names a job: then that job (same body hash) or a conflict. One transaction.
  Result<JobCreated> job_create(const JobRecord& job, const std::vector<std::string>& stages,
                                const std::string& idempotency_key, const std::string& body_sha256);
  Result<std::optional<JobRecord>> job_get(const std::string& id);
  // Newest first; ids sort by creation (see job_id_new), so the cursor is an id.
  Result<std::vector<JobRecord>> job_list(const JobListQuery& query);
  // The oldest queued job, now running (attempts + 1); nullopt when none is queued.
  Result<std::optional<JobRecord>> job_claim();
  Status stage_start(const std::string& id, const std::string& stage);
  // `state`: done, failed or skipped; updates the job's progress.
  Status stage_finish(const std::string& id, const std::string& stage, const std::string& state, const std::string& message);
  // Finishes a running job (succeeded or failed); a job cancelled meanwhile stays cancelled.
  Status job_finish(const std::string& id, const std::string& state, const std::string& error);
  // Queued or running → cancelled; false when the job was already final (or unknown).
  Result<bool> job_cancel(const std::string& id, const std::string& reason);
  // After a restart: jobs left running go back to the queue to resume from their last finished
  // stage, or fail with the reason once they have been started `max_attempts` times. Returns how
  // many were requeued.
  Result<int> jobs_recover(int max_attempts);
  Status artifact_add(const std::string& id, const ArtifactRecord& artifact);
  Result<std::vector<ArtifactRecord>> artifacts_list(const std::string& id);
  Result<std::map<std::string, int64_t>> job_counts();  // by state
  // Seconds of every stage that finished done, by stage name (for the metrics' histograms).
  Result<std::vector<std::pair<std::string, double>>> stage_durations();

  // Tokens (job_store_tokens.cpp).
  Status token_add(const TokenRecord& token);
  Result<std::optional<TokenRecord>> token_get(const std::string& id);
  Result<std::vector<TokenRecord>> token_list();
  // False when no such token, or it was already revoked.
  Result<bool> token_revoke(const std::string& id);

  // Registered targets (job_store_targets.cpp). target_put returns true when it created the name.
  Result<bool> target_put(const TargetRecord& target);
  Result<std::optional<TargetRecord>> target_get(const std::string& name);
  Result<std::vector<TargetRecord>> target_list();
  Result<bool> target_delete(const std::string& name);

  struct Db;

 private:
  explicit JobStore(std::unique_ptr<Db> db);
  std::mutex mu_;
  std::unique_ptr<Db> db_;
};

// A new job id: creation time in ms (hex, fixed width, strictly increasing within a process, so
// ids sort by age) + 64 random bits.
std::string job_id_new();
// Whether `id` has the form job_id_new makes (checked before any lookup or path use).
bool job_id_valid(const std::string& id);

}  // namespace kiln::jobs
