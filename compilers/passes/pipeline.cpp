#include "compilers/passes/pipeline.h"

#include <algorithm>
#include <array>
#include <sstream>

#include "compilers/passes/eliminate_dead_nodes.h"
#include "compilers/passes/eliminate_identity.h"
#include "compilers/passes/fold_batchnorm.h"
#include "compilers/passes/fold_constants.h"
#include "compilers/passes/fuse_activation.h"
#include "compilers/passes/fuse_channel_shuffle.h"
#include "compilers/passes/fuse_concat_affine.h"
#include "compilers/passes/fuse_depth_first.h"
#include "compilers/passes/fuse_elementwise_chain.h"
#include "compilers/passes/fuse_layer_norm.h"
#include "compilers/passes/fuse_matmul_bias.h"
#include "compilers/passes/fuse_residual_add.h"
#include "compilers/passes/merge_concats.h"
#include "compilers/passes/mixed_precision_bf16.h"
#include "compilers/passes/prune_channels.h"
#include "compilers/passes/prune_2_4.h"
#include "compilers/passes/prune_magnitude.h"
#include "compilers/passes/quantize_int8.h"
#include "compilers/passes/reorder_pool_activation.h"

namespace kiln {
namespace {

// One line a pass, in default order.
constexpr std::array kPasses = {
    PassInfo{"fold_constants", "evaluate constant subgraphs and Shape of concrete shapes", pass_fold_constants},
    PassInfo{"eliminate_identity", "remove Identity, inference Dropout and all-zero Pad nodes", pass_eliminate_identity},
    PassInfo{"eliminate_dead_nodes", "remove nodes and weights nothing reads", pass_eliminate_dead_nodes},
    PassInfo{"fold_batchnorm", "fold BatchNormalization into a preceding Conv, ConvTranspose or Gemm",
             pass_fold_batchnorm},
    // Optional, not exact (no fine-tuning): after fold_batchnorm so that it slices the folded
    // weights, before the fusions so that it sees plain ONNX ops.
    PassInfo{"prune_channels", "structured pruning: remove the lowest-L1 channels of each prunable channel group (no fine-tuning)",
             pass_prune_channels, false, false},
    PassInfo{"fuse_layer_norm", "rebuild LayerNormalization from its ReduceMean/Sub/Pow/Sqrt/Div(/Mul/Add) decomposition",
             pass_fuse_layer_norm},
    PassInfo{"fuse_matmul_bias", "fold Add(MatMul output, constant vector of N) into the MatMul as its bias",
             pass_fuse_matmul_bias},
    PassInfo{"fuse_residual_add", "fold Add(op output, same-shape value) into Conv/Gemm/MatMul as its residual",
             pass_fuse_residual_add},
    PassInfo{"fuse_activation", "fold the activation after Conv/Gemm/MatMul/BatchNormalization into its fused epilogue",
             pass_fuse_activation},
    PassInfo{"reorder_pool_activation", "move a monotonic activation from before a MaxPool to after it",
             pass_reorder_pool_activation},
    PassInfo{"merge_concats", "flatten a Concat of a single-reader Concat on the same axis", pass_merge_concats},
    PassInfo{"fuse_concat_affine",
             "normalize each input of a channel Concat straight into its slice when a BatchNormalization reads it "
             "(ConcatAffine)",
             pass_fuse_concat_affine},
    PassInfo{"fuse_channel_shuffle",
             "copy each channel of a Concat -> channel shuffle (-> Slices) once into its part (ChannelShuffle)",
             pass_fuse_channel_shuffle},
    // After fuse_activation: what a Conv/Gemm/MatMul epilogue can take is taken first.
    PassInfo{"fuse_elementwise_chain", "run connected elementwise ops (bias, GELU written out, scales) as one ElementwiseChain",
             pass_fuse_elementwise_chain},
    // Optional, not exact (pruning without fine-tuning changes the function): after the fusions a
    // Conv/Gemm epilogue takes, so the kernels it times are the fused nodes; before the precision
    // passes, whose nodes the float32 sparse kernel does not run.
    PassInfo{"prune_magnitude",
             "zero the smallest weights of Conv/Gemm/MatMul (global or per layer, no fine-tuning); CSR kernel where "
             "measured faster",
             pass_prune_magnitude, false, false},
    PassInfo{"prune_2_4", "2:4 semi-structured sparsity of Conv/Gemm/MatMul weights for GPU sparse tensor cores (no fine-tuning)",
             pass_prune_2_4, false, false},
    // Optional, before fuse_depth_first so that the convolutions it makes bf16 stay with oneDNN.
    PassInfo{"mixed_precision_bf16", "run every Conv, Gemm and MatMul in bfloat16 (activations between them too)",
             pass_mixed_precision_bf16, false, false},
    // Optional, needs calibration data; after the fusions so that it calibrates the values the
    // kernels really write (a Conv's output after its fused ReLU and residual).
    PassInfo{"quantize_int8",
             "int8 post-training quantization of Conv, Gemm and MatMul (calibrated activation scales, per-channel "
             "weights)",
             pass_quantize_int8, false, false},
    // Last: it takes the nodes with their fused activations and residuals. It fuses only where
    // measured faster than oneDNN's separate convolutions (fusion_pays; docs/architecture.md).
    PassInfo{"fuse_depth_first",
             "run [1x1 expand ->] depthwise Conv [-> per-channel Mul -> 1x1 project] tile by tile (DepthFirstConv) "
             "where the intermediates would leave the cache",
             pass_fuse_depth_first},
};

// The passes making fused ops that ONNX export cannot write back (fuse_channel_shuffle's ChannelShuffle it can:
// as the Concat, Reshapes, Transpose and Split it replaced).
constexpr std::array<KilnOpPass, 3> kKilnOpPasses = {{
    {"fuse_concat_affine", "ConcatAffine"},
    {"fuse_elementwise_chain", "ElementwiseChain"},
    {"fuse_depth_first", "DepthFirstConv"},
}};

}  // namespace

std::span<const PassInfo> pass_table() { return kPasses; }

std::vector<std::string> default_pipeline() {
  std::vector<std::string> names;
  for (const PassInfo& p : kPasses)
    if (p.in_default) names.emplace_back(p.name);
  return names;
}

std::vector<std::string> cuda_pipeline() {
  std::vector<std::string> names = default_pipeline();
  std::erase_if(names, [](const std::string& pass) {
    return pass == "fuse_concat_affine" || pass == "fuse_channel_shuffle" || pass == "fuse_depth_first";
  });
  return names;
}

std::vector<std::string> all_passes() {
  std::vector<std::string> names;
  for (const PassInfo& p : kPasses) names.emplace_back(p.name);
  return names;
}

Result<std::vector<const PassInfo*>> pipeline_from_names(const std::vector<std::string>& names) {
  std::vector<const PassInfo*> passes;
  for (const std::string& name : names) {
    const PassInfo* found = nullptr;
    for (const PassInfo& p : kPasses)
      if (p.name == name) found = &p;
    if (!found) {
      std::ostringstream known;
      for (const PassInfo& p : kPasses) known << (known.tellp() ? ", " : "") << p.name;
      return make_error(ErrorCode::invalid_argument, "unknown pass '", name, "' (known passes: ", known.str(), ")");
    }
    passes.push_back(found);
  }
  return passes;
}

std::vector<std::string> pipeline_parse(const std::string& text) {
  if (text == "default") return default_pipeline();
  if (text == "all") return all_passes();
  if (text.starts_with("default+")) {
    // The default pipeline plus optional passes, each at its place in the table.
    std::vector<std::string> extras;
    std::stringstream ss(text.substr(8));
    std::string item;
    while (std::getline(ss, item, '+')) extras.push_back(item);
    std::vector<std::string> names;
    for (const PassInfo& p : kPasses)
      if (p.in_default || std::find(extras.begin(), extras.end(), p.name) != extras.end()) names.emplace_back(p.name);
    for (const std::string& e : extras)  // unknown names stay, for pipeline_from_names to report
      if (std::find(names.begin(), names.end(), e) == names.end()) names.push_back(e);
    return names;
  }
  std::vector<std::string> names;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty() && item != "none") names.push_back(item);
  return names;
}

