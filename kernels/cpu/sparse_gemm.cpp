// Products with a pruned constant weight in CSR form (kiln's sparse kernel), selected only where
// the node says sparse_kernel="csr": prune_magnitude sets it per layer when it measured this
// kernel faster than the dense one for that node's shapes.
//   Gemm  Y[M,N] = A[M,K] x (alpha * B')[K,N] + beta * C   (transA 0; B constant; C absent, a
//         scalar or one value per column, constant)
//   MatMul Y[.., M, N] = A[.., M, K] x B[K, N] (+ bias[N])   (B constant 2-D; all leading rows as one M)
//   Conv 1x1 (W [Co, Ci, 1, 1] constant, group 1, output spatial = input spatial: stride 1, no
//         pad) on float32 plain NCHW or oneDNN NHWC (acdb, what its convolutions write here):
//         NCHW is out[n][co][hw] = sum_ci W[co][ci] x[n][ci][hw]; NHWC is the Gemm form with
//         M = N*H*W pixels.
// All with the fused activation (kernels/post_ops.h); a fused residual is refused (the selection
// then falls to oneDNN). The weight becomes CSR once, at creation: rows = output features (Co or
// N), columns = K, values scaled by alpha. Three loops, per ISA (AVX-512, portable):
//   - spmm: Y[r][0:c] = bias[r] + sum_nz w * D[k][0:c], vectorized over the dense dimension c
//     (4 vectors of 16 at a time), chunk of D outer and rows inner so the chunk stays in cache.
//     NCHW convs run it directly (D = one image, c = H*W);
//   - the Gemm form with M > 1 (Gemm, MatMul, NHWC convs) transposes blocks of 64 rows of A into
//     scratch, runs spmm on them and transposes the block of Y^T back;
//   - spmv (M = 1): per row, 16 nonzeros at a time with a gather of A.
// run() does not allocate: scratch is the engine's.
#include <omp.h>

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/post_ops.h"
#include "kernels/precision.h"

namespace kiln {
namespace {

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

constexpr int64_t kBlock = 64;  // rows of A transposed at a time in the Gemm form (4 vectors)
// Fewer multiply-adds than this run on one thread: a few microseconds of work, less than a fork
// and join costs (and far less than an OpenMP barrier on cores shared with other processes).
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;

struct Csr {
  int64_t rows = 0, cols = 0;
  std::vector<int32_t> row_ptr;  // rows + 1
  std::vector<int32_t> col;
  std::vector<float> val;
};

// CSR of the rows x cols matrix whose (r, k) element is scale * w[r * rs + k * ks].
Csr csr_from_dense(const float* w, int64_t rows, int64_t cols, int64_t rs, int64_t ks, float scale) {
  Csr s;
  s.rows = rows;
  s.cols = cols;
  s.row_ptr.reserve(static_cast<size_t>(rows + 1));
  s.row_ptr.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      const float v = scale * w[r * rs + k * ks];
      if (v == 0.0f) continue;
      s.col.push_back(static_cast<int32_t>(k));
      s.val.push_back(v);
    }
    s.row_ptr.push_back(static_cast<int32_t>(s.col.size()));
  }
  return s;
}

// ---- portable ----

void spmm_portable(const Csr& s, int64_t r0, int64_t r1, const float* d, int64_t ldd, int64_t c, float* y, int64_t ldy,
                   const float* bias) {
  for (int64_t r = r0; r < r1; ++r) {
    float* yr = y + r * ldy;
    std::fill(yr, yr + c, bias ? bias[r] : 0.0f);
    for (int32_t p = s.row_ptr[static_cast<size_t>(r)]; p < s.row_ptr[static_cast<size_t>(r + 1)]; ++p) {
      const float w = s.val[static_cast<size_t>(p)];
      const float* dk = d + s.col[static_cast<size_t>(p)] * ldd;
      for (int64_t j = 0; j < c; ++j) yr[j] += w * dk[j];
    }
  }
}

