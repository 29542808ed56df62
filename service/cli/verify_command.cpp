// kiln verify MODEL|model.kiln: runs the compiled model and the fp32 reference on the same data
// and reports how far apart they are (and, with labels, both accuracies). Exits 1 when a stated
// tolerance (--max-accuracy-drop, --min-cosine, --min-top1-agreement) is not met. When the pipeline
// prunes (a prune_* pass), the report says it was done without fine-tuning and names the accuracy
// drop against the unpruned model as its cost (JSON: "pruning").
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "compilers/passes/pipeline.h"
#include "kernels/io/idx.h"
#include "kernels/io/npy.h"
#include "kernels/io/npz.h"
#include "kernels/io/plan_io.h"
#include "kernels/device/device_plugin.h"
#include "kernels/plan_file.h"
#include "kernels/verify/verify.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"
#include "service/cli/dataset.h"
#include "service/cli/device_options.h"

namespace kiln::cli {
namespace {

// " (batch=8)" after the reference's description; nothing for a model without symbolic dims (an export).
std::string bindings_suffix(const std::string& bindings) { return bindings.empty() ? "" : " (" + bindings + ")"; }

struct VerifyCliOptions {
  std::string model;
  DimOptions dims;
  std::string passes;  // empty: the default pipeline
  std::string reference;  // for a .kiln plan: the ONNX model it was compiled from
  DatasetOptions data;
  int64_t random = 0;
  uint32_t seed = 1;
  int threads = 0;
  DeviceCli device;
  bool json = false;
  bool input_sensitivity = false;
  bool emulate = false;  // --device cuda without a GPU: the GPU plan on this CPU, rounded as at --cuda-precision
  double max_accuracy_drop = NAN, min_cosine = NAN, min_top1 = NAN;
  CalibrationCli calibration;
  PruneCli prune;
};

constexpr int64_t kDefaultRandomSamples = 64;

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
  const DatasetOptions& d = opts.data;
  const int sources = !d.input.empty() + !d.idx_images.empty() + (opts.random > 0);
  if (sources > 1) return report_error("give one data source: --input, --idx-images or --random");
  if (!d.idx_labels.empty() && d.idx_images.empty()) return report_error("--idx-labels needs --idx-images");
  if (d.std == 0.0f) return report_error("--std must not be zero");
  if (opts.emulate && opts.device.kind() != DeviceKind::cuda)
    return report_error("--emulate runs a GPU plan on the CPU: add --device cuda (and --cuda-precision)");

  Plan compiled, reference;
  PlanFileInfo recorded;  // a .kiln's metadata (its GPU mixed precision)
  std::string reference_what;
  std::vector<std::string> pipeline;  // the passes an ONNX model is compiled with
  if (is_plan_file(opts.model)) {
    if (!opts.passes.empty() || opts.calibration.given() || opts.prune.channels_given || opts.prune.sparsity_given)
      return report_error("--passes and --calibration apply to ONNX models; '" + opts.model + "' is compiled already");
    auto loaded = plan_read_file(opts.model);
    if (!loaded) return report_error(loaded.error().message);
    compiled = std::move(loaded->plan);
    recorded = std::move(loaded->info);
    if (const std::string note = opts.device.recorded_keep_note(recorded); !note.empty()) std::cerr << "note: " << note << '\n';
    if (opts.reference.empty()) {
      reference = compiled;
      reference_what = "the same plan on the reference executor (a .kiln file keeps no pre-pass plan; "
                       "give --reference MODEL.onnx, or verify the ONNX model, to compare against the original graph)";
    } else {
      // The original graph at the plan's batch, before any pass.
      DimOptions dims = opts.dims;
      dims.batch = plan_batch(compiled);
      CompileRequest request{opts.reference, dims, {}, {}, false, true};
      auto model = compile_model(request, nullptr);
      if (!model) return report_error("--reference: " + model.error().message);
      reference = std::move(*model->reference_plan);
      reference_what = "the imported model " + opts.reference + " before any pass, fp32 reference executor" +
                       bindings_suffix(model->bindings_text);
    }
  } else {
    if (!opts.reference.empty()) return report_error("--reference applies to a .kiln plan; an ONNX model is its own reference");
    opts.calibration.mean = d.mean;  // IDX calibration images are normalized like the data
    opts.calibration.std = d.std;
    pipeline = opts.passes.empty() ? default_pipeline_for(opts.device.kind()) : pipeline_parse(opts.passes);
    CompileRequest request{opts.model, opts.dims, pipeline, {}, false, true};
    request.calibration = &opts.calibration;
    request.prune = &opts.prune;
    request.log = &std::cerr;  // stdout carries the report (JSON with --json)
    auto model = compile_model(request, nullptr);
    if (!model) return report_error(model.error().message);
    compiled = std::move(model->plan);
    reference = std::move(*model->reference_plan);
    reference_what = "the imported model before any pass, fp32 reference executor" + bindings_suffix(model->bindings_text);
  }

