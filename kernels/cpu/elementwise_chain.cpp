// ElementwiseChain (kernels/reference/elementwise_chain.cpp) block by block: the flat output is cut
// into chunks small enough that every temporary of the program stays in L1 (<= 32 KB a thread),
// and for each chunk the instructions run one after another over it, so X and the operands are
// read once and Y is written once instead of one pass over memory per fused op. Operands that
// repeat along the flat order (a scalar, a trailing vector such as a bias [C] on [.., C], a
// per-channel [1,C,1,1] on NCHW, the full shape) are read in place or spread into the chunk from
// their period; other broadcasts are refused and the reference kernel runs them.
// Inputs are plain, or 4-D with every full-shape input in NHWC (oneDNN's acdb, float32 or bfloat16,
// widened chunk by chunk) and the output then written NHWC too: the order of the flat index is
// N, H, W, C, so a per-channel operand repeats as a trailing vector. ConvNeXt's layer scale and
// residual read the MLP's output through a transposing view (cpu.transpose_view) and the block's
// input as the convs and the previous chain wrote it, with no transpose to NCHW between blocks.
// AVX-512: arithmetic, max/min, relu, prelu, sqrt exactly as the reference (IEEE); erf, exp and
// sigmoid with the vector math of kernels/cpu/activation (errors ~5e-7); tanh, log and pow (other
// than x^2) per element. AVX2: erf, exp and sigmoid on the 8-lane vector math, the rest as
// portable. Portable: the reference arithmetic, per element.
#include <omp.h>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/pixel_order.h"
#include "kernels/elementwise_program.h"

