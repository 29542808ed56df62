// The application description and the target infrastructure as typed structs, read from YAML
// or JSON and validated against the schemas in api/schemas/ (compiled into the binary). The
// schemas are the contract; these structs are what the rest of kiln reads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/document.h"
#include "api/error.h"

namespace kiln::api {

// ---- application description (api/schemas/application.schema.json) ----

enum class Task { inference };
enum class Objective { latency, throughput, cost };
enum class Precision { fp32, fp16, bf16, int8 };

struct ModelRef {
  std::string path;    // exactly one of path and url is set; relative to the description file
  std::string url;     // http(s) only
  std::string sha256;  // optional, lower-case hex
};

struct Dim {
  int64_t value = -1;  // >= 1 when fixed
  std::string symbol;  // e.g. "batch" when symbolic
  bool is_symbolic() const { return !symbol.empty(); }
};

struct InputSpec {
  std::string name;
  std::vector<Dim> shape;
  std::string dtype;  // float32, float16, bfloat16, int8, uint8, int32, int64, bool
};

struct Normalize {
  double scale = 1.0;
  std::vector<double> mean, std;
};

struct Dataset {
  enum class Format { npz, idx };
  Format format = Format::npz;
  std::string npz;            // format npz
  std::string input_entry;    // npz array with the samples; empty: the model's only input
  std::string labels_entry;   // npz array with the labels; empty: none
  std::string images, labels;  // format idx
  std::optional<Normalize> normalize;
  std::optional<int64_t> limit;
};

struct Constraints {
  std::optional<double> max_latency_ms, min_throughput_per_s, max_accuracy_drop, max_memory_mb, max_cost_per_million;
  bool latency_p99 = false;  // max_latency_ms bounds the 99th percentile, not the median
};

struct Optimizations {
  std::vector<Precision> precisions;  // default: all
  std::vector<int64_t> batch_sizes;   // default: empty = the planner's choice
  bool default_passes = true;
  std::vector<std::string> passes;  // when !default_passes
};

struct ApplicationDescription {
  std::string source;  // where it was read from (relative paths resolve against its folder)
  std::string name;
  Task task = Task::inference;
  ModelRef model;
  std::vector<InputSpec> inputs;  // in document order
  std::optional<Dataset> calibration, validation;
  Objective objective = Objective::throughput;
  Constraints constraints;
  Optimizations optimizations;
  std::string target;      // a registered target's name, or empty
  std::string image_push;  // image reference to push to, or empty
};

// ---- target infrastructure (api/schemas/target.schema.json) ----

enum class TargetKind { hpc, cloud, local };
enum class Scheduler { slurm, kubernetes, none };
enum class ContainerRuntime { apptainer, singularity, docker, podman };

struct Cpu {
  std::string model;
  int64_t cores = 0;
  int64_t threads_per_core = 1;
  std::optional<double> frequency_ghz;
  std::vector<std::string> isa;
};

struct Gpu {
  std::string model;
  int64_t count = 0;
  double memory_gb = 0;
};

struct NodeType {
  Cpu cpu;
  double memory_gb = 0;
  std::vector<Gpu> gpus;
};

struct SlurmOptions {
  std::string partition, account, qos, time_limit, constraint;
};

struct KubernetesOptions {
  std::string namespace_name, service_account, image_pull_secret;
  std::map<std::string, std::string> node_selector;
};

struct TargetInfrastructure {
  std::string source;
  std::string name, description;
  TargetKind kind = TargetKind::local;
  Scheduler scheduler = Scheduler::none;
  ContainerRuntime container_runtime = ContainerRuntime::docker;
  std::string registry;
  int64_t nodes = 1;
  std::optional<double> price_per_node_hour;
  std::string currency = "USD";
  NodeType node;
  std::optional<SlurmOptions> slurm;
  std::optional<KubernetesOptions> kubernetes;
};

// ---- reading and validating ----

enum class DescriptionKind { application, target };

const char* description_kind_name(DescriptionKind kind);  // "application", "target"
const char* objective_name(Objective v);
const char* precision_name(Precision v);
const char* target_kind_name(TargetKind v);
const char* scheduler_name(Scheduler v);
const char* container_runtime_name(ContainerRuntime v);

// The schema text compiled into the binary.
std::string_view schema_text(DescriptionKind kind);

// Tells the two apart by their fields (model/inputs vs kind/scheduler/node); nullopt when the
// document has neither's distinctive fields.
std::optional<DescriptionKind> description_kind_detect(const nlohmann::ordered_json& root);

// Schema and cross-field checks on a parsed document; empty when valid.
std::vector<Error> description_validate(const Document& doc, DescriptionKind kind);

Result<ApplicationDescription> application_from_document(const Document& doc);
Result<TargetInfrastructure> target_from_document(const Document& doc);

// Text (YAML or JSON) → validated struct. `source` names the text in errors.
Result<ApplicationDescription> application_parse(std::string_view text, std::string_view source,
                                                 DocumentFormat format = DocumentFormat::automatic);
Result<TargetInfrastructure> target_parse(std::string_view text, std::string_view source,
                                          DocumentFormat format = DocumentFormat::automatic);
// File → validated struct.
Result<ApplicationDescription> application_load(const std::string& path);
Result<TargetInfrastructure> target_load(const std::string& path);

}  // namespace kiln::api
