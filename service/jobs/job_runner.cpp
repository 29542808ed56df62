#include "service/jobs/job_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api/description.h"
#include "containers/oci/digest.h"
#include "kernels/device/plan_runner.h"
#include "service/planning/plan_application.h"

namespace kiln::jobs {
namespace {

namespace fs = std::filesystem;

// Where kiln optimize's choice runs, from the optimize/report.json this job's compile stage
// wrote: device "cpu" or "cuda" and, on a GPU, the precision. Empty when nothing was optimized.
struct OptimizedChoice {
  std::string device, precision;
};
OptimizedChoice optimized_choice(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "optimize" / "report.json");
  if (!in) return {};
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded() || !report.contains("chosen") || !report["chosen"].is_object()) return {};
  const nlohmann::json& chosen = report["chosen"];
  OptimizedChoice out;
  if (chosen.contains("device") && chosen["device"].is_string()) out.device = chosen["device"].get<std::string>();
  if (chosen.contains("precision") && chosen["precision"].is_string()) out.precision = chosen["precision"].get<std::string>();
  if (!device_kind_from_name(out.device)) return {};
  if (out.device == "cuda" && !device_precision_from_name(out.precision)) return {};
  return out;
}

enum class Outcome { ok, failed, cancelled, stopped };

struct ChildResult {
  Outcome outcome = Outcome::ok;
  std::string reason;
};

// The last non-empty line of a stage's log: kiln's verbs end a failure with "kiln: error: ...".
std::string log_last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  if (last.size() > 500) last = last.substr(0, 500) + "...";
  return last;
}

Result<std::string> file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_REQUIRE(in, io, "cannot read '", path, "'");
  oci::Sha256 hash;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = in.gcount();
    if (n > 0) hash.update({reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(n)});
  }
  return hash.hex();
}

// The openapi Artifact.kind of a file the stages write; empty for files that are not artifacts.
std::string artifact_kind(const std::string& name) {
  const std::string ext = fs::path(name).extension().string();
  if (ext == ".kiln") return "kiln_plan";
  if (name == "image.oci.tar") return "oci_archive";
  if (name == "image.docker.tar") return "docker_archive";
  if (name == "Dockerfile") return "dockerfile";
  if (ext == ".def") return "apptainer_def";
  if (ext == ".slurm" || ext == ".sbatch") return "slurm_script";
  if (ext == ".yaml" || ext == ".yml") return "kubernetes_yaml";
  if (name.find("sbom") != std::string::npos) return "sbom";
  if (name == "report.json") return "report_json";
  if (ext == ".log") return "log";
  return "";
}

// Appended to a stage's log by the runner itself (what it decided, before the child's lines).
void log_append(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  out << "kiln serve: " << line << '\n';
}

}  // namespace

const std::vector<std::string>& job_stage_names() {
  static const std::vector<std::string> names = {"validate", "compile", "verify", "package", "report"};
  return names;
}

std::string job_dir(const std::string& data_dir, const std::string& id) {
  return (fs::path(data_dir) / "jobs" / id).string();
}

JobRunner::JobRunner(JobStore& store, JobRunnerOptions options) : store_(store), options_(std::move(options)) {
  if (options_.workers < 1) options_.workers = 1;
}

JobRunner::~JobRunner() { stop(); }

void JobRunner::start() {
  std::lock_guard lock(mu_);
  if (started_.load()) return;
  started_.store(true);
  for (int i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { worker(); });
}

void JobRunner::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_.store(true);
    wake_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();  // each worker kills its child when it sees stopping_
  threads_.clear();
}

void JobRunner::notify() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

Result<bool> JobRunner::cancel(const std::string& id) {
  KILN_ASSIGN(changed, store_.job_cancel(id, "cancelled by a DELETE request"));
  if (changed) {
    std::lock_guard lock(mu_);
    cancelled_[id] = true;
    if (auto it = children_.find(id); it != children_.end()) ::kill(-it->second, SIGKILL);
  }
  return changed;
}

void JobRunner::worker() {
  while (!stopping_.load()) {
    Result<std::optional<JobRecord>> claimed = store_.job_claim();
    if (!claimed) {
      std::cerr << "kiln serve: error: " << claimed.error().message << '\n';
    } else if (claimed->has_value()) {
      ++busy_;
      job_run(**claimed);
      --busy_;
      std::lock_guard lock(mu_);
      cancelled_.erase((*claimed)->id);
      continue;
    }
    std::unique_lock lock(mu_);
    // Polls too, so a job queued by another process sharing the store is picked up.
    cv_.wait_for(lock, std::chrono::seconds(2), [this] { return wake_; });
    wake_ = false;
  }
}

