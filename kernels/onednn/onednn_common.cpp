#include "kernels/onednn/onednn_common.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

namespace kiln::onednn {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

void ensure_threads(int threads) {
  if (threads > 0 && omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

// ---- descs and layouts ----

dims to_dims(const Shape& shape) { return dims(shape.begin(), shape.end()); }

md plain_desc(const Shape& shape) {
  const dims d = to_dims(shape);
  dims strides(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(d[i], 1);
  return md(d, dnnl::memory::data_type::f32, strides);
}

md any_desc(const Shape& shape, data_type type) { return md(to_dims(shape), type, dnnl::memory::format_tag::any); }

md retyped(const md& desc, data_type type) {
  dnnl_memory_desc_t d = desc.data;
  d.data_type = static_cast<dnnl_data_type_t>(type);
  return md(d);
}

Result<data_type> compute_type(const Attrs& attrs) {
  KILN_ASSIGN(precision, precision_from_attrs(attrs));
  KILN_REQUIRE(precision != Precision::int8, unsupported, "int8 has a type per tensor, not one compute type");
  return precision == Precision::bf16 ? data_type::bf16 : data_type::f32;
}

Layout layout_of(const md& desc, const Shape& shape, int threads) {
  if (desc == plain_desc(shape)) return Layout{};
  return Layout{std::make_shared<OneDnnLayout>(desc, threads)};
}

Layout layout_of(const md& desc, const Shape& shape, int threads, float scale) {
  if (desc == plain_desc(shape)) return Layout{};
  return Layout{std::make_shared<OneDnnLayout>(desc, threads, scale)};
}

data_type quant_data_type(QuantType t) { return t == QuantType::u8 ? data_type::u8 : data_type::s8; }

namespace {
bool is_quantized_type(data_type t) { return t == data_type::u8 || t == data_type::s8; }
}  // namespace

std::string describe_desc(const md& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.format_kind != dnnl_blocked) return "onednn:opaque";
  const auto& blk = d.format_desc.blocking;
  std::vector<int> order(static_cast<size_t>(d.ndims));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::string s = "onednn:";
  for (int dim : order) {
    bool blocked = false;
    for (int i = 0; i < blk.inner_nblks; ++i) blocked = blocked || blk.inner_idxs[i] == dim;
    s += static_cast<char>((blocked ? 'A' : 'a') + dim);
  }
  for (int i = 0; i < blk.inner_nblks; ++i) s += std::to_string(blk.inner_blks[i]) + static_cast<char>('a' + blk.inner_idxs[i]);
  if (desc.data_type() == data_type::bf16) s += ":bf16";
  if (desc.data_type() == data_type::u8) s += ":u8";
  if (desc.data_type() == data_type::s8) s += ":s8";
  return s;
}

OneDnnLayout::OneDnnLayout(md desc, int threads, float scale)
    : desc_(std::move(desc)), threads_(threads), scale_(is_quantized_type(desc_.data_type()) ? scale : 1.0f) {}

std::optional<QuantParams> OneDnnLayout::quant() const {
  if (!is_quantized_type(desc_.data_type())) return std::nullopt;
  return QuantParams{scale_, desc_.data_type() == data_type::u8 ? QuantType::u8 : QuantType::s8};
}

bool OneDnnLayout::equals(const OpaqueLayout& other) const {
  const auto* o = dynamic_cast<const OneDnnLayout*>(&other);
  return o != nullptr && o->desc_ == desc_ && o->scale_ == scale_;
}

std::string OneDnnLayout::describe() const {
  std::string s = describe_desc(desc_);
  if (quant()) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "*%g", static_cast<double>(scale_));
    s += scale;
  }
  return s;
}

Result<std::unique_ptr<Kernel>> OneDnnLayout::make_to_plain(DType dtype, const Shape& shape) const {
  return guarded_create("onednn to plain", [&]() -> Result<std::unique_ptr<Kernel>> {
    KILN_REQUIRE(dtype == DType::f32, unsupported, "oneDNN layouts hold float32 only");
    KILN_REQUIRE(desc_.dims() == to_dims(shape), internal, "oneDNN layout ", describe(), " does not match shape ",
                 shape_to_string(shape));
    ensure_threads(threads_);
    Program program(threads_);
    const md dst = plain_desc(shape);
    const dnnl::reorder::primitive_desc pd = scaled_reorder(desc_, dst, scale_);  // dequantizes a u8/s8 desc
    program.add(dnnl::reorder(pd), pd,
                {{DNNL_ARG_FROM, program.input(0, desc_)}, {DNNL_ARG_TO, program.output(0, dst)}});
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::vector<Layout>{Layout{}}));
  });
}

bool is_onednn(const ValueDesc& v) {
  return v.present && !v.layout.plain() && v.layout.opaque->backend() == kBackend;
}