bool pass_prunes(std::string_view name) { return name.starts_with("prune_"); }

bool pipeline_prunes(const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(), [](const std::string& n) { return pass_prunes(n); });
}

std::span<const KilnOpPass> passes_making_kiln_ops() { return kKilnOpPasses; }

Result<std::vector<std::string>> pipeline_parse_for_export(const std::string& text) {
  const bool named = text != "default" && text != "all" && !text.starts_with("default+");
  std::vector<std::string> names;
  for (std::string& name : pipeline_parse(text)) {
    const auto kiln_op = std::find_if(kKilnOpPasses.begin(), kKilnOpPasses.end(),
                                      [&](const KilnOpPass& p) { return p.pass == name; });
    if (kiln_op == kKilnOpPasses.end()) {
      names.push_back(std::move(name));
      continue;
    }
    // 'default+fuse_depth_first' names it too: only those the shorthand brought in are dropped.
    const bool extra = text.starts_with("default+") && ("+" + text.substr(8) + "+").find("+" + name + "+") != std::string::npos;
    KILN_REQUIRE(!named && !extra, invalid_argument, "pass '", name, "' makes ", kiln_op->op,
                 ", kiln's own fused op, which ONNX cannot express: leave it out of the export pipeline");
  }
  return names;
}

}  // namespace kiln
