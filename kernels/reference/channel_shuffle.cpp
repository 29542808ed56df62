// ChannelShuffle (made by the fuse_channel_shuffle pass, never imported): ShuffleNet's
// "concat -> channel shuffle -> chunk" as one op. The inputs are joined along axis 1 (C channels in
// all), the channels are shuffled in `groups` groups (ONNX's Reshape [N, g, C/g, ...] -> Transpose
// (0, 2, 1, ...) -> Reshape [N, C, ...]) and the result is cut along axis 1 into the outputs.
//   inputs: X_i [N, C_i, ...] (at least one; one dtype; equal dims but axis 1)
//   attributes: groups (g >= 1, divides C); splits (the outputs' channel counts, summing to C;
//   absent: one output of C channels)
//   Y channel j (counted across the outputs) = joined channel (j % g) * (C / g) + j / g.
// So the joined and the shuffled tensors are never written: each output channel is read once from
// the input that holds it.
#include <cstring>
#include <numeric>

#include "kernels/reference/data_util.h"

namespace kiln {
namespace {

struct ShuffleAttrs {
  int64_t groups = 1;
  std::vector<int64_t> splits;  // empty: one output
};

Result<ShuffleAttrs> read_shuffle_attrs(const Attrs& attrs) {
  ShuffleAttrs s;
  KILN_REQUIRE(attrs.has("groups"), invalid_argument, "ChannelShuffle needs the groups attribute");
  KILN_ASSIGN(groups, attrs.get_int("groups", 1));
  KILN_REQUIRE(groups >= 1 && groups <= 65536, invalid_argument, "groups must be in [1, 65536], got ", groups);
  KILN_ASSIGN(splits, attrs.get_ints("splits"));
  for (int64_t c : splits)
    KILN_REQUIRE(c >= 1 && c <= ref::data::kMaxElements, invalid_argument, "splits ", ref::ints_to_string(splits),
                 " has an invalid entry ", c);
  s.groups = groups;
  s.splits = std::move(splits);
  return s;
}

Status infer_channel_shuffle(InferContext& ctx) {
  KILN_ASSIGN(attrs, read_shuffle_attrs(*ctx.attrs));
  // The joined shape is Concat's, on axis 1.
  Attrs concat_attrs;
  concat_attrs.set("axis", int64_t{1});
  InferContext joined;
  joined.attrs = &concat_attrs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    KILN_REQUIRE(ctx.has_input(i), invalid_argument, "input ", i, " is missing");
    KILN_REQUIRE(!ctx.input(i).rank_known || ctx.input(i).rank() >= 2, shape_mismatch, "input ", i,
                 " must have rank >= 2 (N, C, ...), got shape ", sym_shape_to_string(ctx.input(i).shape));
    joined.inputs.push_back(ctx.inputs[i]);
    joined.values.push_back(nullptr);
  }
  KILN_TRY(op_def(OpKind::Concat).infer(joined));
  const ValueType& y = joined.outputs[0];
  ctx.outputs.clear();
  if (!y.rank_known || !y.shape[1].known()) {
    KILN_REQUIRE(attrs.splits.size() <= 1 || y.rank_known, invalid_argument, "cannot split an unranked value");
    ctx.outputs.assign(std::max<size_t>(1, attrs.splits.size()), y);
    for (size_t i = 0; i < attrs.splits.size() && y.rank_known; ++i) ctx.outputs[i].shape[1] = Dim(attrs.splits[i]);
    return Status::ok();
  }
  const int64_t c = y.shape[1].value;
  KILN_REQUIRE(c % attrs.groups == 0, shape_mismatch, "the joined inputs have ", c, " channels, not a multiple of groups ",
               attrs.groups);
  if (attrs.splits.empty()) {
    ctx.outputs.push_back(y);
    return Status::ok();
  }
  const int64_t sum = std::accumulate(attrs.splits.begin(), attrs.splits.end(), int64_t{0});
  KILN_REQUIRE(sum == c, shape_mismatch, "splits ", ref::ints_to_string(attrs.splits), " sum to ", sum,
               " but the joined inputs have ", c, " channels");
  for (int64_t part : attrs.splits) {
    ValueType out = y;
    out.shape[1] = Dim(part);
    ctx.outputs.push_back(std::move(out));
  }
  return Status::ok();
}

Status run_channel_shuffle(RunContext& ctx) {
  KILN_ASSIGN(attrs, read_shuffle_attrs(*ctx.attrs));
  const Tensor& x0 = ctx.input(0);
  const size_t elem = dtype_size(x0.dtype());
  const int64_t n = x0.dim(0);
  const int64_t inner = ref::data::dims_product(x0.shape(), 2, x0.shape().size());
  const size_t plane = static_cast<size_t>(inner) * elem;
  // Where each joined channel lives: its input and that input's channel.
  std::vector<std::pair<size_t, int64_t>> joined;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    for (int64_t ch = 0; ch < ctx.input(i).dim(1); ++ch) joined.emplace_back(i, ch);
  const int64_t c = static_cast<int64_t>(joined.size()), per_group = c / attrs.groups;
  int64_t j = 0;  // shuffled channel, counted across the outputs
  for (Tensor* out : ctx.outputs) {
    const int64_t oc = out->dim(1);
    for (int64_t k = 0; k < oc; ++k, ++j) {
      const auto [input, ch] = joined[static_cast<size_t>((j % attrs.groups) * per_group + j / attrs.groups)];
      const Tensor& x = ctx.input(input);
      for (int64_t b = 0; b < n; ++b)
        std::memcpy(static_cast<unsigned char*>(out->raw()) + static_cast<size_t>(b * oc + k) * plane,
                    static_cast<const unsigned char*>(x.raw()) + static_cast<size_t>(b * x.dim(1) + ch) * plane, plane);
    }
  }
  KILN_REQUIRE(j == c, internal, "ChannelShuffle outputs hold ", j, " channels, the inputs ", c);
  return Status::ok();
}

}  // namespace

const OpDef& op_def_ChannelShuffle() {
  static const OpDef def{1, -1, 1, 65536, infer_channel_shuffle, run_channel_shuffle};
  return def;
}

}  // namespace kiln
