#include "compilers/passes/quantize_int8.h"

#include <algorithm>
#include <functional>
#include <map>

#include "compilers/ir/rewrite.h"
#include "compilers/passes/keep_fp32.h"
#include "kernels/post_ops.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"

namespace kiln {
namespace {

// A float32 Conv, Gemm or MatMul whose weights are constants: what the int8 kernels take.
bool quantizable(const Graph& graph, const Node& n) {
  if (n.op != OpKind::Conv && n.op != OpKind::Gemm && n.op != OpKind::MatMul) return false;
  if (n.inputs.size() < 2 || n.outputs.empty() || n.outputs[0] == kNoValue) return false;
  // bf16 too: after mixed_precision_bf16, int8 takes over and the layers it leaves stay bf16.
  auto precision = precision_from_attrs(n.attrs);
  if (!precision || (*precision != Precision::fp32 && *precision != Precision::bf16)) return false;
  if (!graph_constant_value(graph, n.inputs[1])) return false;
  const ValueType& x = graph.value(n.inputs[0]).type;
  const ValueType& y = graph.value(n.outputs[0]).type;
  if (x.dtype != DType::f32 || y.dtype != DType::f32) return false;
  // Gemm with a transposed A stays fp32 (the int8 matmul quantizes A as given).
  if (n.op == OpKind::Gemm) {
    auto trans_a = n.attrs.get_int("transA", 0);
    if (!trans_a || *trans_a != 0) return false;
  }
  return true;
}

// Poolings that pass int8 codes through exactly. Average pooling is left out: oneDNN 2.6 pools
// u8/s8 only into the same type and scale, so an average (far smaller than the input's largest
// values) would be rounded to the input's coarse step.
bool is_exact_int8_pooling(OpKind op) { return op == OpKind::MaxPool || op == OpKind::GlobalMaxPool; }

// Value -> its class's root, for the values of the shuffle classes that can hold codes.
using ShuffleClasses = std::map<ValueId, ValueId>;

// The classes of values joined by ChannelShuffle nodes (a node's inputs and outputs are one class)
// whose every value an int8 node (or a shuffle) writes and int8 nodes (as their input or fused
// residual) or shuffles read, none of them a graph output.
ShuffleClasses coded_shuffle_classes(const Graph& graph, const std::vector<std::vector<int>>& consumers,
                                     const std::vector<bool>& is_int8) {
  std::map<ValueId, ValueId> parent;
  const std::function<ValueId(ValueId)> root = [&](ValueId v) {
    auto it = parent.find(v);
    if (it == parent.end() || it->second == v) return v;
    return it->second = root(it->second);
  };
  for (const Node& n : graph.nodes) {
    if (n.op != OpKind::ChannelShuffle || n.inputs.empty()) continue;
    const ValueId first = root(n.inputs[0]);
    parent.emplace(first, first);
    for (const auto* list : {&n.inputs, &n.outputs})
      for (ValueId v : *list)
        if (v != kNoValue) parent[root(v)] = first;
  }
  std::map<ValueId, bool> coded;  // root -> every member qualifies
  for (const auto& [v, unused] : parent) {
    bool ok = !graph_is_output(graph, v) && !consumers[static_cast<size_t>(v)].empty();
    const int p = graph.value(v).producer;
    const bool from_shuffle = p >= 0 && graph.nodes[static_cast<size_t>(p)].op == OpKind::ChannelShuffle;
    if (!from_shuffle && (p < 0 || !is_int8[static_cast<size_t>(p)] || graph.nodes[static_cast<size_t>(p)].outputs[0] != v))
      ok = false;
    for (int c : consumers[static_cast<size_t>(v)]) {
      const Node& reader = graph.nodes[static_cast<size_t>(c)];
      if (reader.op == OpKind::ChannelShuffle) continue;
      if (!is_int8[static_cast<size_t>(c)]) ok = false;
      for (size_t k = 0; k < reader.inputs.size(); ++k)
        if (reader.inputs[k] == v && k != 0 && static_cast<int>(k) != fused_residual_input(reader.op)) ok = false;
    }
    auto [it, fresh] = coded.emplace(root(v), ok);
    if (!fresh) it->second = it->second && ok;
  }
  ShuffleClasses classes;
  for (const auto& [v, unused] : parent)
    if (coded.at(root(v))) classes[v] = root(v);
  return classes;
}

}  // namespace

Result<bool> pass_quantize_int8(Graph& graph, const PassContext& ctx) {
  const Int8Options& opts = ctx.int8;
  KILN_REQUIRE(opts.calibration != nullptr, invalid_argument,
               "int8 quantization needs calibration data: give --calibration FILE (.npy, .npz or IDX images) "
               "or --calibration-random N for seeded random inputs");
  std::vector<int> chosen;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (!quantizable(graph, n)) continue;
    if (kept_in_fp32(ctx, n) || std::find(opts.keep.begin(), opts.keep.end(), n.name) != opts.keep.end()) continue;
    chosen.push_back(static_cast<int>(i));
  }
  KILN_TRY(check_kept_layers(graph, ctx));
  KILN_TRY(check_layer_names(graph, opts.keep, "to leave out of int8"));
  if (chosen.empty()) return false;

