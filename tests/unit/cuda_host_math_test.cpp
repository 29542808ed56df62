// The CUDA backend's arithmetic that runs without a GPU: the row-major Gemm handed to
// column-major cuBLASLt (emulated here by its definition, D = op(first) op(second) over
// column-major storage) against the reference Gemm; the broadcast strides of the binary kernel
// (walked as the kernel walks them) against the reference Add; the pooling window walk the
// device kernel runs (pool_window.h, the same code) with the geometry the plugin resolves
// against the reference MaxPool/AveragePool; the device activations (activation_math.h) against
// post_ops.cpp's definitions; the strided views of Transpose and Slice against the reference; the
// depthwise convolution's tiles (each output computed by exactly one thread).
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "kernels/cuda/activation_map.h"
#include "kernels/cuda/broadcast_shape.h"
#include "kernels/cuda/depthwise_window.h"
#include "kernels/cuda/gemm_layout.h"
#include "kernels/cuda/pool_geometry.h"
#include "kernels/cuda/strided_view.h"
#include "kernels/reference/slice.h"
#include "tests/support/plan_builder.h"

namespace kiln {
namespace {

using cuda::LtOperand;

// Element (r, c) of op(stored), column-major with leading dimension ld.
float lt_element(const float* data, const LtOperand& o, int64_t r, int64_t c) {
  return o.transpose ? data[c + r * o.ld] : data[r + c * o.ld];
}

// cuBLASLt's product D = op(first) op(second) with the layouts given, on the CPU.
Tensor emulate_lt_gemm(const Tensor& a, const Tensor& b, int64_t m, int64_t k, int64_t n, bool trans_a, bool trans_b) {
  const cuda::GemmLayout g = cuda::gemm_layout(m, k, n, trans_a, trans_b);
  // op(first) is N x K and op(second) K x M whatever the flags.
  REQUIRE((g.first.transpose ? g.first.cols : g.first.rows) == n);
  REQUIRE((g.second.transpose ? g.second.rows : g.second.cols) == m);
  Tensor y = Tensor::zeros(DType::f32, {m, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += static_cast<double>(lt_element(b.data<float>(), g.first, i, p)) * lt_element(a.data<float>(), g.second, p, j);
      y.data<float>()[i + j * g.out.ld] = static_cast<float>(acc);
    }
  return y;
}

}  // namespace

TEST_CASE("the row-major Gemm given to column-major cuBLASLt computes the reference Gemm", "[cuda]") {
  const bool trans_a = GENERATE(false, true);
  const bool trans_b = GENERATE(false, true);
  const int64_t m = 3, k = 5, n = 4;
  INFO("transA " << trans_a << ", transB " << trans_b);
  testing::Builder b;
  const int a = b.input(trans_a ? Shape{k, m} : Shape{m, k});
  const int w = b.weight(trans_b ? Shape{n, k} : Shape{k, n});
  b.output(b.op(OpKind::Gemm, testing::attrs({{"transA", int64_t{trans_a}}, {"transB", int64_t{trans_b}}}), {a, w}));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  const Tensor got = emulate_lt_gemm(b.inputs[0], *b.constant_value(w), m, k, n, trans_a, trans_b);
  testing::require_close(got, want->outputs[0]);
}

TEST_CASE("broadcast strides walk both inputs as numpy broadcasting does", "[cuda]") {
  struct Case {
    Shape a, b;
  };
  const Case c = GENERATE(Case{{2, 13, 5, 5}, {1, 13, 1, 1}}, Case{{1, 13, 1, 1}, {2, 13, 5, 5}}, Case{{2, 3}, {3}},
                          Case{{13, 1, 1}, {2, 13, 5, 5}}, Case{{4, 1, 6}, {1, 5, 1}}, Case{{7}, {}});
  testing::Builder b;
  const int x = b.input(c.a);
  const int y = b.input(c.b);
  b.output(b.op(OpKind::Add, {}, {x, y}));
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  const Shape out = want->outputs[0].shape();
  const cuda::BroadcastShape shape = cuda::broadcast_shape(c.a, c.b, out);
  REQUIRE(shape.rank <= static_cast<int>(out.size()));
  // The binary kernel's walk (elementwise.cu), in both of its index widths.
  Tensor got64 = Tensor::zeros(DType::f32, out), got32 = Tensor::zeros(DType::f32, out);
  for (int64_t i = 0; i < got64.numel(); ++i) {
    int64_t a64 = 0, b64 = 0;
    cuda::broadcast_offsets(shape, i, a64, b64);
    got64.data<float>()[i] = b.inputs[0].data<float>()[a64] + b.inputs[1].data<float>()[b64];
    int32_t a32 = 0, b32 = 0;
    cuda::broadcast_offsets(shape, static_cast<int32_t>(i), a32, b32);
    got32.data<float>()[i] = b.inputs[0].data<float>()[a32] + b.inputs[1].data<float>()[b32];
  }
  testing::require_close(got64, want->outputs[0]);
  testing::require_close(got32, want->outputs[0]);
}

TEST_CASE("broadcast shapes collapse to the fewest dims the inputs allow", "[cuda]") {
  // A bias over the last axis: [N*H*W, C]; equal shapes: one dim; per-channel NCHW: [N, C, H*W].
  const cuda::BroadcastShape bias = cuda::broadcast_shape({4, 7, 7, 96}, {96}, {4, 7, 7, 96});
  REQUIRE(bias.rank == 2);
  CHECK(bias.dims[0] == 4 * 7 * 7);
  CHECK(bias.b_strides[0] == 0);
  CHECK(bias.b_strides[1] == 1);
  CHECK(cuda::broadcast_shape({2, 3, 4}, {2, 3, 4}, {2, 3, 4}).rank == 1);
  const cuda::BroadcastShape channel = cuda::broadcast_shape({2, 13, 5, 5}, {1, 13, 1, 1}, {2, 13, 5, 5});
  REQUIRE(channel.rank == 3);
  CHECK(channel.dims[2] == 25);
  CHECK(cuda::broadcast_shape({1, 1}, {1}, {1, 1}).rank == 0);
}

namespace {

// The copy kernel's loop (copy.cu) on the CPU.
Tensor strided_copy(const Tensor& x, const cuda::StridedView& view, const Shape& out) {
  Tensor y = Tensor::zeros(x.dtype(), out);
  int64_t elements = 1;
  for (int d = 0; d < view.rank; ++d) elements *= view.dims[d];
  REQUIRE(elements == y.numel());
  for (int64_t i = 0; i < y.numel(); ++i) {
    y.data<float>()[i] = x.data<float>()[cuda::strided_source(view, i)];
    REQUIRE(cuda::strided_source(view, static_cast<int32_t>(i)) == cuda::strided_source(view, i));
  }
  if (cuda::is_plane_transpose(view)) {
    // The tiled kernel's addressing (copy.cu): output [batch, rows, cols] is contiguous.
    const int64_t batch = view.rank == 3 ? view.dims[0] : 1, rows = view.dims[view.rank - 2], cols = view.dims[view.rank - 1];
    const int64_t batch_stride = view.rank == 3 ? view.in_strides[0] : 0, col_stride = view.in_strides[view.rank - 1];
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          REQUIRE(y.data<float>()[(b * rows + r) * cols + c] == x.data<float>()[view.offset + b * batch_stride + r + c * col_stride]);
  }
  return y;
}

}  // namespace

TEST_CASE("Transpose as a strided view reads what the reference Transpose writes", "[cuda]") {
  const std::vector<int64_t> perm = GENERATE(std::vector<int64_t>{0, 2, 3, 1}, std::vector<int64_t>{3, 2, 1, 0},
                                             std::vector<int64_t>{1, 0, 2, 3}, std::vector<int64_t>{0, 1, 2, 3},
                                             std::vector<int64_t>{0, 3, 1, 2}, std::vector<int64_t>{0, 2, 1, 3});
  testing::Builder b;
  const int x = b.input({2, 3, 4, 5});
  const int y = b.op(OpKind::Transpose, testing::attrs({{"perm", perm}}), {x});
  b.output(y);
  auto want = execute_reference(b.plan, b.inputs);
  REQUIRE(want);
  testing::require_close(strided_copy(b.inputs[0], cuda::transpose_view(b.concrete(x), perm), b.concrete(y)), want->outputs[0]);
}

TEST_CASE("Slice as a strided view reads what the reference Slice writes", "[cuda]") {
  struct Case {
    const char* name;
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const Case c = GENERATE(Case{"channels 1..3", {1}, {3}, {1}, {1}}, Case{"every other row and column", {0, 1}, {100, 100}, {2, 3}, {2, 2}},
                          Case{"reversed last axis", {-1}, {-100}, {-1}, {-1}}, Case{"negative starts, step 3", {-4, 0}, {5, 2}, {3, 0}, {3, 1}});
  INFO(c.name);
  testing::Builder b;
  const int x = b.input({2, 5, 6, 7});
  auto ints = [&](const std::vector<int64_t>& v) { return b.constant(Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v)); };
  const int starts = ints(c.starts), ends = ints(c.ends), axes = ints(c.axes), steps = ints(c.steps);
  const int y = b.op(OpKind::Slice, {}, {x, starts, ends, axes, steps});
  b.output(y);
  auto want = execute_reference(b.plan, b.inputs);
  INFO((want ? std::string() : want.error().message));
  REQUIRE(want);
  auto sliced = ref::slice_axes(b.concrete(x), {b.constant_value(starts), b.constant_value(ends), b.constant_value(axes), b.constant_value(steps)});
  REQUIRE(sliced);
  std::vector<cuda::SlicedAxis> view_axes;
  for (const ref::SliceAxis& a : *sliced) view_axes.push_back({a.axis, a.start, a.step, a.len});
  testing::require_close(strided_copy(b.inputs[0], cuda::slice_view(b.concrete(x), view_axes), b.concrete(y)), want->outputs[0]);
}

TEST_CASE("the device activations compute post_ops.h's definitions", "[cuda]") {
  const PostOps post = GENERATE(PostOps{Activation::none}, PostOps{Activation::relu}, PostOps{Activation::clip, -0.5f, 1.5f},
                                PostOps{Activation::leaky_relu, 0.1f}, PostOps{Activation::sigmoid}, PostOps{Activation::silu},
                                PostOps{Activation::hard_swish}, PostOps{Activation::hard_sigmoid, 0.2f, 0.5f},
                                PostOps{Activation::gelu_erf}, PostOps{Activation::tanh}, PostOps{Activation::elu, 1.0f});
  INFO(activation_name(post.activation));
  const cuda::ActivationParams device = cuda::device_activation(post);
  for (float x = -8.0f; x <= 8.0f; x += 0.03125f) {
    const float want = activation_apply(post, x), got = cuda::activation_value(device, x);
    INFO("x " << x << ": " << got << " vs " << want);
    REQUIRE(std::fabs(got - want) <= 1e-6f * std::max(1.0f, std::fabs(want)));
  }
}

TEST_CASE("the pooling window walk and geometry match the reference pooling", "[cuda]") {
  using Ints = std::vector<int64_t>;
  struct Case {
    const char* name;
    OpKind op;
    Attrs attrs;
  };
  const Case c = GENERATE(
      Case{"max 3x3 stride 2 pad 1", OpKind::MaxPool, testing::attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}})},
      Case{"max 2x2 stride 2 ceil mode", OpKind::MaxPool, testing::attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}})},
      Case{"max 3x3 dilation 2", OpKind::MaxPool, testing::attrs({{"kernel_shape", Ints{3, 3}}, {"dilations", Ints{2, 2}}})},
      Case{"max SAME_UPPER stride 2", OpKind::MaxPool, testing::attrs({{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}})},
      Case{"average 3x3 stride 2 pad 1", OpKind::AveragePool, testing::attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}})},
      Case{"average counting the pads", OpKind::AveragePool,
           testing::attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 1, 2}}, {"count_include_pad", int64_t{1}}})},
      Case{"average ceil mode counting the pads", OpKind::AveragePool,
           testing::attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}},
                           {"count_include_pad", int64_t{1}}})});
  // Ceil-mode windows hang past the end padding along w in the first shape, along h in the second.
  const Shape shape = GENERATE(Shape{2, 3, 13, 16}, Shape{1, 2, 14, 15});
  INFO(c.name << " on " << shape_to_string(shape));
  testing::Builder b;
  const int x = b.input(shape);
  const int y = b.op(c.op, c.attrs, {x});
  b.output(y);
  auto want = execute_reference(b.plan, b.inputs);
  INFO((want ? std::string() : want.error().message));
  REQUIRE(want);
  auto p = cuda::pool2d_geometry(c.op, c.attrs, b.concrete(x), b.concrete(y));
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  Tensor got = Tensor::zeros(DType::f32, b.concrete(y));
  const float* in = b.inputs[0].data<float>();
  Tensor got32 = Tensor::zeros(DType::f32, b.concrete(y));
  for (int64_t i = 0; i < got.numel(); ++i) {
    got.data<float>()[i] = cuda::pool2d_element(*p, i, [in](int64_t at) { return in[at]; });
    got32.data<float>()[i] = cuda::pool2d_element(*p, static_cast<int32_t>(i), [in](int32_t at) { return in[at]; });
  }
  testing::require_close(got, want->outputs[0]);
  testing::require_close(got32, want->outputs[0]);
}