void JobRunner::job_run(const JobRecord& job) {
  const std::string dir = job_dir(options_.data_dir, job.id);
  const auto deadline = std::chrono::steady_clock::now() + options_.job_time_limit;
  auto is_cancelled = [&] {
    std::lock_guard lock(mu_);
    return cancelled_.count(job.id) > 0;
  };
  // The job's own stage list (a job with a model URL has `fetch` first), as stored.
  for (const StageRecord& recorded : job.stages) {
    const std::string& stage = recorded.name;
    if (recorded.state == "done" || recorded.state == "skipped") continue;
    if (options_.stage_pause.count() > 0) std::this_thread::sleep_for(options_.stage_pause);
    if (stopping_.load() || is_cancelled()) return;
    if (Status st = store_.stage_start(job.id, stage); !st) {
      (void)store_.job_finish(job.id, "failed", st.message());
      return;
    }
    const ChildResult r = [&] {
      ChildResult out;
      out.reason = stage_run(job, stage, dir, deadline);
      if (stopping_.load()) out.outcome = Outcome::stopped;
      else if (is_cancelled()) out.outcome = Outcome::cancelled;
      else if (!out.reason.empty()) out.outcome = Outcome::failed;
      return out;
    }();
    if (r.outcome == Outcome::stopped || r.outcome == Outcome::cancelled) return;
    if (r.outcome == Outcome::failed) {
      (void)store_.stage_finish(job.id, stage, "failed", r.reason);
      (void)store_.job_finish(job.id, "failed", "stage " + stage + ": " + r.reason);
      return;
    }
    if (Status st = store_.stage_finish(job.id, stage, "done", ""); !st) {
      (void)store_.job_finish(job.id, "failed", st.message());
      return;
    }
  }
  (void)store_.job_finish(job.id, "succeeded", "");
}

