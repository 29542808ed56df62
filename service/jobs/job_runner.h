// Runs queued jobs on a bounded pool of worker threads. Each stage of a job runs in a child
// process (the kiln binary itself with the stage's verb, the job's directory as its working
// directory, output to <stage>.log there), so a crash or runaway in a stage fails that job only.
// Stages already done (recorded in the store) are skipped: a job interrupted by a restart
// resumes from its last finished stage. A per-job time limit and cancellation kill the child's
// process group.
#pragma once

#include <atomic>
#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "service/jobs/job_store.h"

namespace kiln::jobs {

// The stages of a job, in order (names from openapi StageName).
const std::vector<std::string>& job_stage_names();
// The stage before those of a job whose model is given by URL: `kiln fetch-model` downloads it
// (url_fetch.h) as model.onnx.
inline constexpr const char* kFetchStage = "fetch";

struct JobRunnerOptions {
  std::string data_dir;                  // jobs live in DATA_DIR/jobs/<id>/
  std::string kiln_exe = "/proc/self/exe";  // the binary whose verbs run the stages
  int workers = 2;
  std::chrono::seconds job_time_limit{3600};
  int max_attempts = 3;  // starts of one job across restarts before it fails
  uint64_t max_model_bytes = uint64_t{1} << 30;  // the fetch stage's size cap
  std::string fetch_allow;  // CIDR,... the fetch stage may connect to besides public addresses
  // Tests only: a pause before each stage, widening the window in which a restart interrupts a job.
  std::chrono::milliseconds stage_pause{0};
};

// A job's directory; `id` must satisfy job_id_valid.
std::string job_dir(const std::string& data_dir, const std::string& id);

class JobRunner {
 public:
  JobRunner(JobStore& store, JobRunnerOptions options);
  ~JobRunner();  // stops
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  void start();
  // Stops taking jobs and kills running children; their jobs stay `running` in the store, so
  // the next start (jobs_recover) resumes them from their last finished stage.
  void stop();
  void notify();  // a job was queued
  // Cancels a queued or running job (killing its child); false when it was already final.
  Result<bool> cancel(const std::string& id);
  int busy() const { return busy_.load(); }
  int workers() const { return options_.workers; }
  bool running() const { return started_ && !stopping_.load(); }

 private:
  void worker();
  void job_run(const JobRecord& job);
  // Runs argv in the job's directory; returns "" on success, else why it failed.
  std::string child_run(const std::string& id, const std::string& dir, const std::vector<std::string>& argv,
                        const std::string& stdout_file, const std::string& log_file,
                        std::chrono::steady_clock::time_point deadline);
  std::string stage_run(const JobRecord& job, const std::string& stage, const std::string& dir,
                        std::chrono::steady_clock::time_point deadline);
  std::string benchmark_store_path() const;  // DATA_DIR/benchmarks.sqlite, as POST /v1/plan reads it
  std::string optimize_refusal(const std::string& dir, const std::string& db) const;
  // Takes measuring_mu_, waiting while another job measures; "" once held, else why it gave up
  // (cancelled, stopping, past the deadline).
  std::string measuring_wait(const std::string& id, const std::string& log_path, std::chrono::steady_clock::time_point deadline);
  // Why a running stage must give up now (the server is stopping, the job is past its deadline), or "".
  std::string stop_reason(std::chrono::steady_clock::time_point deadline) const;

  JobStore& store_;
  JobRunnerOptions options_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> busy_{0};
  std::map<std::string, int> children_;  // job id → child pid (its process group)
  std::map<std::string, bool> cancelled_;  // job ids cancelled while running
  // Held while a job's compile stage measures candidates (kiln optimize): two at once on the same
  // cores would time each other.
  std::mutex measuring_mu_;
};

}  // namespace kiln::jobs