namespace kiln {
namespace {

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

constexpr int64_t kChunkBytesPerThread = 32 * 1024;  // the program's temporaries: within L1 (48 KB here)
constexpr int64_t kMinChunk = 256, kMaxChunk = 1024;  // floats
constexpr int64_t kMinParallel = 16 * 1024;           // fewer values than this: one thread (a fork costs more)

// How an operand's elements repeat along Y's flat order: element i reads operand[(i / inner) % period].
// Full shape: inner 1, period = numel; [C] on [.., C]: inner 1, period C; [1,C,1,1] on [N,C,H,W]:
// inner H*W, period C; a scalar: period 1.
struct Repeat {
  int64_t inner = 1, period = 1;
};

// The Repeat of `operand` broadcast to `out`, when its kept (non-broadcast) axes are one run of
// consecutive axes of `out` (axes where `out` is 1 do not count); std::nullopt otherwise.
std::optional<Repeat> repeat_of(const Shape& operand, const Shape& out) {
  if (operand.size() > out.size()) return std::nullopt;
  const size_t offset = out.size() - operand.size();
  Repeat r;
  bool kept_seen = false, kept_ended = false;
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t od = d < offset ? 1 : operand[d - offset];
    if (out[d] == 1) continue;
    if (od == out[d]) {
      if (kept_ended) return std::nullopt;  // a second run of kept axes
      kept_seen = true;
      r.period *= out[d];
    } else if (od == 1) {
      if (kept_seen) kept_ended = true;
      if (kept_ended) r.inner *= out[d];
    } else {
      return std::nullopt;
    }
  }
  return r;
}

// True when the chain runs in NHWC order: 4-D, and some full-shape input is in a oneDNN layout
// (supports_on checks that all of them are NHWC).
bool nhwc_mode(const KernelBuild& b) {
  const Shape& y = b.outputs[0].shape;
  if (y.size() != 4) return false;
  return std::any_of(b.inputs.begin(), b.inputs.end(),
                     [&](const ValueDesc& v) { return v.present && v.shape == y && !v.layout.plain(); });
}

// A shape of rank <= 4, aligned to 4 axes as broadcasting does, in N, H, W, C order.
Shape to_nhwc_order(const Shape& s) {
  Shape a(4 - std::min<size_t>(4, s.size()), 1);
  a.insert(a.end(), s.begin(), s.end());
  return {a[0], a[2], a[3], a[1]};
}

// One source of an instruction over a chunk: a pointer to its values, or (p null) one value.
struct Operand {
  const float* p = nullptr;
  float s = 0.0f;
};

// ---- portable: the reference arithmetic (chain_op_apply), per element ----

template <ChainOp Op>
void apply_portable(Operand a, Operand b, float* y, int64_t n) {
  if (a.p && b.p) {
    for (int64_t i = 0; i < n; ++i) y[i] = chain_op_apply(Op, a.p[i], b.p[i]);
  } else if (a.p) {
    for (int64_t i = 0; i < n; ++i) y[i] = chain_op_apply(Op, a.p[i], b.s);
  } else if (b.p) {
    for (int64_t i = 0; i < n; ++i) y[i] = chain_op_apply(Op, a.s, b.p[i]);
  } else {
    std::fill(y, y + n, chain_op_apply(Op, a.s, b.s));
  }
}

using ApplyFn = void (*)(Operand a, Operand b, float* y, int64_t n);

template <size_t... I>
constexpr std::array<ApplyFn, sizeof...(I)> portable_table(std::index_sequence<I...>) {
  return {&apply_portable<static_cast<ChainOp>(I)>...};
}
constexpr auto kPortable = portable_table(std::make_index_sequence<kChainOpCount>{});

// ---- AVX-512 ----

template <ChainOp Op>
KILN_AVX512 inline __m512 binary_avx512(__m512 a, __m512 b) {
  if constexpr (Op == ChainOp::add) return _mm512_add_ps(a, b);
  else if constexpr (Op == ChainOp::sub) return _mm512_sub_ps(a, b);
  else if constexpr (Op == ChainOp::mul) return _mm512_mul_ps(a, b);
  else if constexpr (Op == ChainOp::div) return _mm512_div_ps(a, b);
  else if constexpr (Op == ChainOp::max) {
    // vmaxps(b, a) is (b > a ? b : a): the reference's a < b ? b : a, also for ±0; NaN either way -> NaN.
    return _mm512_mask_add_ps(_mm512_max_ps(b, a), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
  } else if constexpr (Op == ChainOp::min) {
    return _mm512_mask_add_ps(_mm512_min_ps(b, a), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
  } else if constexpr (Op == ChainOp::prelu) {
    return _mm512_mask_mul_ps(a, _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);
  } else {
    static_assert(Op == ChainOp::pow, "a binary op");
    return _mm512_mul_ps(a, a);  // pow runs here only with the exponent 2 (see apply_avx512)
  }
}

template <bool kVector>
KILN_AVX512 inline __m512 load(Operand o, int64_t i, __mmask16 m) {
  if constexpr (kVector) return _mm512_maskz_loadu_ps(m, o.p + i);
  else return _mm512_set1_ps(o.s);
}

template <ChainOp Op, bool kVecA, bool kVecB>
KILN_AVX512 void binary_loop_avx512(Operand a, Operand b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, binary_avx512<Op>(load<kVecA>(a, i, 0xFFFF), load<kVecB>(b, i, 0xFFFF)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, binary_avx512<Op>(load<kVecA>(a, i, m), load<kVecB>(b, i, m)));
  }
}

template <ChainOp Op>
KILN_AVX512 void binary_entry_avx512(Operand a, Operand b, float* y, int64_t n) {
  if (a.p && b.p) binary_loop_avx512<Op, true, true>(a, b, y, n);
  else if (a.p) binary_loop_avx512<Op, true, false>(a, b, y, n);
  else if (b.p) binary_loop_avx512<Op, false, true>(a, b, y, n);
  else binary_loop_avx512<Op, false, false>(a, b, y, n);
}

template <size_t... I>
constexpr std::array<ApplyFn, sizeof...(I)> binary_avx512_table(std::index_sequence<I...>) {
  return {&binary_entry_avx512<static_cast<ChainOp>(I)>...};
}
constexpr size_t kBinaryOps = static_cast<size_t>(ChainOp::prelu) + 1;  // the binary ops come first
constexpr auto kBinaryAvx512 = binary_avx512_table(std::make_index_sequence<kBinaryOps>{});

// y = f(a) over 16 lanes at a time, a tail masked.
template <typename F>
KILN_AVX512 inline void unary_loop_avx512(const float* a, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(a + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, a + i)));
  }
}