std::optional<QuantParams> quant_of(const ValueDesc& v) {
  if (!is_onednn(v)) return std::nullopt;
  const auto* l = dynamic_cast<const OneDnnLayout*>(v.layout.opaque.get());
  return l == nullptr ? std::nullopt : l->quant();
}

std::optional<std::string> check_value(const ValueDesc& v, const char* what, Quantized q) {
  if (!v.present) return std::string(what) + " is missing";
  if (v.dtype != DType::f32) return std::string(what) + " is " + std::string(dtype_name(v.dtype)) + ", needs float32";
  if (v.shape.empty()) return std::string(what) + " is a scalar (oneDNN needs rank >= 1)";
  if (v.shape.size() > DNNL_MAX_NDIMS) return std::string(what) + " has rank > " + std::to_string(DNNL_MAX_NDIMS);
  if (shape_numel(v.shape) == 0) return std::string(what) + " is empty";
  if (v.layout.plain()) return std::nullopt;
  if (v.layout.opaque->backend() != kBackend)
    return std::string(what) + " has a layout of backend '" + std::string(v.layout.opaque->backend()) + "'";
  const auto* l = dynamic_cast<const OneDnnLayout*>(v.layout.opaque.get());
  if (l == nullptr || l->desc().dims() != to_dims(v.shape))
    return std::string(what) + " has a oneDNN layout that does not match its shape";
  if (q == Quantized::reject && l->quant())
    return std::string(what) + " is quantized (" + l->describe() + "), which this kernel does not read";
  return std::nullopt;
}

std::optional<std::string> check_plain_f32(const ValueDesc& v, const char* what) {
  if (auto why = check_value(v, what)) return why;
  if (!v.layout.plain()) return std::string(what) + " must be plain (has " + v.layout.describe() + ")";
  return std::nullopt;
}

bool is_bf16_rows(const ValueDesc& v) {
  return v.present && is_onednn(v) && !check_value(v, "value") && value_desc(v) == retyped(plain_desc(v.shape), data_type::bf16);
}

md value_desc(const ValueDesc& v) {
  if (v.layout.plain()) return plain_desc(v.shape);
  return static_cast<const OneDnnLayout*>(v.layout.opaque.get())->desc();
}

// ---- activations ----

std::optional<std::string> activation_steps(Activation act, float alpha, float beta, std::vector<EltwiseStep>& out) {
  using A = dnnl::algorithm;
  switch (act) {
    case Activation::none: return std::nullopt;
    case Activation::relu: out.push_back({A::eltwise_relu, 0.0f, 0.0f}); return std::nullopt;
    case Activation::clip:
      // clip_v2 is min(max(x, alpha), beta) only when alpha <= beta.
      if (!(alpha <= beta)) return "clip with min > max";
      out.push_back({A::eltwise_clip_v2, alpha, beta});
      return std::nullopt;
    case Activation::leaky_relu: out.push_back({A::eltwise_relu, alpha, 0.0f}); return std::nullopt;
    case Activation::sigmoid: out.push_back({A::eltwise_logistic, 0.0f, 0.0f}); return std::nullopt;
    case Activation::silu: out.push_back({A::eltwise_swish, 1.0f, 0.0f}); return std::nullopt;
    case Activation::hard_swish: out.push_back({A::eltwise_hardswish, 0.0f, 0.0f}); return std::nullopt;
    case Activation::hard_sigmoid:
      // oneDNN 2.6 has no hardsigmoid: linear (alpha*x + beta), then clip to [0, 1].
      out.push_back({A::eltwise_linear, alpha, beta});
      out.push_back({A::eltwise_clip_v2, 0.0f, 1.0f});
      return std::nullopt;
    case Activation::gelu_erf: out.push_back({A::eltwise_gelu_erf, 0.0f, 0.0f}); return std::nullopt;
    case Activation::tanh: out.push_back({A::eltwise_tanh, 0.0f, 0.0f}); return std::nullopt;
    case Activation::elu: out.push_back({A::eltwise_elu, alpha, 0.0f}); return std::nullopt;
  }
  return "unknown activation";
}

std::optional<std::string> read_post_ops(const Attrs& attrs, std::vector<EltwiseStep>& out) {
  auto post = post_ops_from_attrs(attrs);
  if (!post) return post.error().message;
  if (auto why = activation_steps(post->activation, post->alpha, post->beta, out))
    return "fused activation " + std::string(activation_name(post->activation)) + ": " + *why;
  return std::nullopt;
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::reorder::primitive_desc scaled_reorder(const md& from, const md& to, float scale, int32_t dst_zero_point) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (scale != 1.0f) attr.set_output_scales(0, {scale});
  if (dst_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {dst_zero_point});
  return dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to, attr);
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  const std::string impl = pd.impl_info_str();
  return impl.rfind("ref", 0) == 0;
}


// ---- Program ----

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHugePage = size_t{2} << 20;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

