#include "api/description.h"

#include <algorithm>
#include <limits>

#include "api/limits.h"
#include "api/schema_validator.h"
#include "api/schemas_embedded.h"

namespace kiln::api {
namespace {

using json = nlohmann::ordered_json;

const SchemaValidator& validator(DescriptionKind kind) {
  // Parsed once per process; validate() is const, so concurrent requests share them.
  static const SchemaValidator application(json::parse(embedded::kApplicationSchema));
  static const SchemaValidator target(json::parse(embedded::kTargetSchema));
  return kind == DescriptionKind::application ? application : target;
}

Error invalid(const Document& doc, std::string pointer, std::string message) {
  const int line = doc.line_of(pointer);
  return Error{ErrorCode::invalid, doc.source, std::move(pointer), line, 0, std::move(message)};
}

std::string str(const json& obj, const char* key) { return obj.contains(key) ? obj[key].get<std::string>() : std::string(); }

std::optional<double> num(const json& obj, const char* key) {
  if (!obj.contains(key)) return std::nullopt;
  return obj[key].get<double>();
}

// A JSON integer the schema accepted; one written as a float (2e3, or digits past int64's range,
// which the parser reads as a double) saturates rather than overflowing the conversion.
int64_t integer(const json& v) {
  if (!v.is_number_float()) return v.get<int64_t>();
  const double d = v.get<double>();
  if (!(d > -9.2e18)) return std::numeric_limits<int64_t>::min();
  if (!(d < 9.2e18)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(d);
}

template <typename Enum, size_t N>
Enum enum_from(const std::string& name, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (name == names[i]) return static_cast<Enum>(i);
  return static_cast<Enum>(0);  // unreachable after schema validation
}

constexpr const char* kObjectives[] = {"latency", "throughput", "cost"};
constexpr const char* kPrecisions[] = {"fp32", "fp16", "bf16", "int8"};
constexpr const char* kTargetKinds[] = {"hpc", "cloud", "local"};
constexpr const char* kSchedulers[] = {"slurm", "kubernetes", "none"};
constexpr const char* kRuntimes[] = {"apptainer", "singularity", "docker", "podman"};

Dataset dataset_from(const json& v) {
  Dataset d;
  if (v.is_string()) {
    d.npz = v.get<std::string>();
    return d;
  }
  if (v.contains("images")) {
    d.format = Dataset::Format::idx;
    d.images = str(v, "images");
    d.labels = str(v, "labels");
    if (v.contains("normalize")) {
      const json& n = v["normalize"];
      Normalize norm;
      norm.scale = n["scale"].get<double>();
      if (n.contains("mean")) norm.mean = n["mean"].get<std::vector<double>>();
      if (n.contains("std")) norm.std = n["std"].get<std::vector<double>>();
      d.normalize = norm;
    }
  } else {
    d.npz = str(v, "npz");
    d.input_entry = str(v, "input");
    d.labels_entry = str(v, "labels");
  }
  if (v.contains("limit")) d.limit = integer(v["limit"]);
  return d;
}

// Rules the schema cannot state (or states badly): each names the field to change.
std::vector<Error> cross_check_application(const Document& doc) {
  std::vector<Error> errors;
  const json& root = doc.root;
  if (root.contains("data"))
    for (const char* part : {"calibration", "validation"}) {
      if (!root["data"].contains(part)) continue;
      const json& d = root["data"][part];
      if (d.is_object() && d.contains("normalize")) {
        const json& n = d["normalize"];
        if (n.contains("mean") && n.contains("std") && n["mean"].size() != n["std"].size())
          errors.push_back(invalid(doc, std::string("/data/") + part + "/normalize/std",
                                   "expected as many values as mean (" + std::to_string(n["mean"].size()) + "), got " +
                                       std::to_string(n["std"].size())));
      }
    }
  return errors;
}

std::vector<Error> cross_check_target(const Document& doc) {
  std::vector<Error> errors;
  const json& root = doc.root;
  const std::string scheduler = root["scheduler"].get<std::string>();
  const std::string kind = root["kind"].get<std::string>();
  if (root.contains("slurm") && scheduler != "slurm")
    errors.push_back(invalid(doc, "/slurm", "only allowed with scheduler: slurm (scheduler is " + scheduler + ")"));
  if (root.contains("kubernetes") && scheduler != "kubernetes")
    errors.push_back(invalid(doc, "/kubernetes", "only allowed with scheduler: kubernetes (scheduler is " + scheduler + ")"));
  if (kind == "local" && scheduler != "none")
    errors.push_back(invalid(doc, "/scheduler", "expected \"none\" for kind: local (this machine), got \"" + scheduler + "\""));
  const std::string runtime = root["container_runtime"].get<std::string>();
  if (scheduler == "kubernetes" && runtime != "docker" && runtime != "podman")
    errors.push_back(invalid(doc, "/container_runtime",
                             "expected \"docker\" or \"podman\" with scheduler: kubernetes (it runs OCI images), got \"" +
                                 runtime + "\""));
  return errors;
}

}  // namespace

const char* description_kind_name(DescriptionKind kind) {
  return kind == DescriptionKind::application ? "application" : "target";
}
const char* objective_name(Objective v) { return kObjectives[static_cast<int>(v)]; }
const char* precision_name(Precision v) { return kPrecisions[static_cast<int>(v)]; }
const char* target_kind_name(TargetKind v) { return kTargetKinds[static_cast<int>(v)]; }
const char* scheduler_name(Scheduler v) { return kSchedulers[static_cast<int>(v)]; }
const char* container_runtime_name(ContainerRuntime v) { return kRuntimes[static_cast<int>(v)]; }

std::string_view schema_text(DescriptionKind kind) {
  return kind == DescriptionKind::application ? embedded::kApplicationSchema : embedded::kTargetSchema;
}

std::optional<DescriptionKind> description_kind_detect(const json& root) {
  if (!root.is_object()) return std::nullopt;
  const bool app = root.contains("model") || root.contains("inputs") || root.contains("objective");
  const bool target = root.contains("scheduler") || root.contains("node") || root.contains("container_runtime") ||
                      root.contains("kind");
  if (app == target) return std::nullopt;
  return app ? DescriptionKind::application : DescriptionKind::target;
}

std::vector<Error> description_validate(const Document& doc, DescriptionKind kind) {
  std::vector<Error> errors;
  for (Violation& v : validator(kind).validate(doc.root, limits::kMaxReportedErrors))
    errors.push_back(invalid(doc, std::move(v.pointer), std::move(v.message)));
  if (!errors.empty()) return errors;
  return kind == DescriptionKind::application ? cross_check_application(doc) : cross_check_target(doc);
}

Result<ApplicationDescription> application_from_document(const Document& doc) {
  if (std::vector<Error> errors = description_validate(doc, DescriptionKind::application); !errors.empty()) return errors;
  const json& r = doc.root;
  ApplicationDescription a;
  a.source = doc.source;
  a.name = r["name"].get<std::string>();
  a.model.path = str(r["model"], "path");
  a.model.url = str(r["model"], "url");
  a.model.sha256 = str(r["model"], "sha256");
  for (auto it = r["inputs"].begin(); it != r["inputs"].end(); ++it) {
    InputSpec in;
    in.name = it.key();
    in.dtype = it.value()["dtype"].get<std::string>();
    for (const json& d : it.value()["shape"]) {
      Dim dim;
      if (d.is_string()) dim.symbol = d.get<std::string>();
      else dim.value = integer(d);
      in.shape.push_back(dim);
    }
    a.inputs.push_back(std::move(in));
  }
  if (r.contains("data")) {
    if (r["data"].contains("calibration")) a.calibration = dataset_from(r["data"]["calibration"]);
    if (r["data"].contains("validation")) a.validation = dataset_from(r["data"]["validation"]);
  }
  if (r.contains("objective")) a.objective = enum_from<Objective>(r["objective"].get<std::string>(), kObjectives);
  if (r.contains("constraints")) {
    const json& c = r["constraints"];
    a.constraints.max_latency_ms = num(c, "max_latency_ms");
    a.constraints.min_throughput_per_s = num(c, "min_throughput_per_s");
    a.constraints.max_accuracy_drop = num(c, "max_accuracy_drop");
    a.constraints.max_memory_mb = num(c, "max_memory_mb");
    a.constraints.max_cost_per_million = num(c, "max_cost_per_million");
    a.constraints.latency_p99 = c.value("latency_percentile", std::string("p50")) == "p99";
  }
  a.optimizations.precisions = {Precision::fp32, Precision::fp16, Precision::bf16, Precision::int8};
  if (r.contains("optimizations")) {
    const json& o = r["optimizations"];
    if (o.contains("precisions")) {
      a.optimizations.precisions.clear();
      for (const json& p : o["precisions"])
        a.optimizations.precisions.push_back(enum_from<Precision>(p.get<std::string>(), kPrecisions));
    }
    if (o.contains("batch_sizes"))
      for (const json& b : o["batch_sizes"]) a.optimizations.batch_sizes.push_back(integer(b));
    if (o.contains("passes") && o["passes"].is_array()) {
      a.optimizations.default_passes = false;
      a.optimizations.passes = o["passes"].get<std::vector<std::string>>();
    }
  }
  a.target = str(r, "target");
  if (r.contains("image")) a.image_push = str(r["image"], "push");
  return a;
}

Result<TargetInfrastructure> target_from_document(const Document& doc) {
  if (std::vector<Error> errors = description_validate(doc, DescriptionKind::target); !errors.empty()) return errors;
  const json& r = doc.root;
  TargetInfrastructure t;
  t.source = doc.source;
  t.name = r["name"].get<std::string>();
  t.description = str(r, "description");
  t.kind = enum_from<TargetKind>(r["kind"].get<std::string>(), kTargetKinds);
  t.scheduler = enum_from<Scheduler>(r["scheduler"].get<std::string>(), kSchedulers);
  t.container_runtime = enum_from<ContainerRuntime>(r["container_runtime"].get<std::string>(), kRuntimes);
  t.registry = str(r, "registry");
  if (r.contains("nodes")) t.nodes = integer(r["nodes"]);
  t.price_per_node_hour = num(r, "price_per_node_hour");
  if (r.contains("currency")) t.currency = str(r, "currency");
  const json& n = r["node"];
  t.node.cpu.model = str(n["cpu"], "model");
  t.node.cpu.cores = integer(n["cpu"]["cores"]);
  if (n["cpu"].contains("threads_per_core")) t.node.cpu.threads_per_core = integer(n["cpu"]["threads_per_core"]);
  t.node.cpu.frequency_ghz = num(n["cpu"], "frequency_ghz");
  if (n["cpu"].contains("isa")) t.node.cpu.isa = n["cpu"]["isa"].get<std::vector<std::string>>();
  t.node.memory_gb = n["memory_gb"].get<double>();
  if (n.contains("gpus"))
    for (const json& g : n["gpus"])
      t.node.gpus.push_back(Gpu{g["model"].get<std::string>(), integer(g["count"]), g["memory_gb"].get<double>()});
  if (r.contains("slurm")) {
    const json& s = r["slurm"];
    t.slurm = SlurmOptions{str(s, "partition"), str(s, "account"), str(s, "qos"), str(s, "time_limit"), str(s, "constraint")};
  }
  if (r.contains("kubernetes")) {
    const json& k = r["kubernetes"];
    KubernetesOptions opts{str(k, "namespace"), str(k, "service_account"), str(k, "image_pull_secret"), {}};
    if (k.contains("node_selector"))
      for (auto it = k["node_selector"].begin(); it != k["node_selector"].end(); ++it)
        opts.node_selector[it.key()] = it.value().get<std::string>();
    t.kubernetes = std::move(opts);
  }
  return t;
}

Result<ApplicationDescription> application_parse(std::string_view text, std::string_view source, DocumentFormat format) {
  Result<Document> doc = document_parse(text, source, format);
  if (!doc) return doc.errors();
  return application_from_document(doc.value());
}

Result<TargetInfrastructure> target_parse(std::string_view text, std::string_view source, DocumentFormat format) {
  Result<Document> doc = document_parse(text, source, format);
  if (!doc) return doc.errors();
  return target_from_document(doc.value());
}

Result<ApplicationDescription> application_load(const std::string& path) {
  Result<Document> doc = document_read(path);
  if (!doc) return doc.errors();
  return application_from_document(doc.value());
}

Result<TargetInfrastructure> target_load(const std::string& path) {
  Result<Document> doc = document_read(path);
  if (!doc) return doc.errors();
  return target_from_document(doc.value());
}

}  // namespace kiln::api
