// The pipeline table: every pass kiln has, in the order the default pipeline runs them. A
// pipeline is a list of pass names, so requests (and the planner) can choose passes.
#pragma once

#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "compilers/passes/pass.h"

namespace kiln {

std::span<const PassInfo> pass_table();
std::vector<std::string> default_pipeline();  // the table's passes marked in_default, in order
std::vector<std::string> all_passes();        // every pass of the table, in order
// The default pipeline for the CUDA backend: without the passes that make kiln's fused ops only
// CPU kernels run (ConcatAffine, ChannelShuffle, DepthFirstConv); ElementwiseChain has a CUDA kernel. What
// `kiln compile/bench --device cuda` and the GPU kernel sweep compile with.
std::vector<std::string> cuda_pipeline();

// Resolves names against the table; an unknown name is an error listing the known ones.
Result<std::vector<const PassInfo*>> pipeline_from_names(const std::vector<std::string>& names);

// "a,b,c" -> {"a","b","c"}; "default" -> default_pipeline(); "all" -> all_passes(); "none" or "" -> {};
// "default+x+y" -> the default pipeline with the optional passes x and y at their places in the table.
std::vector<std::string> pipeline_parse(const std::string& text);

// Pruning passes are named prune_*: they remove weights without fine-tuning, so the model's
// function changes. The runner's numeric check measures them without a tolerance, and every
// report of a pipeline that runs one states that no fine-tuning was done and its accuracy cost.
bool pass_prunes(std::string_view name);
bool pipeline_prunes(const std::vector<std::string>& names);

// The passes whose output holds kiln's own fused ops (ops.def's last section) that ONNX export cannot
// write back: each with the op it makes.
struct KilnOpPass {
  std::string_view pass;
  std::string_view op;
};
std::span<const KilnOpPass> passes_making_kiln_ops();

// pipeline_parse for ONNX export: 'default', 'all' and 'default+x' leave out the passes that make
// kiln's own ops; a list naming one of them is an error saying which op it would make.
Result<std::vector<std::string>> pipeline_parse_for_export(const std::string& text);

}  // namespace kiln
