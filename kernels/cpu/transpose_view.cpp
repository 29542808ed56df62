// Transpose between NCHW and NHWC of a float32 4-D value, as a view: [N, H, W, C] in plain
// row-major order, transposed by perm [0, 3, 1, 2], is [N, C, H, W] in oneDNN's NHWC layout
// (acdb) with the same bytes, and an acdb [N, C, H, W] transposed by [0, 2, 3, 1] is the plain
// [N, H, W, C] (bfloat16 rows where the acdb value is bfloat16: a bf16 conv's output, which a bf16
// LayerNormalization reads as it is). ConvNeXt transposes to NHWC and back around every LayerNorm and MLP: with the
// layout carrying the order, what reads NHWC (oneDNN's convs, the elementwise chain of the layer
// scale and residual, the next Transpose) reads it without a transposing copy. Like the views of
// kernels/cpu/view.cpp it runs in place where the input dies here, else copies the bytes
// (cpu::ByteViewKernel); a reader that needs plain NCHW gets the engine's one conversion, which is
// the transpose itself.
#include "kernels/cpu/byte_view.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"

namespace kiln {
namespace {

// to_rows: [0, 2, 3, 1] of a bfloat16 NHWC value (a bf16 conv's output) is bfloat16 in plain row order,
// which a bf16 LayerNormalization and MatMul read (ConvNeXt's depthwise conv -> LayerNorm -> Linear).
enum class Direction { to_nchw, to_nhwc, to_rows };

// Which view `b` is, or why it is none.
std::optional<std::string> view_direction(const KernelBuild& b, Direction& dir) {
  if (b.op != OpKind::Transpose) return "handles Transpose only";
  if (b.inputs.empty() || !b.inputs[0].present || b.inputs[0].dtype != DType::f32) return "needs a float32 input";
  if (b.outputs.size() != 1 || b.outputs[0].dtype != DType::f32) return "needs one float32 output";
  if (b.inputs[0].shape.size() != 4) return "only 4-D values";
  auto perm = b.attrs->get_ints("perm", {});
  if (!perm) return "bad perm attribute";
  const ValueDesc& x = b.inputs[0];
  if (*perm == std::vector<int64_t>{0, 3, 1, 2} && x.layout.plain()) {
    dir = Direction::to_nchw;
    return std::nullopt;
  }
  if (*perm == std::vector<int64_t>{0, 2, 3, 1} && !x.layout.plain() && cpu::pixel_order(x) == cpu::PixelOrder::nhwc) {
    dir = Direction::to_nhwc;
    return std::nullopt;
  }
  if (*perm == std::vector<int64_t>{0, 2, 3, 1} && cpu::is_nhwc_bf16(x)) {
    dir = Direction::to_rows;
    return std::nullopt;
  }
  return "only perm [0,3,1,2] of a plain value or [0,2,3,1] of an NHWC one (float32 or bfloat16)";
}

std::optional<std::string> transpose_view_supports(const KernelBuild& b) {
  Direction dir;
  return view_direction(b, dir);
}

Result<std::unique_ptr<Kernel>> transpose_view_create(const KernelBuild& b) {
  Direction dir;
  if (auto why = view_direction(b, dir)) return make_error(ErrorCode::unsupported, *why);
  const Layout out = dir == Direction::to_nchw ? cpu::nhwc_layout(b.outputs[0].shape, b.threads)
                     : dir == Direction::to_rows ? cpu::bf16_rows_layout(b.outputs[0].shape, b.threads)
                                                 : Layout{};
  return std::unique_ptr<Kernel>(std::make_unique<cpu::ByteViewKernel>(b.inputs[0].bytes(), out));
}

}  // namespace

const KernelImpl kCpuTransposeView{"cpu.transpose_view", transpose_view_supports, transpose_view_create};

}  // namespace kiln