struct ReluAvx512 {
  KILN_AVX512 __m512 operator()(__m512 v) const {
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
  }
};
struct NegAvx512 {
  KILN_AVX512 __m512 operator()(__m512 v) const { return _mm512_xor_ps(v, _mm512_set1_ps(-0.0f)); }
};
struct AbsAvx512 {
  KILN_AVX512 __m512 operator()(__m512 v) const { return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), v); }
};
struct ReciprocalAvx512 {
  KILN_AVX512 __m512 operator()(__m512 v) const { return _mm512_div_ps(_mm512_set1_ps(1.0f), v); }
};
struct SqrtAvx512 {
  KILN_AVX512 __m512 operator()(__m512 v) const { return _mm512_sqrt_ps(v); }
};
// 1 / (1 + e), e = exp(-x) already in the buffer.
struct SigmoidTailAvx512 {
  KILN_AVX512 __m512 operator()(__m512 e) const {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, e));
  }
};

KILN_AVX512 void apply_avx512(ChainOp op, Operand a, Operand b, float* y, int64_t n) {
  if (op == ChainOp::pow && !(a.p && !b.p && b.s == 2.0f)) return kPortable[static_cast<size_t>(op)](a, b, y, n);
  if (chain_op_is_binary(op)) return kBinaryAvx512[static_cast<size_t>(op)](a, b, y, n);
  switch (op) {  // unary: a is a vector here (the kernel computes a unary op of a scalar once a run)
    case ChainOp::relu: return unary_loop_avx512(a.p, y, n, ReluAvx512{});
    case ChainOp::neg: return unary_loop_avx512(a.p, y, n, NegAvx512{});
    case ChainOp::abs: return unary_loop_avx512(a.p, y, n, AbsAvx512{});
    case ChainOp::reciprocal: return unary_loop_avx512(a.p, y, n, ReciprocalAvx512{});
    case ChainOp::sqrt: return unary_loop_avx512(a.p, y, n, SqrtAvx512{});
    case ChainOp::erf: return cpu::erf_values(CpuIsa::avx512, a.p, y, n);
    case ChainOp::exp: return cpu::exp_values(CpuIsa::avx512, a.p, y, n);
    case ChainOp::sigmoid:  // 1 / (1 + exp(-x)): 0 and 1 at the infinities, NaN stays NaN
      unary_loop_avx512(a.p, y, n, NegAvx512{});
      cpu::exp_values(CpuIsa::avx512, y, y, n);
      return unary_loop_avx512(y, y, n, SigmoidTailAvx512{});
    default: return kPortable[static_cast<size_t>(op)](a, b, y, n);  // tanh, log
  }
}

// AVX2: the transcendental ops (the ones a scalar loop makes slow: ConvNeXt's GELU spends its time
// in erf) on the 8-lane polynomial; the rest as the portable loops, which the compiler vectorizes.
void apply_avx2(ChainOp op, Operand a, Operand b, float* y, int64_t n) {
  switch (op) {  // unary: a is a vector here, as in apply_avx512
    case ChainOp::erf: return cpu::erf_values(CpuIsa::avx2, a.p, y, n);
    case ChainOp::exp: return cpu::exp_values(CpuIsa::avx2, a.p, y, n);
    case ChainOp::sigmoid: {
      if (y != a.p) std::copy(a.p, a.p + n, y);
      PostOps sigmoid;
      sigmoid.activation = Activation::sigmoid;
      return cpu::apply_activation(CpuIsa::avx2, sigmoid, y, n);
    }
    default: return kPortable[static_cast<size_t>(op)](a, b, y, n);
  }
}

// ---- the kernel ----

// Where a register's values are during a chunk.
enum class Where {
  scalar,  // one value for the whole run (scalars, scalar inputs, instructions of scalars only)
  input,   // read in place: X or a full-shape input, at the chunk's offset
  spread,  // a repeating input, spread into its buffer slot at the start of each chunk
  widen,   // a full-shape bfloat16 input, converted into its buffer slot at the start of each chunk
  slot,    // an instruction's result in a buffer slot of the thread
  output,  // the last instruction: written straight into Y
  unused,  // an input no instruction reads
};

struct Register {
  Where where = Where::unused;
  int input = -1;  // input index (input, spread, scalar inputs)
  int slot = -1;   // buffer slot (spread, slot); others may take it after the register's last reader
  Repeat repeat;   // spread
};