void spmv_portable(const Csr& s, int64_t r0, int64_t r1, const float* x, float* y, const float* bias) {
  for (int64_t r = r0; r < r1; ++r) {
    float acc = 0.0f;
    for (int32_t p = s.row_ptr[static_cast<size_t>(r)]; p < s.row_ptr[static_cast<size_t>(r + 1)]; ++p)
      acc += s.val[static_cast<size_t>(p)] * x[s.col[static_cast<size_t>(p)]];
    y[r] = acc + (bias ? bias[r] : 0.0f);
  }
}

// ---- AVX-512 ----

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

// Rows r0..r1 over columns [c0, c0 + w) of D, NV vectors (w <= 16 * NV, the last maybe partial).
template <int NV>
KILN_AVX512 void spmm_chunk_avx512(const Csr& s, int64_t r0, int64_t r1, const float* d, int64_t ldd, int64_t c0,
                                   int64_t w, float* y, int64_t ldy, const float* bias) {
  __mmask16 m[NV];
  for (int v = 0; v < NV; ++v) m[v] = lanes(std::max<int64_t>(0, w - 16 * v));
  const int32_t* row_ptr = s.row_ptr.data();
  const int32_t* col = s.col.data();
  const float* val = s.val.data();
  for (int64_t r = r0; r < r1; ++r) {
    __m512 acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = _mm512_set1_ps(bias ? bias[r] : 0.0f);
    for (int32_t p = row_ptr[r]; p < row_ptr[r + 1]; ++p) {
      const __m512 wv = _mm512_set1_ps(val[p]);
      const float* dk = d + col[p] * ldd + c0;
      for (int v = 0; v < NV; ++v) acc[v] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m[v], dk + 16 * v), acc[v]);
    }
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(y + r * ldy + c0 + 16 * v, m[v], acc[v]);
  }
}

KILN_AVX512 void spmm_avx512(const Csr& s, int64_t r0, int64_t r1, const float* d, int64_t ldd, int64_t c, float* y,
                             int64_t ldy, const float* bias) {
  for (int64_t c0 = 0; c0 < c; c0 += 64) {
    const int64_t w = std::min<int64_t>(64, c - c0);
    if (w > 48) spmm_chunk_avx512<4>(s, r0, r1, d, ldd, c0, w, y, ldy, bias);
    else if (w > 32) spmm_chunk_avx512<3>(s, r0, r1, d, ldd, c0, w, y, ldy, bias);
    else if (w > 16) spmm_chunk_avx512<2>(s, r0, r1, d, ldd, c0, w, y, ldy, bias);
    else spmm_chunk_avx512<1>(s, r0, r1, d, ldd, c0, w, y, ldy, bias);
  }
}

KILN_AVX512 void spmv_avx512(const Csr& s, int64_t r0, int64_t r1, const float* x, float* y, const float* bias) {
  const int32_t* col = s.col.data();
  const float* val = s.val.data();
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t r = r0; r < r1; ++r) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int32_t p = s.row_ptr[static_cast<size_t>(r)];
    const int32_t end = s.row_ptr[static_cast<size_t>(r + 1)];
    for (; p + 32 <= end; p += 32) {
      acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(val + p),
                             _mm512_mask_i32gather_ps(zero, 0xFFFF, _mm512_loadu_si512(col + p), x, 4), acc0);
      acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(val + p + 16),
                             _mm512_mask_i32gather_ps(zero, 0xFFFF, _mm512_loadu_si512(col + p + 16), x, 4), acc1);
    }
    for (; p < end; p += 16) {
      const __mmask16 m = lanes(end - p);
      const __m512i idx = _mm512_maskz_loadu_epi32(m, col + p);
      const __m512 xv = _mm512_mask_i32gather_ps(zero, m, idx, x, 4);
      acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, val + p), xv, acc0);
    }
    alignas(64) float sum[16];  // (GCC 12 warns inside _mm512_reduce_add_ps and the unmasked gather)
    _mm512_store_ps(sum, _mm512_add_ps(acc0, acc1));
    float total = bias ? bias[r] : 0.0f;
    for (float v : sum) total += v;
    y[r] = total;
  }
}

// dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols, in 16x16 tiles in registers
// (unpack, then 2x2 and 4x4 blocks of lanes; masked at the edges).
KILN_AVX512 void transpose_avx512(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst, int64_t ldd) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t ni = std::min<int64_t>(16, rows - i0), nj = std::min<int64_t>(16, cols - j0);
      const __mmask16 mj = lanes(nj), mi = lanes(ni);
      __m512 r[16], t[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < ni ? _mm512_maskz_loadu_ps(mj, src + (i0 + i) * lds + j0) : _mm512_setzero_ps();
      for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
      }
      for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; ++i) {
          t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
          t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
        }
      for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
      }
      for (int j = 0; j < nj; ++j) _mm512_mask_storeu_ps(dst + (j0 + j) * ldd + i0, mi, r[j]);
    }
}

// dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols, in 16x16 tiles.
void transpose_portable(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst, int64_t ldd) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t i1 = std::min(rows, i0 + 16), j1 = std::min(cols, j0 + 16);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[j * ldd + i] = src[i * lds + j];
    }
}

enum class Form {
  rows_dense,  // NCHW conv: per image, Y [R, HW] = S x X [K, HW]
  gemm,        // Y [M, R] = A [M, K] x S^T
};

class SparseGemmKernel final : public Kernel {
 public:
  std::vector<Layout> output_layouts() const override { return {out_layout_}; }
  size_t scratch_bytes() const override {
    if (form_ != Form::gemm || m_ == 1) return 0;
    return static_cast<size_t>(threads_ * (s_.cols + s_.rows) * kBlock) * sizeof(float);
  }

  Status run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    if (form_ == Form::rows_dense) run_rows_dense(x, y);
    else if (m_ == 1) run_spmv(x, y);
    else run_gemm(x, y, static_cast<float*>(args.scratch));
    return Status::ok();
  }

  static Result<std::unique_ptr<Kernel>> create(const KernelBuild& b, CpuIsa isa);

 private:
  void transpose(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst, int64_t ldd) const {
    if (isa_ == CpuIsa::avx512) transpose_avx512(src, lds, rows, cols, dst, ldd);
    else transpose_portable(src, lds, rows, cols, dst, ldd);
  }

  void spmm(int64_t r0, int64_t r1, const float* d, int64_t ldd, int64_t c, float* y, int64_t ldy) const {
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    if (isa_ == CpuIsa::avx512) spmm_avx512(s_, r0, r1, d, ldd, c, y, ldy, bias);
    else spmm_portable(s_, r0, r1, d, ldd, c, y, ldy, bias);
  }

  // Rows of Y in one part per thread, `images` times.
  void run_rows_dense(const float* x, float* y) const {
    const int64_t rows = s_.rows, k = s_.cols, tasks = images_ * threads_;
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel_)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t n = t / threads_, part = t % threads_;
      const int64_t r0 = split_[static_cast<size_t>(part)], r1 = split_[static_cast<size_t>(part + 1)];
      float* yn = y + n * rows * hw_;
      spmm(r0, r1, x + n * k * hw_, hw_, hw_, yn, hw_);
      cpu::apply_activation(isa_, post_ops_, yn + r0 * hw_, (r1 - r0) * hw_);
    }
  }

  void run_spmv(const float* x, float* y) const {
    const float* bias = bias_.empty() ? nullptr : bias_.data();
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel_)
    for (int64_t part = 0; part < threads_; ++part) {
      const int64_t r0 = split_[static_cast<size_t>(part)], r1 = split_[static_cast<size_t>(part + 1)];
      if (isa_ == CpuIsa::avx512) spmv_avx512(s_, r0, r1, x, y, bias);
      else spmv_portable(s_, r0, r1, x, y, bias);
      cpu::apply_activation(isa_, post_ops_, y + r0, r1 - r0);
    }
  }

  // Blocks of kBlock rows of A: transposed into scratch (AT [K, kBlock]), Y^T [R, kBlock] = S x AT,
  // transposed back into Y. Whole blocks per thread when there are enough, else the rows of S
  // are split over the threads within each block.
  void run_gemm(const float* a, float* y, float* scratch) const {
    const int64_t k = s_.cols, rows = s_.rows, blocks = (m_ + kBlock - 1) / kBlock;
    const int64_t per_thread = (k + rows) * kBlock;
    if (blocks >= threads_) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel_)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        float* at = scratch + omp_get_thread_num() * per_thread;
        float* yt = at + k * kBlock;
        const int64_t m0 = blk * kBlock, mb = std::min(kBlock, m_ - m0);
        transpose(a + m0 * k, k, mb, k, at, kBlock);
        spmm(0, rows, at, kBlock, mb, yt, kBlock);
        transpose(yt, kBlock, rows, mb, y + m0 * rows, rows);
        cpu::apply_activation(isa_, post_ops_, y + m0 * rows, mb * rows);
      }
      return;
    }
    float* at = scratch;
    float* yt = at + k * kBlock;
    for (int64_t m0 = 0; m0 < m_; m0 += kBlock) {
      const int64_t mb = std::min(kBlock, m_ - m0);
      transpose(a + m0 * k, k, mb, k, at, kBlock);
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel_)
      for (int64_t part = 0; part < threads_; ++part)
        spmm(split_[static_cast<size_t>(part)], split_[static_cast<size_t>(part + 1)], at, kBlock, mb, yt, kBlock);
      transpose(yt, kBlock, rows, mb, y + m0 * rows, rows);
      cpu::apply_activation(isa_, post_ops_, y + m0 * rows, mb * rows);
    }
  }

  CpuIsa isa_ = CpuIsa::portable;
  int64_t threads_ = 1;
  bool parallel_ = false;  // threads_ > 1 and enough work (kMinParallelMacs)
  // The rows of S each thread's part begins with (threads_ + 1 entries), cut at equal shares of the
  // nonzeros: a global threshold leaves rows of very different lengths.
  std::vector<int64_t> split_;
  Form form_ = Form::gemm;
  Csr s_;
  std::vector<float> bias_;  // per row of S (output feature); empty for none
  PostOps post_ops_;
  int64_t m_ = 1;       // gemm: rows of A
  int64_t images_ = 1;  // rows_dense: N
  int64_t hw_ = 1;      // rows_dense: H * W
  Layout out_layout_;
};