  std::vector<bool> is_int8(graph.nodes.size(), false);
  for (int i : chosen) is_int8[static_cast<size_t>(i)] = true;
  const auto consumers = graph_consumers(graph);
  // A channel Concat whose every input an int8 node writes for it alone (GoogLeNet's inception
  // branches, SqueezeNet's fire expansions): those nodes write their codes at one shared scale, the
  // Concat output's (calibrated on the joined tensor, so it covers every part), and the Concat joins
  // codes: 4x fewer bytes, and the max pools after it stay on codes. Exact against joining floats:
  // the readers quantized the joined tensor at that scale anyway (GoogLeNet and SqueezeNet int8 verify
  // to the same figures; batch 8, 1 thread, AMX Xeon: 34.4 -> 19.1 ms and 16.8 -> 12.2 ms).
  const auto joins_int8_codes = [&](const Node& concat) {
    if (concat.inputs.empty() || graph_concat_axis(graph, concat) != 1 || graph.value(concat.outputs[0]).type.rank() != 4)
      return false;
    for (ValueId in : concat.inputs) {
      if (in == kNoValue || graph_is_output(graph, in) || consumers[static_cast<size_t>(in)].size() != 1) return false;
      const int p = graph.value(in).producer;
      if (p < 0 || !is_int8[static_cast<size_t>(p)] || graph.nodes[static_cast<size_t>(p)].outputs[0] != in) return false;
    }
    return true;
  };
  // ShuffleNet's channel shuffles (ChannelShuffle, fuse_channel_shuffle) hand a stage's features from
  // unit to unit: half of each unit's input passes through to the next shuffle untouched. The values
  // joined by shuffles (each one's inputs and outputs) form a class; where int8 nodes write every value
  // entering a class and int8 nodes (or shuffles) read every value of it, the class holds codes at one
  // scale, its calibrated ranges' union: the shuffles copy a quarter of the bytes and the convolutions
  // read their input without quantizing it. (Each class's values were quantized at their own scale by
  // their readers before; the shared one is at most the stage's largest range.)
  const ShuffleClasses shuffle_classes = coded_shuffle_classes(graph, consumers, is_int8);
  // Quantized output: every reader takes int8 (an int8 op's input or residual, a pooling whose own
  // readers do: it passes the codes and their scale through, a ConcatAffine, or a shuffle whose class
  // holds codes).
  std::function<bool(ValueId)> output_quantized = [&](ValueId out) {
    if (graph_is_output(graph, out) || consumers[static_cast<size_t>(out)].empty()) return false;
    for (int c : consumers[static_cast<size_t>(out)]) {
      const Node& reader = graph.nodes[static_cast<size_t>(c)];
      if (reader.op == OpKind::ChannelShuffle) {
        if (!shuffle_classes.count(out)) return false;
        continue;
      }
      if (is_exact_int8_pooling(reader.op)) {
        if (reader.outputs.empty() || !output_quantized(reader.outputs[0])) return false;
        continue;
      }
      if (reader.op == OpKind::Concat) {
        if (!joins_int8_codes(reader) || !output_quantized(reader.outputs[0])) return false;
        continue;
      }
      // A float32 ConcatAffine (DenseNet's BatchNorm+ReLU over the joined features) reads codes with
      // their scale folded into its own (kernels/cpu/concat_affine.cpp): every later layer of a dense
      // block reads each layer's output, so each is read many times, and a code is a quarter of a float.
      if (reader.op == OpKind::ConcatAffine && !is_int8[static_cast<size_t>(c)]) continue;
      if (!is_int8[static_cast<size_t>(c)]) return false;
      for (size_t k = 0; k < reader.inputs.size(); ++k)
        if (reader.inputs[k] == out && k != 0 && static_cast<int>(k) != fused_residual_input(reader.op))
          return false;
    }
    return true;
  };