class ElementwiseChainKernel final : public Kernel {
 public:
  std::vector<Layout> output_layouts() const override { return {out_layout_}; }
  size_t scratch_bytes() const override { return static_cast<size_t>(threads_ * slots_ * chunk_) * sizeof(float) + 64; }
  // Y[i] is written after X[i] is read, chunk by chunk; a bfloat16 X has half Y's bytes.
  int in_place_input() const override { return regs_.empty() || regs_[0].where != Where::widen ? 0 : -1; }

  Status run(const KernelArgs& args) override {
    // The run's scalars: scalar inputs, then instructions that read scalars only (in order).
    for (size_t r = 0; r < regs_.size(); ++r)
      if (regs_[r].where == Where::scalar && regs_[r].input >= 0)
        scalar_[r] = static_cast<const float*>(args.inputs[static_cast<size_t>(regs_[r].input)])[0];
    for (size_t j = 0; j < program_.code.size(); ++j) {
      const ChainInstruction& in = program_.code[j];
      const size_t r = static_cast<size_t>(program_.first_result()) + j;
      if (regs_[r].where == Where::scalar)
        scalar_[r] = chain_op_apply(in.op, scalar_[static_cast<size_t>(in.a)], in.b < 0 ? 0.0f : scalar_[static_cast<size_t>(in.b)]);
    }
    const auto base = reinterpret_cast<uintptr_t>(args.scratch);
    float* scratch = reinterpret_cast<float*>((base + 63) / 64 * 64);
    const int64_t chunks = (count_ + chunk_ - 1) / chunk_;
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1 && count_ >= kMinParallel)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * chunk_;
      run_chunk(args, begin, std::min(chunk_, count_ - begin), scratch + omp_get_thread_num() * slots_ * chunk_);
    }
    return Status::ok();
  }

  static Result<std::unique_ptr<Kernel>> create(const KernelBuild& b, CpuIsa isa) {
    KILN_ASSIGN(program, elementwise_program_from_attrs(*b.attrs, b.inputs.size()));
    auto k = std::unique_ptr<ElementwiseChainKernel>(new ElementwiseChainKernel);
    k->isa_ = isa;
    k->threads_ = std::max(1, b.threads);
    k->count_ = shape_numel(b.outputs[0].shape);
    k->program_ = std::move(program);
    if (nhwc_mode(b)) k->out_layout_ = cpu::nhwc_layout(b.outputs[0].shape, k->threads_);
    KILN_TRY(k->place_registers(b));
    // As long a chunk as keeps all buffer slots of a thread within kChunkBytesPerThread.
    const int64_t fit = kChunkBytesPerThread / static_cast<int64_t>(sizeof(float)) / std::max<int64_t>(1, k->slots_);
    k->chunk_ = std::clamp<int64_t>(fit / 16 * 16, kMinChunk, kMaxChunk);
    return std::unique_ptr<Kernel>(std::move(k));
  }

 private:
  // Decides where each register lives; buffer slots are reused once a register's last reader ran.
  Status place_registers(const KernelBuild& b) {
    const ElementwiseProgram& p = program_;
    const size_t count = static_cast<size_t>(p.registers());
    regs_.assign(count, Register{});
    scalar_.assign(count, 0.0f);
    std::vector<int> last_read(count, -1);
    for (size_t j = 0; j < p.code.size(); ++j) {
      last_read[static_cast<size_t>(p.code[j].a)] = static_cast<int>(j);
      if (p.code[j].b >= 0) last_read[static_cast<size_t>(p.code[j].b)] = static_cast<int>(j);
    }
    std::vector<int> free_slots;
    std::vector<bool> released(count, false);
    auto take_slot = [&] {
      if (free_slots.empty()) return slots_++;
      const int s = free_slots.back();
      free_slots.pop_back();
      return s;
    };
    const bool nhwc = nhwc_mode(b);
    const Shape out = nhwc ? to_nhwc_order(b.outputs[0].shape) : b.outputs[0].shape;
    for (int r = 0; r <= p.operands; ++r) {
      Register& g = regs_[static_cast<size_t>(r)];
      g.input = r;
      if (last_read[static_cast<size_t>(r)] < 0) continue;  // unused
      const ValueDesc& v = b.inputs[static_cast<size_t>(r)];
      const auto rep = repeat_of(nhwc ? to_nhwc_order(v.shape) : v.shape, out);
      KILN_REQUIRE(rep.has_value(), unsupported, "input ", r, " has shape ", shape_to_string(v.shape),
                   ", which does not repeat along the output's flat order as a scalar, a run of axes or the full shape");
      if (rep->period == 1) {
        g.where = Where::scalar;
      } else if (nhwc && cpu::is_nhwc_bf16(v)) {
        g.where = Where::widen;
        g.slot = take_slot();
      } else if (rep->inner == 1 && rep->period == count_) {
        g.where = Where::input;
      } else {
        g.where = Where::spread;
        g.repeat = *rep;
        g.slot = take_slot();
      }
    }
    for (size_t s = 0; s < p.scalars.size(); ++s) {
      const size_t r = static_cast<size_t>(p.first_scalar()) + s;
      regs_[r].where = Where::scalar;
      scalar_[r] = p.scalars[s];
    }
    for (size_t j = 0; j < p.code.size(); ++j) {
      // Registers read for the last time by instruction j (or never) give their slot back first:
      // j may then write where it reads, which every loop here allows (same element, read first).
      for (size_t r = 0; r < static_cast<size_t>(p.first_result()) + j; ++r) {
        const Register& g = regs_[r];
        if (g.slot >= 0 && !released[r] && last_read[r] <= static_cast<int>(j)) {
          free_slots.push_back(g.slot);
          released[r] = true;
        }
      }
      const ChainInstruction& in = p.code[j];
      const bool scalar_only = regs_[static_cast<size_t>(in.a)].where == Where::scalar &&
                               (in.b < 0 || regs_[static_cast<size_t>(in.b)].where == Where::scalar);
      Register& g = regs_[static_cast<size_t>(p.first_result()) + j];
      if (j + 1 == p.code.size()) {
        KILN_REQUIRE(!scalar_only, unsupported, "the result depends on no tensor");
        g.where = Where::output;
      } else if (scalar_only) {
        g.where = Where::scalar;
      } else {
        g.where = Where::slot;
        g.slot = take_slot();
      }
    }
    return Status::ok();
  }

  Operand source(const KernelArgs& args, int r, int64_t begin, float* buffers) const {
    const Register& g = regs_[static_cast<size_t>(r)];
    switch (g.where) {
      case Where::scalar: return {nullptr, scalar_[static_cast<size_t>(r)]};
      case Where::input: return {static_cast<const float*>(args.inputs[static_cast<size_t>(g.input)]) + begin};
      default: return {buffers + g.slot * chunk_};
    }
  }

  void run_chunk(const KernelArgs& args, int64_t begin, int64_t n, float* buffers) const {
    for (size_t r = 0; r < regs_.size(); ++r) {
      if (regs_[r].where == Where::spread)
        spread(static_cast<const float*>(args.inputs[static_cast<size_t>(regs_[r].input)]), regs_[r].repeat, begin, n,
               buffers + regs_[r].slot * chunk_);
      else if (regs_[r].where == Where::widen)
        widen(static_cast<const uint16_t*>(args.inputs[static_cast<size_t>(regs_[r].input)]) + begin, n,
              buffers + regs_[r].slot * chunk_);
    }
    float* y = static_cast<float*>(args.outputs[0]) + begin;
    for (size_t j = 0; j < program_.code.size(); ++j) {
      const ChainInstruction& in = program_.code[j];
      const size_t r = static_cast<size_t>(program_.first_result()) + j;
      if (regs_[r].where == Where::scalar) continue;
      float* dst = regs_[r].where == Where::output ? y : buffers + regs_[r].slot * chunk_;
      const Operand a = source(args, in.a, begin, buffers);
      const Operand b = in.b < 0 ? Operand{} : source(args, in.b, begin, buffers);
      if (isa_ == CpuIsa::avx512) apply_avx512(in.op, a, b, dst, n);
      else if (isa_ == CpuIsa::avx2) apply_avx2(in.op, a, b, dst, n);
      else kPortable[static_cast<size_t>(in.op)](a, b, dst, n);
    }
  }

  // bfloat16 to float32: the upper half of the float's bits (exact).
  static void widen(const uint16_t* src, int64_t n, float* dst) {
    auto* bits = reinterpret_cast<uint32_t*>(dst);
    for (int64_t t = 0; t < n; ++t) bits[t] = static_cast<uint32_t>(src[t]) << 16;
  }

  // dst[t] = src[((begin + t) / inner) % period] for t < n: runs of the period, or runs of one value.
  static void spread(const float* src, Repeat rep, int64_t begin, int64_t n, float* dst) {
    if (rep.inner == 1) {
      for (int64_t t = 0, pos = begin % rep.period; t < n; pos = 0) {
        const int64_t len = std::min(rep.period - pos, n - t);
        std::memcpy(dst + t, src + pos, static_cast<size_t>(len) * sizeof(float));
        t += len;
      }
      return;
    }
    for (int64_t t = 0, row = begin / rep.inner, pos = begin % rep.inner; t < n; ++row, pos = 0) {
      const int64_t len = std::min(rep.inner - pos, n - t);
      std::fill(dst + t, dst + t + len, src[row % rep.period]);
      t += len;
    }
  }

  CpuIsa isa_ = CpuIsa::portable;
  int threads_ = 1;
  int64_t count_ = 0, chunk_ = kMaxChunk;
  int slots_ = 0;
  ElementwiseProgram program_;
  Layout out_layout_;  // plain, or NHWC when the full-shape inputs are
  std::vector<Register> regs_;
  std::vector<float> scalar_;  // Where::scalar registers' values for the current run
};