// ---- what runs here ----

bool given(const KernelBuild& b, size_t i) { return b.inputs.size() > i && b.inputs[i].present; }

std::optional<std::string> check_constant_f32(const ValueDesc& v, const char* what) {
  if (v.constant == nullptr) return std::string(what) + " must be a constant (the weight is converted to CSR once)";
  if (v.dtype != DType::f32) return std::string(what) + " must be float32";
  return std::nullopt;
}

std::optional<std::string> check_plain_input(const ValueDesc& v, const char* what) {
  if (v.dtype != DType::f32) return std::string(what) + " must be float32";
  if (!v.layout.plain()) return std::string(what) + " must be plain (has " + v.layout.describe() + ")";
  return std::nullopt;
}

std::optional<std::string> gemm_checks(const KernelBuild& b) {
  if (b.inputs.size() < 2) return "needs A and B";
  if (auto why = check_plain_input(b.inputs[0], "A")) return why;
  if (auto why = check_constant_f32(b.inputs[1], "B")) return why;
  if (b.inputs[0].shape.size() != 2 || b.inputs[1].shape.size() != 2) return "A and B must be 2-D";
  auto ta = b.attrs->get_int("transA", 0);
  auto tb = b.attrs->get_int("transB", 0);
  auto alpha = b.attrs->get_float("alpha", 1.0f);
  auto beta = b.attrs->get_float("beta", 1.0f);
  if (!ta || !tb || !alpha || !beta) return "bad Gemm attributes";
  if (*ta != 0) return "transA = 1 is not implemented";
  if (*tb != 0 && *tb != 1) return "bad transB";
  if (given(b, 2) && *beta != 0.0f) {
    const ValueDesc& c = b.inputs[2];
    if (auto why = check_constant_f32(c, "C")) return why;
    const int64_t n = b.outputs[0].shape[1], count = shape_numel(c.shape);
    const bool per_column = count == n && (c.shape.size() == 1 || (c.shape.size() == 2 && c.shape[0] == 1));
    if (count != 1 && !per_column) return "C must be a scalar or one value per output column";
  }
  if (given(b, 3)) return "a fused residual is not implemented";
  return std::nullopt;
}

