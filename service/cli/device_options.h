// --device cpu|cuda and the CUDA options, the same on every verb that runs a compiled plan
// (kiln run, bench, verify; kiln-runtime run). Header-only: kiln-runtime includes it too.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/device/plan_runner.h"
#include "kernels/plan_file.h"

namespace kiln::cli {

struct DeviceCli {
  std::string device = "cpu";
  std::string cuda_precision = "fp32";
  int cuda_device = 0;
  std::vector<std::string> cuda_keep_fp32;  // mixed precision: DeviceEngineOptions::keep_fp32 ("none": nothing)
  CLI::Option* keep_option = nullptr;        // --cuda-keep-fp32, to tell whether it was given

  // `device_env`, `precision_env`: environment variables giving --device's and --cuda-precision's
  // defaults (kiln-runtime's KILN_DEVICE and KILN_CUDA_PRECISION, which GPU images set).
  // `with_keep_fp32`: the verb takes --cuda-keep-fp32.
  void add_to(CLI::App& cmd, bool with_device_index = true, const char* device_env = nullptr, const char* precision_env = nullptr,
              bool with_keep_fp32 = true) {
    CLI::Option* option =
        cmd.add_option("--device", device, "Where the compiled plan runs: cpu (default) or cuda (loads libkiln_cuda.so)")
            ->check(CLI::IsMember({"cpu", "cuda"}));
    if (device_env) option->envname(device_env);
    CLI::Option* precision = cmd.add_option("--cuda-precision", cuda_precision,
                                            "With --device cuda: fp32 (default), tf32 (TF32 tensor cores in Conv/Gemm), fp16 or bf16")
                                 ->check(CLI::IsMember(device_precision_names()));
    if (precision_env) precision->envname(precision_env);
    if (with_device_index)
      cmd.add_option("--cuda-device", cuda_device, "With --device cuda: the GPU index (default 0)")->check(CLI::NonNegativeNumber);
    if (with_keep_fp32)
      keep_option = cmd.add_option("--cuda-keep-fp32", cuda_keep_fp32,
                                   "With --device cuda and --cuda-precision tf32, fp16 or bf16: nodes that compute and store in "
                                   "float32 (mixed precision: the early layers, where the error is made; kiln verify --emulate "
                                   "measures a list without a GPU), comma-separated; a .kiln's recorded list applies at its "
                                   "recorded precision unless this is given ('none': keep nothing)")
                        ->delimiter(',');
  }

  DeviceKind kind() const { return device_kind_from_name(device).value_or(DeviceKind::cpu); }
  bool keep_given() const { return keep_option != nullptr && keep_option->count() > 0; }

  // The steps kept in float32 on the GPU: --cuda-keep-fp32 when given, else the list a .kiln
  // records (`recorded`, PlanFileInfo::cuda_keep_fp32) when the plan runs on the GPU at the
  // precision it records it for.
  std::vector<std::string> keep_fp32_for(const PlanFileInfo* recorded) const {
    if (keep_given() || !cuda_keep_fp32.empty()) {
      if (cuda_keep_fp32.size() == 1 && cuda_keep_fp32[0] == "none") return {};
      return cuda_keep_fp32;
    }
    if (recorded && kind() == DeviceKind::cuda && recorded->cuda_precision == cuda_precision) return recorded->cuda_keep_fp32;
    return {};
  }
  // What keep_fp32_for adopted from the .kiln, for the verbs' logs ("" when nothing).
  std::string recorded_keep_note(const PlanFileInfo& recorded) const {
    if (keep_given() || recorded.cuda_keep_fp32.empty()) return "";
    if (kind() != DeviceKind::cuda || recorded.cuda_precision != cuda_precision) return "";
    return "GPU mixed precision recorded in the plan: " + std::to_string(recorded.cuda_keep_fp32.size()) + " steps kept in fp32 at " +
           cuda_precision + " (--cuda-keep-fp32 none keeps none)";
  }

  PlanRunnerOptions runner_options(int threads, std::ostream* verbose, const PlanFileInfo* recorded = nullptr) const {
    PlanRunnerOptions options;
    options.device = kind();
    options.threads = threads;
    options.verbose = verbose;
    options.device_options.precision = device_precision_from_name(cuda_precision).value_or(DevicePrecision::fp32);
    options.device_options.device_index = cuda_device;
    options.device_options.keep_fp32 = keep_fp32_for(recorded);
    return options;
  }
};

}  // namespace kiln::cli
