// kiln export MODEL.onnx -o OUT.onnx: import, bind the dims, run the export pipeline (the default
// one without the passes that make kiln's own ops), write standard ONNX: folded and fused fp32,
// int8 nodes as QDQ, bf16 nodes as fp32.
#include <algorithm>
#include <cstdio>

#include "compilers/onnx/export.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "service/cli/commands.h"
#include "service/cli/compiled_model.h"
#include "service/cli/model_loading.h"

namespace kiln::cli {
namespace {

struct ExportOptions {
  std::string model;
  std::string output;
  DimOptions dims;
  std::string passes = "default";
  CalibrationCli calibration;
  PruneCli prune;
  bool every_output = false;
};

int run_export(const ExportOptions& opts) {
  if (opts.model.empty() || opts.output.empty()) return report_error("export needs MODEL and -o OUTPUT.onnx");
  auto pipeline = pipeline_parse_for_export(opts.passes);
  if (!pipeline) return report_error(pipeline.error().message);
  if (opts.every_output) {
    // ONNX Runtime and TensorRT make QLinearConv only from DQ -> Conv -> Q: a residual Add folded
    // into the Conv would sit between the Conv and its Q, so the Adds stay separate nodes.
    if (std::find(pipeline->begin(), pipeline->end(), "quantize_int8") == pipeline->end())
      return report_error("--qdq-every-output quantizes int8 layers: add quantize_int8 (--passes default+quantize_int8)");
    std::erase(*pipeline, std::string("fuse_residual_add"));
  }
  CompileRequest request{opts.model, opts.dims, *pipeline, {}, false, false};
  request.quantize_every_output = opts.every_output;
  request.calibration = &opts.calibration;
  request.prune = &opts.prune;
  request.log = &std::cerr;  // stdout stays the pass table; a failure stays one error line on stderr
  auto model = compile_model(request, nullptr);
  if (!model) return report_error(model.error().message);
  // Written before anything is printed, so that a failure is the one error line.
  Status written = onnx_export_file(model->graph, opts.output);
  if (!written) return report_error(opts.model + ": " + written.message());
  print_pass_records(model->passes);
  std::printf("wrote %s (%zu nodes, opset %lld)\n", opts.output.c_str(), model->graph.nodes.size(),
              static_cast<long long>(kOnnxExportOpset));
  return kExitOk;
}

}  // namespace

void add_export_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand("export", "Write the optimized graph back as standard ONNX (int8 nodes as QDQ)");
  cmd->add_option("model", opts->model, "ONNX model file");
  cmd->add_option("-o,--output", opts->output, "Where to write the exported .onnx file");
  opts->dims.add_to(*cmd);
  cmd->add_option("--passes", opts->passes,
                  "Comma-separated pass list, 'default', 'default+OPTIONAL[+...]', 'all' or 'none'; the passes that make "
                  "kiln's own ops (fuse_concat_affine, fuse_elementwise_chain, fuse_depth_first) are left "
                  "out");
  opts->calibration.add_to(*cmd, /*with_normalization=*/true);
  opts->calibration.add_accuracy_control_to(*cmd);
  opts->prune.add_to(*cmd);
  cmd->add_flag("--qdq-every-output", opts->every_output,
                "Quantize every int8 layer's output too and keep residual Adds apart: the QDQ form ONNX Runtime and "
                "TensorRT run entirely as QLinearConv/QLinearMatMul (one more rounding per layer than kiln's own plan)");
  cmd->callback([opts, &run] { run = [opts] { return run_export(*opts); }; });
}

}  // namespace kiln::cli