std::optional<std::string> matmul_checks(const KernelBuild& b) {
  if (b.inputs.size() < 2) return "needs A and B";
  if (auto why = check_plain_input(b.inputs[0], "A")) return why;
  if (auto why = check_constant_f32(b.inputs[1], "B")) return why;
  if (b.inputs[0].shape.size() < 2) return "A must have rank >= 2";
  if (b.inputs[1].shape.size() != 2) return "B must be 2-D";
  if (given(b, 2)) {
    if (auto why = check_constant_f32(b.inputs[2], "bias")) return why;
    if (shape_numel(b.inputs[2].shape) != b.inputs[1].shape[1]) return "bias must have one value per output column";
  }
  if (given(b, 3)) return "a fused residual is not implemented";
  return std::nullopt;
}

std::optional<std::string> conv_checks(const KernelBuild& b) {
  if (b.inputs.size() < 2) return "needs X and W";
  const ValueDesc& x = b.inputs[0];
  if (cpu::pixel_order(x) == cpu::PixelOrder::other)
    return "X must be float32 4-D plain NCHW or NHWC (has " + x.layout.describe() + ")";
  if (auto why = check_constant_f32(b.inputs[1], "W")) return why;
  const Shape& w = b.inputs[1].shape;
  if (w.size() != 4 || w[2] != 1 || w[3] != 1) return "only 1x1 convolutions";
  if (w[1] != x.shape[1]) return "only group 1";
  const Shape& y = b.outputs[0].shape;
  if (y.size() != 4 || y[2] != x.shape[2] || y[3] != x.shape[3]) return "only stride 1 without padding";
  if (given(b, 2)) {
    if (auto why = check_constant_f32(b.inputs[2], "bias")) return why;
    if (shape_numel(b.inputs[2].shape) != w[0]) return "bias must have one value per output channel";
  }
  if (given(b, 3)) return "a fused residual is not implemented";
  return std::nullopt;
}

template <CpuIsa isa>
std::optional<std::string> sparse_supports(const KernelBuild& b) {
  if (b.op != OpKind::Gemm && b.op != OpKind::MatMul && b.op != OpKind::Conv) return "handles Gemm, MatMul and Conv only";
  auto mode = b.attrs->get_string(std::string(kSparseKernelAttr), "");
  if (!mode) return mode.error().message;
  if (*mode != "csr") return "runs only nodes marked sparse_kernel=\"csr\" (prune_magnitude, where measured faster)";
  if (!cpu_isa_available(isa)) return "this CPU (or KILN_CPU_ISA) has no " + std::string(cpu_isa_name(isa));
  auto precision = precision_from_attrs(*b.attrs);
  if (!precision) return precision.error().message;
  if (*precision != Precision::fp32) return "float32 only (the node asks for " + std::string(precision_name(*precision)) + ")";
  auto post_ops = post_ops_from_attrs(*b.attrs);
  if (!post_ops) return post_ops.error().message;
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  if (b.op == OpKind::Gemm) return gemm_checks(b);
  if (b.op == OpKind::MatMul) return matmul_checks(b);
  return conv_checks(b);
}