std::string JobRunner::stage_run(const JobRecord& job, const std::string& stage, const std::string& dir,
                                 std::chrono::steady_clock::time_point deadline) {
  const std::string& kiln = options_.kiln_exe;
  const std::string log = stage + ".log";
  if (stage == "validate") {
    std::string why = child_run(job.id, dir, {kiln, "validate", "description.yaml", "--kind", "application"}, "", log, deadline);
    if (!why.empty()) return why;
    return child_run(job.id, dir, {kiln, "validate", "target.yaml", "--kind", "target"}, "", log, deadline);
  }
  if (stage == kFetchStage) {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now()).count();
    return child_run(job.id, dir,
                     {kiln, "fetch-model", "description.yaml", "-o", "model.onnx", "--max-bytes", std::to_string(options_.max_model_bytes),
                      "--allow", options_.fetch_allow, "--time-limit", std::to_string(std::max<int64_t>(1, seconds))},
                     "", log, deadline);
  }
  if (stage == "compile") {
    const std::string db = benchmark_store_path();
    const std::string unplanned = optimize_refusal(dir, db);
    if (unplanned.empty()) {
      // Plan, then compile, verify and measure the best candidates; the choice is what `package` puts in the image.
      // The uploads replace the description's own paths, which point into the submitter's machine.
      std::vector<std::string> argv = {kiln, "optimize", "description.yaml", "--target", "target.yaml", "--db", db,
                                       "--model", "model.onnx", "-o", "optimize"};
      std::error_code ec;
      for (const auto& [file, option] : {std::pair{"calibration.npz", "--calibration-data"}, {"validation.npz", "--validation-data"}})
        if (fs::exists(fs::path(dir) / file, ec)) argv.insert(argv.end(), {option, file});
      if (std::string why = measuring_wait(job.id, (fs::path(dir) / log).string(), deadline); !why.empty()) return why;
      std::string why;
      {
        const std::lock_guard measuring(measuring_mu_, std::adopt_lock);  // taken by measuring_wait
        why = child_run(job.id, dir, argv, "", log, deadline);
      }
      if (!why.empty()) return why;
      fs::copy_file(fs::path(dir) / "optimize" / "model.kiln", fs::path(dir) / "model.kiln", fs::copy_options::overwrite_existing, ec);
      return ec ? "cannot copy the chosen model: " + ec.message() : "";
    }
    // For the target's nodes: GPU nodes get the CUDA pipeline, the plan `package` puts in their image.
    std::error_code ec;
    fs::remove_all(fs::path(dir) / "optimize", ec);  // an earlier run's choice must not reach the report
    log_append((fs::path(dir) / log).string(), "not planned (" + unplanned + "): compiling the target's default pipeline");
    return child_run(job.id, dir, {kiln, "compile", "model.onnx", "-o", "model.kiln", "--target", "target.yaml"}, "", log, deadline);
  }
  if (stage == "verify") {
    // The packaged plan against the original model, on the uploaded validation set when there is one;
    // a plan chosen for the GPU is verified by emulating its precision (this machine has no GPU to ask).
    std::vector<std::string> argv = {kiln, "verify", "model.kiln", "--reference", "model.onnx", "--json"};
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "validation.npz", ec)) argv.insert(argv.end(), {"--input", "validation.npz"});
    else argv.insert(argv.end(), {"--random", "16"});
    if (const OptimizedChoice chosen = optimized_choice(dir); chosen.device == "cuda")
      argv.insert(argv.end(), {"--device", "cuda", "--cuda-precision", chosen.precision, "--emulate"});
    return child_run(job.id, dir, argv, "verify.json", log, deadline);
  }
  if (stage == "package") {
    // The image runs where kiln optimize's choice runs: on a GPU node, its GPU at the chosen
    // precision, or its CPUs when a CPU candidate won.
    std::vector<std::string> argv = {kiln, "image", "model.kiln", "-o", "image", "--target", "target.yaml", "--json"};
    if (const OptimizedChoice chosen = optimized_choice(dir); !chosen.device.empty()) {
      argv.insert(argv.end(), {"--device", chosen.device});
      if (chosen.device == "cuda") argv.insert(argv.end(), {"--cuda-precision", chosen.precision});
    }
    return child_run(job.id, dir, argv, "package.json", log, deadline);
  }
  if (stage == "report") {
    // Records the artifacts the stages wrote and writes report.json (in-process: no untrusted
    // parsing happens here, only listing files this job's children wrote).
    std::vector<std::pair<std::string, std::string>> files;  // name, path relative to dir
    std::error_code ec;
    // Names are unique across these folders (the kubernetes/ files are deployment.yaml, job.yaml).
    for (const char* sub : {".", "image", "image/kubernetes", "image/bundle"}) {
      for (const auto& entry : fs::directory_iterator(fs::path(dir) / sub, ec)) {
        if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
        const std::string name = entry.path().filename().string();
        const std::string kind = artifact_kind(name);
        // The job's own folder also holds the uploads (description.yaml, target.yaml): from it
        // only the plan and the stage logs are artifacts; everything `kiln image` wrote is.
        if (kind.empty() || (std::string(sub) == "." && kind != "kiln_plan" && kind != "log")) continue;
        files.emplace_back(name, std::string(sub) == "." ? name : std::string(sub) + "/" + name);
      }
    }
    nlohmann::ordered_json artifacts = nlohmann::ordered_json::array();
    for (const auto& [name, rel] : files) {
      const std::string path = (fs::path(dir) / rel).string();
      Result<std::string> sha = file_sha256(path);
      if (!sha) return sha.error().message;
      ArtifactRecord a{name, artifact_kind(name), rel, static_cast<int64_t>(fs::file_size(path, ec)), *sha};
      if (Status st = store_.artifact_add(job.id, a); !st) return st.message();
      artifacts.push_back({{"name", a.name}, {"kind", a.kind}, {"bytes", a.bytes}, {"sha256", a.sha256},
                           {"url", "/v1/jobs/" + job.id + "/artifacts/" + a.name}});
    }
    nlohmann::ordered_json report = {{"job", {{"id", job.id}, {"name", job.name}}}, {"candidates", nlohmann::ordered_json::array()},
                                     {"artifacts", artifacts}};
    if (std::ifstream optimized(fs::path(dir) / "optimize" / "report.json"); optimized) {
      // kiln optimize's candidates (predicted beside measured), its choice and why.
      const nlohmann::ordered_json o = nlohmann::ordered_json::parse(optimized, nullptr, false);
      if (o.is_object()) {
        if (o.contains("candidates") && o["candidates"].is_array()) report["candidates"] = o["candidates"];
        if (o.contains("chosen") && o["chosen"].is_object() && o["chosen"].contains("name")) report["chosen"] = o["chosen"]["name"];
        if (o.contains("explanation")) report["explanation"] = o["explanation"];
      }
    }
    std::ifstream verify(fs::path(dir) / "verify.json");
    if (verify) {
      nlohmann::ordered_json v = nlohmann::ordered_json::parse(verify, nullptr, false);
      if (!v.is_discarded()) report["verification"] = v;
    }
    std::ofstream out(fs::path(dir) / "report.json");
    out << report.dump(2) << '\n';
    if (!out) return "cannot write report.json";
    out.close();
    Result<std::string> sha = file_sha256((fs::path(dir) / "report.json").string());
    if (!sha) return sha.error().message;
    ArtifactRecord a{"report.json", "report_json", "report.json",
                     static_cast<int64_t>(fs::file_size(fs::path(dir) / "report.json", ec)), *sha};
    if (Status st = store_.artifact_add(job.id, a); !st) return st.message();
    return "";
  }
  return "unknown stage '" + stage + "'";
}