  VerifyData data;
  if (sources == 0 || opts.random > 0) {
    data = verify_random_data(compiled, opts.random > 0 ? opts.random : kDefaultRandomSamples, opts.seed);
  } else {
    auto loaded = load_dataset(d, compiled);
    if (!loaded) return report_error(loaded.error().message);
    data = std::move(*loaded);
  }

  VerifyOptions options;
  options.threads = opts.threads;
  options.device = opts.device.kind();
  options.device_options = opts.device.runner_options(opts.threads, nullptr, &recorded).device_options;
  if (opts.emulate) {
    options.emulate = options.device_options.precision;
    // Emulating a plan the GPU could not run would verify nothing real: the CUDA backend must
    // have a kernel for every step (the plugin answers without a GPU).
    if (Status runs = cuda_plugin_check_plan(compiled, options.device_options); !runs)
      return report_error(opts.model + ": --emulate: " + runs.message());
  }
  options.reference_description = reference_what;
  // The fp32 model on its inputs rounded to 8 bits, against the same reference outputs.
  const VerifyData rounded = opts.input_sensitivity ? round_inputs_to_8_bits(data) : VerifyData{};
  if (opts.input_sensitivity) options.sensitivity_data = &rounded;
  auto report = verify_plans(compiled, reference, data, options);
  if (!report) return report_error(opts.model + ": " + report.error().message);
  for (const std::string& pass : pipeline)
    if (pass_prunes(pass)) report->pruned_by.push_back(pass);
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
  cmd->add_option("--reference", opts->reference,
                  "For a .kiln plan: the ONNX model it was compiled from, run before any pass as the fp32 reference");
  cmd->add_option("--input,-i", opts->data.input,
                  ".npy (single-input models) or .npz with one entry per input, samples in dim 0; "
                  "an entry named by --labels-entry holds int labels");
  cmd->add_option("--labels-entry", opts->data.labels_entry, "Name of the .npz entry with the labels (default 'labels')");
  cmd->add_option("--idx-images", opts->data.idx_images, "IDX file (raw or .gz) of uint8 images, fed as (p/255 - mean) / std");
  cmd->add_option("--idx-labels", opts->data.idx_labels, "IDX file (raw or .gz) of labels for --idx-images");
  cmd->add_option("--mean", opts->data.mean, "Mean subtracted from IDX pixels after /255 (default 0)");
  cmd->add_option("--std", opts->data.std, "Divisor of IDX pixels after the mean (default 1)");
  cmd->add_option("--random", opts->random, "Seeded random data with this many samples (the default, 64 samples, "
                                            "when no data is given)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opts->seed, "Seed of the random data (default 1)");
  cmd->add_option("--limit", opts->data.limit, "Use only the first N samples of the data")->check(CLI::PositiveNumber);
  opts->calibration.add_to(*cmd, /*with_normalization=*/false);
  opts->prune.add_to(*cmd);
  cmd->add_option("--threads", opts->threads, "Engine threads (default: the CPU quota)")->check(CLI::NonNegativeNumber);
  opts->device.add_to(*cmd);
  cmd->add_flag("--emulate", opts->emulate,
                "With --device cuda: run the GPU plan on this CPU, rounding values as the CUDA engine stores them at "
                "--cuda-precision (no GPU needed; approximates the GPU's error)");
  cmd->add_flag("--json", opts->json, "Print the report as JSON");
  cmd->add_flag("--input-sensitivity", opts->input_sensitivity,
                "Also run the fp32 model on its inputs rounded to 8 bits and compare with the clean inputs: how much "
                "agreement the model itself keeps under the rounding int8 applies (JSON: input_rounding)");
  cmd->add_option("--max-accuracy-drop", opts->max_accuracy_drop,
                  "Fail (exit 1) when reference minus compiled accuracy exceeds this fraction (e.g. 0.005)");
  cmd->add_option("--min-cosine", opts->min_cosine, "Fail (exit 1) when any output's cosine similarity is below this");
  cmd->add_option("--min-top1-agreement", opts->min_top1,
                  "Fail (exit 1) when any classifier output's top-1 agreement is below this fraction");
  cmd->callback([opts, &run] { run = [opts] { return run_verify(*opts); }; });
}

}  // namespace kiln::cli
