// kiln verify MODEL|model.kiln: runs the compiled model and the fp32 reference on the same data
// and reports how far apart they are (and, with labels, both accuracies). Exits 1 when a stated
// tolerance (--max-accuracy-drop, --min-cosine, --min-top1-agreement) is not met.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "compilers/passes/pipeline.h"
#include "kernels/io/idx.h"
#include "kernels/io/npy.h"
#include "kernels/io/npz.h"
#include "kernels/io/plan_io.h"
#include "kernels/plan_file.h"
#include "kernels/verify/verify.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"

namespace kiln::cli {
namespace {

struct VerifyCliOptions {
  std::string model;
  DimOptions dims;
  std::string passes;  // empty: the default pipeline
  std::string input;
  std::string labels_entry = "labels";
  std::string idx_images, idx_labels;
  float mean = 0.0f, std = 1.0f;
  int64_t random = 0;
  uint32_t seed = 1;
  int64_t limit = 0;
  int threads = 0;
  bool json = false;
  double max_accuracy_drop = NAN, min_cosine = NAN, min_top1 = NAN;
};

constexpr int64_t kDefaultRandomSamples = 64;

// First `limit` samples (all when limit is 0 or larger than the set).
Tensor first_samples(const Tensor& t, int64_t limit) {
  if (limit <= 0 || t.rank() == 0 || t.dim(0) <= limit) return t;
  Shape shape = t.shape();
  shape[0] = limit;
  Tensor out = Tensor::zeros(t.dtype(), shape);
  std::memcpy(out.raw(), t.raw(), out.nbytes());
  return out;
}

Result<VerifyData> load_user_data(const VerifyCliOptions& opts, const Plan& plan) {
  VerifyData data;
  if (!opts.idx_images.empty()) {
    KILN_REQUIRE(plan.inputs.size() == 1, invalid_argument, "IDX images feed single-input models; this one has ",
                 plan.inputs.size(), " inputs (give a .npz with one entry per input)");
    KILN_ASSIGN(images, idx_read_images(opts.idx_images, {255.0f, opts.mean, opts.std}));
    data.inputs.push_back(std::move(images));
    data.source = "IDX images " + opts.idx_images + " as (p/255 - " + std::to_string(opts.mean) + ") / " +
                  std::to_string(opts.std);
    if (!opts.idx_labels.empty()) {
      KILN_ASSIGN(labels, idx_read_labels(opts.idx_labels));
      KILN_REQUIRE(labels.dim(0) == data.inputs[0].dim(0), invalid_argument, "'", opts.idx_labels, "' has ",
                   labels.dim(0), " labels but '", opts.idx_images, "' has ", data.inputs[0].dim(0), " images");
      data.labels = std::move(labels);
      data.source += ", labels " + opts.idx_labels;
    }
  } else {
    const std::string ext = std::filesystem::path(opts.input).extension().string();
    NamedTensors entries;
    if (ext == ".npy") {
      KILN_ASSIGN(t, npy_read_file(opts.input));
      entries.emplace_back(plan.inputs.empty() ? "input" : plan.inputs[0].name, std::move(t));
    } else {
      KILN_REQUIRE(ext == ".npz", invalid_argument, "input file '", opts.input, "' must be .npy or .npz");
      KILN_ASSIGN(all, npz_read_file(opts.input));
      for (auto& [name, t] : all) {
        if (name == opts.labels_entry) {
          KILN_ASSIGN(labels, idx_labels_to_int64(t, "entry '" + name + "' of " + opts.input));
          data.labels = std::move(labels);
        } else {
          entries.emplace_back(name, std::move(t));
        }
      }
    }
    std::vector<std::string> ignored;
    KILN_ASSIGN(inputs, plan_inputs_match(entries, plan, opts.input, ignored));
    for (const std::string& name : ignored)
      std::cerr << "note: ignoring entry '" << name << "' of " << opts.input << " (not a model input)\n";
    data.inputs = std::move(inputs);
    data.source = opts.input + (data.labels ? " (labels from entry '" + opts.labels_entry + "')" : "");
  }
  if (opts.limit > 0) {
    for (Tensor& t : data.inputs) t = first_samples(t, opts.limit);
    if (data.labels) data.labels = first_samples(*data.labels, opts.limit);
    data.source += " (first " + std::to_string(opts.limit) + " samples)";
  }
  return data;
}

// Each stated tolerance, checked on every output it applies to; the failures as one message.
std::string tolerance_failures(const VerifyCliOptions& opts, const VerifyReport& report) {
  std::string failures;
  const auto fail = [&](const std::string& s) { failures += (failures.empty() ? "" : "; ") + s; };
  const bool any = !std::isnan(opts.max_accuracy_drop) || !std::isnan(opts.min_cosine) || !std::isnan(opts.min_top1);
  bool accuracy_checked = false;
  for (const OutputMetrics& m : report.outputs) {
    if (any && m.nonfinite > 0) fail("output '" + m.name + "' has " + std::to_string(m.nonfinite) + " NaN/inf values");
    if (!std::isnan(opts.min_cosine) && !(m.cosine >= opts.min_cosine))
      fail("output '" + m.name + "' cosine " + std::to_string(m.cosine) + " < --min-cosine " + std::to_string(opts.min_cosine));
    if (!std::isnan(opts.min_top1) && m.classifier && !(m.top1_agreement >= opts.min_top1))
      fail("output '" + m.name + "' top-1 agreement " + std::to_string(m.top1_agreement) + " < --min-top1-agreement " +
           std::to_string(opts.min_top1));
    if (!std::isnan(opts.max_accuracy_drop) && m.has_labels) {
      accuracy_checked = true;
      if (!(m.accuracy_drop <= opts.max_accuracy_drop))
        fail("output '" + m.name + "' accuracy drop " + std::to_string(m.accuracy_drop) + " > --max-accuracy-drop " +
             std::to_string(opts.max_accuracy_drop));
    }
  }
  if (!std::isnan(opts.max_accuracy_drop) && !accuracy_checked)
    fail("--max-accuracy-drop needs labelled data and a classifier output ([N, classes]); none was measured");
  return failures;
}

int run_verify(VerifyCliOptions opts) {
  const int sources = !opts.input.empty() + !opts.idx_images.empty() + (opts.random > 0);
  if (sources > 1) return report_error("give one data source: --input, --idx-images or --random");
  if (!opts.idx_labels.empty() && opts.idx_images.empty()) return report_error("--idx-labels needs --idx-images");
  if (opts.std == 0.0f) return report_error("--std must not be zero");

  Plan compiled, reference;
  std::string reference_what;
  if (is_plan_file(opts.model)) {
    if (!opts.passes.empty()) return report_error("--passes applies to ONNX models; '" + opts.model + "' is compiled already");
    auto loaded = plan_read_file(opts.model);
    if (!loaded) return report_error(loaded.error().message);
    compiled = std::move(loaded->plan);
    reference = compiled;
    reference_what = "the same plan on the reference executor (a .kiln file keeps no pre-pass plan; "
                     "verify the ONNX model to compare against the original graph)";
  } else {
    auto model = compile_model({opts.model, opts.dims, pipeline_parse(opts.passes.empty() ? "default" : opts.passes), {}, false, true}, nullptr);
    if (!model) return report_error(model.error().message);
    compiled = std::move(model->plan);
    reference = std::move(*model->reference_plan);
    reference_what = "the imported model before any pass, fp32 reference executor (" + model->bindings_text + ")";
  }

  VerifyData data;
  if (sources == 0 || opts.random > 0) {
    data = verify_random_data(compiled, opts.random > 0 ? opts.random : kDefaultRandomSamples, opts.seed);
  } else {
    auto loaded = load_user_data(opts, compiled);
    if (!loaded) return report_error(loaded.error().message);
    data = std::move(*loaded);
  }

  VerifyOptions options;
  options.threads = opts.threads;
  options.reference_description = reference_what;
  auto report = verify_plans(compiled, reference, data, options);
  if (!report) return report_error(opts.model + ": " + report.error().message);
  if (opts.json)
    std::cout << verify_report_json(*report) << '\n';
  else
    verify_report_print(std::cout, *report);
  std::cout.flush();
  const std::string failures = tolerance_failures(opts, *report);
  if (!failures.empty()) return report_error("verification failed: " + failures);
  return kExitOk;
}

}  // namespace

void add_verify_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<VerifyCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Compare the compiled model with the fp32 reference on a data set (accuracy with labels)");
  cmd->add_option("model", opts->model, "ONNX model (compiled with --passes) or .kiln plan")->required();
  cmd->add_option("--passes", opts->passes,
                  "Pipeline an ONNX model is compiled with, as for compile (default; e.g. default+mixed_precision_bf16)");
  opts->dims.add_to(*cmd);
  cmd->add_option("--input,-i", opts->input,
                  ".npy (single-input models) or .npz with one entry per input, samples in dim 0; "
                  "an entry named by --labels-entry holds int labels");
  cmd->add_option("--labels-entry", opts->labels_entry, "Name of the .npz entry with the labels (default 'labels')");
  cmd->add_option("--idx-images", opts->idx_images, "IDX file (raw or .gz) of uint8 images, fed as (p/255 - mean) / std");
  cmd->add_option("--idx-labels", opts->idx_labels, "IDX file (raw or .gz) of labels for --idx-images");
  cmd->add_option("--mean", opts->mean, "Mean subtracted from IDX pixels after /255 (default 0)");
  cmd->add_option("--std", opts->std, "Divisor of IDX pixels after the mean (default 1)");
  cmd->add_option("--random", opts->random, "Seeded random data with this many samples (the default, 64 samples, "
                                            "when no data is given)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opts->seed, "Seed of the random data (default 1)");
  cmd->add_option("--limit", opts->limit, "Use only the first N samples of the data")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", opts->threads, "Engine threads (default: the CPU quota)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", opts->json, "Print the report as JSON");
  cmd->add_option("--max-accuracy-drop", opts->max_accuracy_drop,
                  "Fail (exit 1) when reference minus compiled accuracy exceeds this fraction (e.g. 0.005)");
  cmd->add_option("--min-cosine", opts->min_cosine, "Fail (exit 1) when any output's cosine similarity is below this");
  cmd->add_option("--min-top1-agreement", opts->min_top1,
                  "Fail (exit 1) when any classifier output's top-1 agreement is below this fraction");
  cmd->callback([opts, &run] { run = [opts] { return run_verify(*opts); }; });
}

}  // namespace kiln::cli