std::string JobRunner::measuring_wait(const std::string& id, const std::string& log_path,
                                      std::chrono::steady_clock::time_point deadline) {
  bool said = false;
  while (!measuring_mu_.try_lock()) {
    if (!said) log_append(log_path, "waiting for another job's measurements to finish");
    said = true;
    {
      std::lock_guard lock(mu_);
      if (cancelled_.count(id)) return "cancelled";
    }
    if (std::string why = stop_reason(deadline); !why.empty()) return why;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

std::string JobRunner::stop_reason(std::chrono::steady_clock::time_point deadline) const {
  if (stopping_.load()) return "the server is stopping";
  if (std::chrono::steady_clock::now() > deadline)
    return "the job's time limit of " + std::to_string(options_.job_time_limit.count()) + " s was exceeded";
  return "";
}

// Absolute: the stages run in the job's folder.
std::string JobRunner::benchmark_store_path() const {
  return (fs::absolute(options_.data_dir) / "benchmarks.sqlite").string();
}

// Why the compile stage does not plan: nothing to price the target with (no stored profile, no
// spec prior). GPU nodes are planned too: kiln optimize verifies their candidates by emulation.
// Both documents passed the validate stage.
std::string JobRunner::optimize_refusal(const std::string& dir, const std::string& db) const {
  auto target = api::target_load((fs::path(dir) / "target.yaml").string());
  if (!target) return target.message();
  auto app = api::application_load((fs::path(dir) / "description.yaml").string());
  if (!app) return app.message();
  planning::PlanInputs in;
  in.app = &app.value();
  in.target = &target.value();
  in.target_source = "target.yaml";
  in.db = db;
  if (Status priced = planning::plan_target_check(in); !priced) return priced.message();
  return "";
}

std::string JobRunner::child_run(const std::string& id, const std::string& dir, const std::vector<std::string>& argv,
                                 const std::string& stdout_file, const std::string& log_file,
                                 std::chrono::steady_clock::time_point deadline) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  const std::string log_path = (fs::path(dir) / log_file).string();
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return "cannot open '" + log_path + "'";
  int out_fd = log_fd;
  if (!stdout_file.empty()) {
    const std::string out_path = (fs::path(dir) / stdout_file).string();
    out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
      ::close(log_fd);
      return "cannot open '" + out_path + "'";
    }
  }
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();

  pid_t pid;
  {
    std::lock_guard lock(mu_);
    if (cancelled_.count(id) || stopping_.load()) {
      ::close(log_fd);
      if (out_fd != log_fd) ::close(out_fd);
      if (null_fd >= 0) ::close(null_fd);
      return "cancelled";
    }
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the server died: so does the stage (a restart reruns it)
      if (::getppid() != parent) ::_exit(127);
      if (::chdir(dir.c_str()) != 0) ::_exit(127);
      if (null_fd >= 0) ::dup2(null_fd, 0);
      ::dup2(out_fd, 1);
      ::dup2(log_fd, 2);
      ::close_range(3, ~0U, 0);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    if (pid > 0) {
      ::setpgid(pid, pid);
      children_[id] = pid;
    }
  }
  ::close(log_fd);
  if (out_fd != log_fd) ::close(out_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (pid < 0) return "cannot start a process for the stage";

  std::string killed_for;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) break;
    if (killed_for.empty()) {
      killed_for = stop_reason(deadline);
      if (!killed_for.empty()) ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard lock(mu_);
    children_.erase(id);
  }
  if (!killed_for.empty()) return killed_for;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  std::ostringstream why;
  if (WIFSIGNALED(status)) why << "the stage's process died of signal " << WTERMSIG(status);
  else why << "'kiln " << argv[1] << "' exited " << WEXITSTATUS(status);
  const std::string last = log_last_line(log_path);
  if (!last.empty()) why << ": " << last;
  return why.str();
}

}  // namespace kiln::jobs