Result<std::unique_ptr<Kernel>> SparseGemmKernel::create(const KernelBuild& b, CpuIsa isa) {
  auto k = std::make_unique<SparseGemmKernel>();
  k->isa_ = isa;
  k->threads_ = std::max(1, b.threads);
  KILN_ASSIGN(post_ops, post_ops_from_attrs(*b.attrs));
  k->post_ops_ = post_ops;
  const Tensor& w = *b.inputs[1].constant;
  const float* wd = w.data<float>();
  if (b.op == OpKind::Conv) {
    const Shape& x = b.inputs[0].shape;
    const int64_t co = b.inputs[1].shape[0], ci = x[1];
    k->s_ = csr_from_dense(wd, co, ci, ci, 1, 1.0f);
    if (given(b, 2)) {
      const float* bias = b.inputs[2].constant->data<float>();
      k->bias_.assign(bias, bias + co);
    }
    if (cpu::pixel_order(b.inputs[0]) == cpu::PixelOrder::nchw) {
      k->form_ = Form::rows_dense;
      k->images_ = x[0];
      k->hw_ = x[2] * x[3];
    } else {  // NHWC: [N*H*W, Ci] x W^T, written NHWC for the next oneDNN convolution
      k->form_ = Form::gemm;
      k->m_ = x[0] * x[2] * x[3];
      k->out_layout_ = cpu::nhwc_layout(b.outputs[0].shape, static_cast<int>(k->threads_));
    }
  } else if (b.op == OpKind::Gemm) {
    KILN_ASSIGN(alpha, b.attrs->get_float("alpha", 1.0f));
    KILN_ASSIGN(beta, b.attrs->get_float("beta", 1.0f));
    KILN_ASSIGN(tb, b.attrs->get_int("transB", 0));
    const int64_t m = b.outputs[0].shape[0], n = b.outputs[0].shape[1], kk = b.inputs[0].shape[1];
    // S[n][k] = alpha * B'[k][n]: B is [N, K] with transB, else [K, N].
    k->s_ = tb ? csr_from_dense(wd, n, kk, kk, 1, alpha) : csr_from_dense(wd, n, kk, 1, n, alpha);
    k->m_ = m;
    if (given(b, 2) && beta != 0.0f) {
      const Tensor& c = *b.inputs[2].constant;
      k->bias_.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) k->bias_[static_cast<size_t>(j)] = beta * c.data<float>()[c.numel() == 1 ? 0 : j];
    }
  } else {
    const Shape& a = b.inputs[0].shape;
    const int64_t kk = a.back(), n = b.inputs[1].shape[1];
    k->s_ = csr_from_dense(wd, n, kk, 1, n, 1.0f);
    k->m_ = shape_numel(a) / kk;
    if (given(b, 2)) {
      const float* bias = b.inputs[2].constant->data<float>();
      k->bias_.assign(bias, bias + n);
    }
  }
  const int64_t nnz = static_cast<int64_t>(k->s_.val.size());
  for (int64_t part = 0, r = 0; part <= k->threads_; ++part) {
    if (part == k->threads_) r = k->s_.rows;
    while (r < k->s_.rows && k->s_.row_ptr[static_cast<size_t>(r)] < nnz * part / k->threads_) ++r;
    k->split_.push_back(r);
  }
  // A gathered multiply-add (spmv) costs about what 16 vector lanes do.
  const int64_t columns = k->form_ == Form::rows_dense ? k->images_ * k->hw_ : k->m_ == 1 ? 16 : k->m_;
  k->parallel_ = k->threads_ > 1 && nnz * columns >= kMinParallelMacs;
  assert(k->s_.cols < (int64_t{1} << 31) && static_cast<int64_t>(k->s_.val.size()) < (int64_t{1} << 31));
  return std::unique_ptr<Kernel>(std::move(k));
}

template <CpuIsa isa>
Result<std::unique_ptr<Kernel>> sparse_create(const KernelBuild& b) {
  if (auto why = sparse_supports<isa>(b)) return make_error(ErrorCode::unsupported, *why);
  return SparseGemmKernel::create(b, isa);
}

}  // namespace

const KernelImpl kCpuSparseGemmAvx512{"cpu.sparse_gemm.avx512", sparse_supports<CpuIsa::avx512>,
                                      sparse_create<CpuIsa::avx512>};
const KernelImpl kCpuSparseGemmPortable{"cpu.sparse_gemm.portable", sparse_supports<CpuIsa::portable>,
                                        sparse_create<CpuIsa::portable>};

}  // namespace kiln
