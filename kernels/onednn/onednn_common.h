// Shared pieces of the oneDNN backend (Debian's libdnnl 2.6, OpenMP threading):
//   - the CPU engine singleton and one stream per calling thread;
//   - ensure_threads(): oneDNN reads omp_get_max_threads() both when a primitive is created (it
//     picks its blocking for that many threads) and when it runs, so every kernel calls it in
//     create() and at the start of run() with KernelBuild::threads (one omp_set_num_threads on
//     the calling thread, only when the count differs);
//   - OneDnnLayout, the opaque layout wrapping a dnnl::memory::desc (blocked formats such as
//     nChw16c); make_to_plain is a reorder kernel. A u8/s8 desc is a quantized layout (int8,
//     kernels/quantization.h) and carries its scale: real = scale * stored; its make_to_plain
//     dequantizes, and only kernels that opt in (check_value's Quantized::accept) read it;
//   - Program, a short list of primitives over memory objects whose handles are pointed at the
//     kernel's arguments (or at the engine's shared scratch buffer) on every run, so run() never
//     allocates. Primitives use scratchpad_mode::user; scratch = temporaries + the largest
//     scratchpad. Constant weights are prepacked into the primitive's format once, at create.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/post_ops.h"
#include "kernels/precision.h"
#include "kernels/quantization.h"

namespace kiln::onednn {

inline constexpr std::string_view kBackend = "onednn";

dnnl::engine& cpu_engine();
dnnl::stream& thread_stream();
void ensure_threads(int threads);

using dims = dnnl::memory::dims;
using md = dnnl::memory::desc;

class OneDnnLayout final : public OpaqueLayout {
 public:
  // `scale` is meaningful for u8/s8 descs only (1 for every other type).
  OneDnnLayout(md desc, int threads, float scale = 1.0f);
  std::string_view backend() const override { return kBackend; }
  size_t bytes() const override { return desc_.get_size(); }
  bool equals(const OpaqueLayout& other) const override;
  std::string describe() const override;
  Result<std::unique_ptr<Kernel>> make_to_plain(DType dtype, const Shape& shape) const override;
  const md& desc() const { return desc_; }
  // The type and scale of a u8/s8 desc; nullopt for float32 and bfloat16.
  std::optional<QuantParams> quant() const;