TEST_CASE("depthwise tiles give every output to exactly one thread, in blocks the GPU accepts", "[cuda]") {
  for (const int out_h : {1, 7, 14, 28, 31, 32, 56, 57, 112, 200})
    for (const int out_w : {1, 7, 14, 28, 33, 56, 112, 300})
      for (const int stride : {1, 2})
        for (const int kernel : {3, 7}) {
          cuda::Depthwise2d p;
          p.batch = 1;
          p.channels = 1;
          p.out_h = out_h;
          p.out_w = out_w;
          p.kernel_h = p.kernel_w = kernel;
          p.stride_h = p.stride_w = stride;
          cuda::choose_depthwise_tiles(p);
          INFO(out_h << "x" << out_w << " stride " << stride << " kernel " << kernel << ": tile " << p.tile_h << "x" << p.tile_w
                     << ", " << p.thread_rows << " thread rows");
          REQUIRE(p.tile_w >= 1);
          REQUIRE(p.tile_w <= 32);
          REQUIRE(p.tile_h >= 1);
          const int threads = p.tile_w * p.thread_rows;
          REQUIRE(threads <= 1024);
          REQUIRE(p.tile_h == p.thread_rows * p.rows_per_thread);
          CHECK(p.shared_bytes() <= 48 * 1024);
          // Walk the kernel's loops: block (tile), thread (column, first row), rows by thread_rows.
          std::vector<int> computed(static_cast<size_t>(out_h) * out_w, 0);
          for (int tile = 0; tile < p.tiles_w() * p.tiles_h(); ++tile)
            for (int t = 0; t < threads; ++t) {
              const int oh0 = tile / p.tiles_w() * p.tile_h, ow0 = tile % p.tiles_w() * p.tile_w;
              const int ow = ow0 + t % p.tile_w;
              if (t / p.tile_w >= p.thread_rows || ow >= out_w) continue;
              const int row0 = t / p.tile_w * p.rows_per_thread;
              for (int ty = row0; ty < row0 + p.rows_per_thread && ty < p.tile_h && oh0 + ty < out_h; ++ty)
                ++computed[static_cast<size_t>(oh0 + ty) * out_w + ow];
            }
          CHECK(std::count(computed.begin(), computed.end(), 1) == static_cast<std::ptrdiff_t>(computed.size()));
        }
}

}  // namespace kiln