  auto quantize_output = [&](ValueId out) {
    return output_quantized(out) || (opts.quantize_every_output && !graph_is_output(graph, out));
  };
  // The value whose calibrated range sets the scale of a quantized output `out`: for the parts of a
  // joining Concat, the Concat's output.
  const auto scale_source = [&](ValueId out) {
    const auto& readers = consumers[static_cast<size_t>(out)];
    if (output_quantized(out) && readers.size() == 1 && joins_int8_codes(graph.nodes[static_cast<size_t>(readers[0])]))
      return graph.nodes[static_cast<size_t>(readers[0])].outputs[0];
    return out;
  };
  // A float32 ConcatAffine (DenseNet's BatchNorm+ReLU over the joined features) or LayerNormalization
  // (ConvNeXt's, before each block's first Linear) whose every reader takes int8 writes the codes
  // itself: a quarter of the bytes, and its conv or MatMul reads them as they are instead of quantizing
  // floats (DenseNet-121 int8 b1, 1 thread: 58 such convs; ConvNeXt-T: 18 MatMuls).
  std::vector<int> code_writers;
  int layer_norm_writers = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    const bool writes_codes = n.op == OpKind::ConcatAffine || n.op == OpKind::LayerNormalization;
    if (writes_codes && !is_int8[i] && n.outputs.size() == 1 && output_quantized(n.outputs[0])) {
      code_writers.push_back(static_cast<int>(i));
      layer_norm_writers += n.op == OpKind::LayerNormalization;
    }
  }
  std::vector<ValueId> values;
  for (int i : chosen) {
    const Node& n = graph.nodes[static_cast<size_t>(i)];
    values.push_back(n.inputs[0]);
    if (quantize_output(n.outputs[0])) values.push_back(scale_source(n.outputs[0]));
  }
  for (const auto& [v, root] : shuffle_classes)
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  for (int i : code_writers)  // usually calibrated already: it is its reader's input
    if (const ValueId out = graph.nodes[static_cast<size_t>(i)].outputs[0]; std::find(values.begin(), values.end(), out) == values.end())
      values.push_back(out);
  if (ctx.log && opts.range_cache == nullptr)
    *ctx.log << "  quantize_int8: calibrating " << values.size() << " tensors for " << chosen.size() << " layers ("
             << calibration_method_name(opts.calibration_options.method) << ")\n";
  std::map<ValueId, TensorRange> ranges;
  std::vector<ValueId> missing;
  for (ValueId v : values) {
    if (opts.range_cache == nullptr) missing.push_back(v);
    else if (auto it = opts.range_cache->find(graph.value(v).name); it != opts.range_cache->end()) ranges[v] = it->second;
    else missing.push_back(v);
  }
  if (!missing.empty()) {
    KILN_ASSIGN(measured, calibrate_values(graph, missing, *opts.calibration, opts.calibration_options));
    for (const auto& [v, r] : measured) {
      ranges[v] = r;
      if (opts.range_cache) (*opts.range_cache)[graph.value(v).name] = r;
    }
  }

  // A shuffle class's range: the union of its values'.
  std::map<ValueId, TensorRange> class_ranges;
  for (const auto& [v, root] : shuffle_classes) {
    const TensorRange r = ranges.at(v);
    auto [it, fresh] = class_ranges.emplace(root, r);
    if (!fresh) it->second.lo = std::min(it->second.lo, r.lo), it->second.hi = std::max(it->second.hi, r.hi);
  }
  const auto range_of = [&](ValueId v) {
    const auto c = shuffle_classes.find(v);
    return c != shuffle_classes.end() ? class_ranges.at(c->second) : ranges.at(v);
  };
  for (int i : chosen) {
    Node& n = graph.nodes[static_cast<size_t>(i)];
    precision_to_attrs(Precision::int8, n.attrs);
    const TensorRange in = range_of(n.inputs[0]);
    quant_params_to_attrs(quant_params_for_range(in.lo, in.hi), "input", n.attrs);
    if (!quantize_output(n.outputs[0])) continue;
    if (shuffle_classes.count(n.outputs[0])) {
      const TensorRange out = range_of(n.outputs[0]);
      quant_params_to_attrs(quant_params_for_range(out.lo, out.hi), "output", n.attrs);
    } else if (auto it = ranges.find(scale_source(n.outputs[0])); it != ranges.end()) {
      quant_params_to_attrs(quant_params_for_range(it->second.lo, it->second.hi), "output", n.attrs);
    }
  }
  for (int i : code_writers) {
    Node& n = graph.nodes[static_cast<size_t>(i)];
    const TensorRange out = ranges.at(n.outputs[0]);
    quant_params_to_attrs(quant_params_for_range(out.lo, out.hi), "output", n.attrs);
  }
  // bf16_output (mixed_precision_bf16) was for bf16 readers; where one of them is int8 now (or the
  // writer itself), the value is written as float32 again instead of bfloat16 converted back.
  for (Node& n : graph.nodes) {
    if (!n.attrs.has(std::string(kBf16OutputAttr)) || n.outputs.empty()) continue;
    const auto& readers = consumers[static_cast<size_t>(n.outputs[0])];
    const bool int8_reader = std::any_of(readers.begin(), readers.end(), [&](int r) { return is_int8[static_cast<size_t>(r)]; });
    const auto own = precision_from_attrs(n.attrs);
    if (int8_reader || (own && *own == Precision::int8)) n.attrs.erase(std::string(kBf16OutputAttr));
  }
  if (ctx.log) {
    *ctx.log << "  quantize_int8: " << chosen.size() << " layers in int8";
    if (code_writers.size() > static_cast<size_t>(layer_norm_writers))
      *ctx.log << ", " << code_writers.size() - static_cast<size_t>(layer_norm_writers) << " BatchNorm+ReLU writing int8 codes";
    if (layer_norm_writers > 0) *ctx.log << ", " << layer_norm_writers << " LayerNorms writing int8 codes";
    if (!class_ranges.empty()) *ctx.log << ", " << class_ranges.size() << " chains of channel shuffles on int8 codes";
    if (!ctx.keep_fp32.empty()) {
      *ctx.log << "; kept in fp32:";
      for (const std::string& name : ctx.keep_fp32) *ctx.log << ' ' << name;
    }
    if (!opts.keep.empty()) {
      *ctx.log << "; left out of int8:";
      for (const std::string& name : opts.keep) *ctx.log << ' ' << name;
    }
    *ctx.log << '\n';
  }
  return true;
}

}  // namespace kiln