dnnl::memory Program::input(size_t index, const md& desc) {
  dnnl::memory m(desc, cpu_engine(), DNNL_MEMORY_NONE);
  bindings_.push_back({m, Kind::input, index, 0});
  return m;
}

dnnl::memory Program::output(size_t index, const md& desc) {
  dnnl::memory m(desc, cpu_engine(), DNNL_MEMORY_NONE);
  bindings_.push_back({m, Kind::output, index, 0});
  return m;
}

dnnl::memory Program::temp(const md& desc) {
  dnnl::memory m(desc, cpu_engine(), DNNL_MEMORY_NONE);
  bindings_.push_back({m, Kind::temp, 0, temp_bytes_});
  temp_bytes_ += align_up(desc.get_size());
  return m;
}

dnnl::memory Program::owned(const md& desc) {
  const size_t bytes = align_up(std::max<size_t>(desc.get_size(), 1));
  // Large buffers (prepacked weights) 2 MiB-aligned and on transparent huge pages where whole ones
  // fit (the tail stays on small pages): first-touch page faults were half of engine creation.
  const bool huge = bytes >= kHugePage;
  std::shared_ptr<void> buffer(std::aligned_alloc(huge ? kHugePage : kAlign, bytes), std::free);
  if (buffer == nullptr) throw std::bad_alloc();
  if (huge) madvise(buffer.get(), bytes, MADV_HUGEPAGE);
  owned_.push_back(buffer);
  return dnnl::memory(desc, cpu_engine(), buffer.get());
}

dnnl::memory Program::prepacked(const md& plain, const void* data, const md& packed) {
  dnnl::memory dst = owned(packed);
  if (packed == plain) {
    std::memcpy(dst.get_data_handle(), data, plain.get_size());
    return dst;
  }
  dnnl::memory src(plain, cpu_engine(), const_cast<void*>(data));
  ensure_threads(1);
  dnnl::reorder(src, dst).execute(thread_stream(), src, dst);
  thread_stream().wait();
  ensure_threads(threads_);
  return dst;
}

void Program::add(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
                  std::unordered_map<int, dnnl::memory> args) {
  const md scratchpad = pd.scratchpad_desc();
  if (scratchpad.get_size() > 0) {
    dnnl::memory m(scratchpad, cpu_engine(), DNNL_MEMORY_NONE);
    bindings_.push_back({m, Kind::scratchpad, 0, 0});
    args[DNNL_ARG_SCRATCHPAD] = m;
    scratchpad_bytes_ = std::max(scratchpad_bytes_, align_up(scratchpad.get_size()));
  }
  steps_.push_back({prim, std::move(args)});
}

void Program::add_host(std::function<void()> run) {
  Step step;
  step.host = std::move(run);
  steps_.push_back(std::move(step));
}

void Program::add_residual_copy(size_t input, size_t output, const dnnl::primitive& prim,
                                const dnnl::primitive_desc_base& pd, std::unordered_map<int, dnnl::memory> args) {
  add(prim, pd, std::move(args));
  steps_.back().skip_if_input = static_cast<int>(input);
  steps_.back().skip_if_output = output;
  if (output == 0) in_place_input_ = static_cast<int>(input);
}

size_t Program::scratch_bytes() const {
  const size_t total = temp_bytes_ + scratchpad_bytes_;
  return total == 0 ? 0 : total + kAlign;  // room to align the engine's buffer
}

Status Program::run(const KernelArgs& args) {
  uint8_t* base = nullptr;
  if (scratch_bytes() > 0) {
    KILN_REQUIRE(args.scratch != nullptr, internal, "oneDNN kernel got no scratch buffer");
    const auto p = reinterpret_cast<uintptr_t>(args.scratch);
    base = static_cast<uint8_t*>(args.scratch) + (kAlign - p % kAlign) % kAlign;
  }
  try {
    for (const Binding& b : bindings_) {
      void* ptr = nullptr;
      switch (b.kind) {
        case Kind::input: ptr = const_cast<void*>(args.inputs[b.index]); break;
        case Kind::output: ptr = args.outputs[b.index]; break;
        case Kind::temp: ptr = base + b.offset; break;
        case Kind::scratchpad: ptr = base + temp_bytes_; break;
      }
      b.mem.set_data_handle(ptr);
    }
    ensure_threads(threads_);
    dnnl::stream& s = thread_stream();
    for (Step& step : steps_) {
      if (step.skip_if_input >= 0 &&
          args.inputs[static_cast<size_t>(step.skip_if_input)] == args.outputs[step.skip_if_output])
        continue;  // in place: the residual already is the output buffer
      if (step.host) {
        s.wait();  // the primitives before it have written what it reads
        step.host();
        continue;
      }
      step.prim.execute(s, step.args);
    }
    s.wait();
  } catch (const dnnl::error& e) {
    return make_error(ErrorCode::internal, "oneDNN: ", e.what());
  }
  return Status::ok();
}

}  // namespace kiln::onednn