std::optional<std::string> supports_on(const KernelBuild& b, CpuIsa isa) {
  if (b.op != OpKind::ElementwiseChain) return "handles ElementwiseChain only";
  if (!cpu_isa_available(isa)) return "this CPU (or KILN_CPU_ISA) has no " + std::string(cpu_isa_name(isa));
  if (b.outputs.size() != 1 || b.outputs[0].dtype != DType::f32) return "needs one float32 output";
  if (b.inputs.empty() || b.inputs[0].shape != b.outputs[0].shape) return "X must have the output's shape";
  const bool nhwc = nhwc_mode(b);
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    const ValueDesc& v = b.inputs[i];
    if (!v.present || v.dtype != DType::f32) return "input " + std::to_string(i) + " must be float32";
    if (v.layout.plain()) {
      // In NHWC order a full-shape input must be NHWC too (a plain one is, when its pixels are channel vectors).
      if (nhwc && v.shape == b.outputs[0].shape && cpu::pixel_order(v) != cpu::PixelOrder::nhwc)
        return "input " + std::to_string(i) + " is plain NCHW, the others NHWC";
      continue;
    }
    if (!nhwc) return "input " + std::to_string(i) + " must be plain (has " + v.layout.describe() + ")";
    if (v.shape != b.outputs[0].shape) return "a broadcast input " + std::to_string(i) + " must be plain";
    if (cpu::pixel_order(v) != cpu::PixelOrder::nhwc && !cpu::is_nhwc_bf16(v))
      return "input " + std::to_string(i) + " must be plain, or NHWC float32/bfloat16 (has " + v.layout.describe() + ")";
  }
  return std::nullopt;
}

template <CpuIsa isa>
std::optional<std::string> chain_supports(const KernelBuild& b) {
  if (auto why = supports_on(b, isa)) return why;
  // The rest (operand forms, a result of scalars only) is known once the registers are placed.
  auto kernel = ElementwiseChainKernel::create(b, isa);
  if (!kernel) return kernel.error().message;
  return std::nullopt;
}

template <CpuIsa isa>
Result<std::unique_ptr<Kernel>> chain_create(const KernelBuild& b) {
  if (auto why = supports_on(b, isa)) return make_error(ErrorCode::unsupported, *why);
  return ElementwiseChainKernel::create(b, isa);
}

}  // namespace

const KernelImpl kCpuElementwiseChainAvx512{"cpu.elementwise_chain.avx512", chain_supports<CpuIsa::avx512>,
                                            chain_create<CpuIsa::avx512>};
const KernelImpl kCpuElementwiseChainAvx2{"cpu.elementwise_chain.avx2", chain_supports<CpuIsa::avx2>,
                                          chain_create<CpuIsa::avx2>};
const KernelImpl kCpuElementwiseChainPortable{"cpu.elementwise_chain.portable", chain_supports<CpuIsa::portable>,
                                              chain_create<CpuIsa::portable>};

}  // namespace kiln