 private:
  md desc_;
  int threads_;
  float scale_ = 1.0f;
};

dims to_dims(const Shape& shape);
md plain_desc(const Shape& shape);                 // f32, dense row-major
using data_type = dnnl::memory::data_type;
md any_desc(const Shape& shape, data_type type = data_type::f32);  // format_tag::any
// The same layout holding elements of `type` (a bf16 copy of a float32 desc, ...).
md retyped(const md& desc, data_type type);
// The element type a compute op runs in: its "precision" attribute (kernels/precision.h).
Result<data_type> compute_type(const Attrs& attrs);
// The layout a kernel reports for a value it writes with `desc`: plain when the desc is the
// dense row-major one of `shape`.
Layout layout_of(const md& desc, const Shape& shape, int threads);
// The same for a quantized (u8/s8) desc holding values real = scale * stored.
Layout layout_of(const md& desc, const Shape& shape, int threads, float scale);
// "aBcd16b"-style name of a blocked desc (oneDNN's own tag notation), with ":bf16", ":u8" or
// ":s8" for those element types (OneDnnLayout::describe adds a quantized layout's "*scale").
std::string describe_desc(const md& desc);

data_type quant_data_type(QuantType t);
// The type and scale of a value in a quantized oneDNN layout; nullopt for any other value.
std::optional<QuantParams> quant_of(const ValueDesc& v);

// Whether a kernel reads quantized layouts: only one that applies their scale (the int8 Conv,
// Gemm) or keeps it (pooling) may; every other one would read the stored codes as numbers.
enum class Quantized { reject, accept };
// Why this value cannot be read by a oneDNN kernel (nullopt when it can): it must be float32 and
// either plain or a oneDNN layout over its shape, and not quantized unless `q` accepts that.
std::optional<std::string> check_value(const ValueDesc& v, const char* what, Quantized q = Quantized::reject);
std::optional<std::string> check_plain_f32(const ValueDesc& v, const char* what);
// The desc of a value accepted by check_value.
md value_desc(const ValueDesc& v);
bool is_onednn(const ValueDesc& v);
// A value in bfloat16, row-major (what a MatMul or LayerNormalization with bf16_output writes).
bool is_bf16_rows(const ValueDesc& v);

// Fused activations (kernels/post_ops.h) as oneDNN eltwise steps.
struct EltwiseStep {
  dnnl::algorithm alg;
  float alpha = 0.0f;
  float beta = 0.0f;
};
// nullopt when `act` cannot be mapped exactly (the message says why).
std::optional<std::string> activation_steps(Activation act, float alpha, float beta, std::vector<EltwiseStep>& out);
// Reads the fused-epilogue attributes and maps them; nullopt on success.
std::optional<std::string> read_post_ops(const Attrs& attrs, std::vector<EltwiseStep>& out);

dnnl::primitive_attr user_scratchpad_attr();
// A reorder writing scale * from + dst_zero_point (quantizing: 1 / the target scale, and the zero
// point of a shifted u8 code; dequantizing: the source's scale).
dnnl::reorder::primitive_desc scaled_reorder(const md& from, const md& to, float scale, int32_t dst_zero_point = 0);

// A sequence of primitives executed in order.
class Program {
 public:
  explicit Program(int threads) : threads_(threads) {}
  // Memory objects whose data handle is set on every run.
  dnnl::memory input(size_t index, const md& desc);
  dnnl::memory output(size_t index, const md& desc);
  dnnl::memory temp(const md& desc);  // a region of the shared scratch buffer
  // Memory owning its bytes for the kernel's lifetime (prepacked weights, scaled biases).
  dnnl::memory owned(const md& desc);
  // Owned memory of desc `packed` holding a constant given as `data` with desc `plain`: a memcpy
  // when the descs agree, else a oneDNN reorder run once, now, on the calling thread alone (each
  // parallel region costs a scheduler time slice when another process shares the cores).
  dnnl::memory prepacked(const md& plain, const void* data, const md& packed);
  // Adds a primitive; its scratchpad (user mode) comes from the shared scratch buffer.
  void add(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd, std::unordered_map<int, dnnl::memory> args);
  // Adds the copy of input `input` into output `output` that precedes an accumulating primitive
  // (a fused residual), with equal descs: skipped when the engine runs the kernel in place.
  void add_residual_copy(size_t input, size_t output, const dnnl::primitive& prim,
                         const dnnl::primitive_desc_base& pd, std::unordered_map<int, dnnl::memory> args);
  // Adds a step of kiln's own between the primitives: `run` reads and writes memory objects of this
  // program (their data handles are bound before it is called).
  void add_host(std::function<void()> run);
  // The input that output 0 may share a buffer with (see Kernel::in_place_input), or -1.
  int in_place_input() const { return in_place_input_; }
  size_t scratch_bytes() const;
  int threads() const { return threads_; }
  Status run(const KernelArgs& args);

 private:
  enum class Kind { input, output, temp, scratchpad };
  struct Binding {
    dnnl::memory mem;
    Kind kind;
    size_t index = 0;   // input/output index
    size_t offset = 0;  // temp offset
  };
  struct Step {
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;
    int skip_if_input = -1;   // skip when this input and `skip_if_output` share a buffer
    size_t skip_if_output = 0;
    std::function<void()> host;  // set: a step of kiln's own instead of `prim`
  };
  int threads_;
  std::vector<Binding> bindings_;
  std::vector<Step> steps_;
  std::vector<std::shared_ptr<void>> owned_;
  size_t temp_bytes_ = 0;
  size_t scratchpad_bytes_ = 0;
  int in_place_input_ = -1;
};

// A Kernel running one Program.
class ProgramKernel final : public Kernel {
 public:
  ProgramKernel(Program program, std::vector<Layout> layouts)
      : program_(std::move(program)), layouts_(std::move(layouts)) {}
  std::vector<Layout> output_layouts() const override { return layouts_; }
  size_t scratch_bytes() const override { return program_.scratch_bytes(); }
  int in_place_input() const override { return program_.in_place_input(); }
  Status run(const KernelArgs& args) override { return program_.run(args); }

 private:
  Program program_;
  std::vector<Layout> layouts_;
};

// Runs `fn` (returning Result<std::unique_ptr<Kernel>>), turning oneDNN exceptions into errors.
template <typename Fn>
Result<std::unique_ptr<Kernel>> guarded_create(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    return make_error(ErrorCode::unsupported, what, ": oneDNN: ", e.what());
  }
}

// True when oneDNN picked a slow reference implementation ("ref:...") for `pd`.
bool is_reference_impl(const dnnl::primitive_desc_base& pd);

}  // namespace kiln::onednn
