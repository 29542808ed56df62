#include "kernels/cuda/cuda_engine.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "kernels/core/half.h"
#include "kernels/cuda/cuda_registry.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/owned_handle.h"
#include "kernels/device/chunked_copy.h"
#include "kernels/device/mixed_precision.h"
#include "kernels/memory_plan.h"

namespace kiln::cuda {
namespace {

// cuBLASLt and cuDNN pick their fastest paths for 256-byte aligned operands.
constexpr int64_t kDeviceAlignment = 256;

enum class ValueKind { constant, input, intermediate, output };

struct DeviceValue {
  std::string name;
  ValueKind kind = ValueKind::intermediate;
  DType host_dtype = DType::f32;  // what the plan (and the caller) see
  DType dtype = DType::f32;       // what the device stores
  Shape shape;
  const Tensor* constant = nullptr;
  int first_step = -1;
  int last_step = -1;
  int64_t offset = -1;        // in the arena (inputs and intermediates) or in the weights (constants)
  int shares_buffer_of = -1;  // value whose arena buffer this one reuses in place
  bool returned = false;      // a plan output: its buffer lives until the run returns

  size_t bytes() const { return static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype); }
  size_t host_bytes() const { return static_cast<size_t>(shape_numel(shape)) * dtype_size(host_dtype); }
};

struct DeviceStep {
  std::string name;
  const CudaKernelImpl* impl = nullptr;
  std::unique_ptr<CudaKernel> kernel;
  std::vector<int> inputs;  // value indices; -1 absent
  std::vector<int> outputs;
};

// Host <-> device transfer of one plan input or output. `converted` holds the float32 copy on the
// device when the device stores the value as float16 or bfloat16. `resident` is an input's device
// copy for device-only timing (fp32 inputs; an fp16/bf16 plan's `converted` already is one).
struct Staging {
  int value = -1;
  PinnedBuffer host;
  DeviceBuffer converted;
  DeviceBuffer resident;
};

// A value's storage converted for its reader in a mixed-precision plan (mixed_precision.h): a
// 16-bit value widened for a step kept in float32, or a float32 one narrowed for the others.
class StorageConvert final : public CudaKernel {
 public:
  StorageConvert(const CudaContext& context, FloatType from, FloatType to, int64_t n) : context_(context), from_(from), to_(to), n_(n) {}
  Status run(const CudaArgs& args) override {
    if (to_ == FloatType::f32)
      KILN_CUDA_TRY(launch_to_f32(from_, args.inputs[0], static_cast<float*>(args.outputs[0]), n_, context_.stream));
    else
      KILN_CUDA_TRY(launch_from_f32(to_, static_cast<const float*>(args.inputs[0]), args.outputs[0], n_, context_.stream));
    return Status::ok();
  }

 private:
  const CudaContext& context_;
  FloatType from_, to_;
  int64_t n_;
};

constexpr CudaKernelImpl kStorageConvertImpl{"cuda.convert", nullptr, nullptr};

// A sequence recorded as a CUDA Graph on first use: `exec` once captured; `tried` with a null
// exec when capture failed (`failure` says why) and the sequence launches step by step instead.
struct CapturedGraph {
  cudaGraphExec_t exec = nullptr;
  bool tried = false;
  std::string failure;
};

class CudaEngine final : public DeviceEngine {
 public:
  ~CudaEngine() override {
    steps_.clear();  // kernels hold descriptors made with the handles below
    for (const CapturedGraph* g : {&run_graph_, &compute_graph_})
      if (g->exec) cudaGraphExecDestroy(g->exec);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (context_.cublaslt) cublasLtDestroy(context_.cublaslt);
    if (context_.cudnn) cudnnDestroy(context_.cudnn);
    if (context_.stream) cudaStreamDestroy(context_.stream);
  }

  Status build(const Plan& plan, const DeviceEngineOptions& options);
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, std::vector<double>* step_ms) override;
  Result<std::vector<double>> time_on_device(int warmup, int iters) override;
  Result<std::vector<double>> time_steps_on_device(size_t first, size_t count, int repeat, int warmup, int iters) override;
  const std::vector<EngineStep>& steps() const override { return step_info_; }
  const EngineMemory& memory() const override { return memory_; }
  std::string describe() const override;

 private:
  Status add_values(const Plan& plan, std::vector<int>& slot_value);
  Status add_step(const Plan& plan, const PlanStep& step, bool kept, const std::vector<int>& slot_value,
                  const std::vector<const Tensor*>& constant_of);
  // Value `v` as a step computing at `precision` reads it: itself, or its converted copy (made once,
  // by a convert step added here, before the reader).
  int value_for(int v, DevicePrecision precision);
  Status plan_arena();
  Status upload_constants();
  Status make_staging();
  void* device_pointer(int v) const;
  Status upload_inputs(const std::vector<Tensor>& inputs);
  Status enqueue(std::vector<double>* step_ms, bool resident = false);
  Status enqueue_steps(size_t first, size_t end, bool events);
  cudaGraphExec_t capture(const std::function<Status()>& enqueue_all, std::string& failure);
  cudaGraphExec_t graph_for(CapturedGraph& graph, bool resident);

  DeviceEngineOptions options_;
  CudaContext context_;
  CudaContext wide_context_;  // context_ at fp32: the kernels of steps kept in float32
  MixedPrecision mixed_;
  std::map<std::pair<int, DType>, int> converted_;  // (value, device dtype) -> its converted copy
  cudaDeviceProp properties_{};
  std::vector<DeviceValue> values_;
  std::vector<DeviceStep> steps_;
  std::vector<std::string> output_names_;
  std::vector<Staging> inputs_, outputs_;
  std::vector<EngineStep> step_info_;
  EngineMemory memory_;
  DeviceBuffer arena_, weights_, workspace_;
  bool use_graph_ = false;
  CapturedGraph run_graph_;      // a whole run (steps and output copies)
  CapturedGraph compute_graph_;  // the steps alone, inputs from device copies (time_on_device)
  bool ran_ = false;  // a run's inputs are in the staging buffers (what time_on_device reads)
  std::vector<cudaEvent_t> events_;  // per step: start, end (profiling only)
  // Copies inputs into their pinned buffers, with one helper thread per further CPU up to 7 (the
  // host is otherwise idle then: the device waits for the input). On a 2-vCPU EPYC, 38.5 MB: 12.6
  // GB/s alone, 17.0 with one helper (bench/chunked_copy_bench.cpp).
  ChunkedCopier copier_{static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)) - 1};
};

Status CudaEngine::add_values(const Plan& plan, std::vector<int>& slot_value) {
  auto add = [&](int slot, ValueKind kind, std::string name, const Tensor* constant) -> Status {
    KILN_REQUIRE(slot >= 0 && slot < plan.num_slots && static_cast<size_t>(slot) < plan.slot_types.size(), invalid_argument,
                 "slot ", slot, " is not in the plan");
    const ValueType& t = plan.slot_types[static_cast<size_t>(slot)];
    KILN_REQUIRE(t.rank_known && sym_shape_is_concrete(t.shape), invalid_argument, "value in slot ", slot, " has shape ",
                 sym_shape_to_string(t.shape), "; compiled execution needs concrete shapes (compile for a batch size)");
    DeviceValue v;
    v.name = std::move(name);
    v.kind = kind;
    v.host_dtype = t.dtype;
    const bool wide = static_cast<size_t>(slot) < mixed_.stored_wide.size() && mixed_.stored_wide[static_cast<size_t>(slot)];
    v.dtype = cuda_device_dtype(t.dtype, wide ? DevicePrecision::fp32 : options_.precision);
    v.shape = sym_shape_concrete(t.shape);
    v.constant = constant;
    values_.push_back(std::move(v));
    slot_value[static_cast<size_t>(slot)] = static_cast<int>(values_.size()) - 1;
    return Status::ok();
  };
  for (const auto& [slot, tensor] : plan.constants) KILN_TRY(add(slot, ValueKind::constant, "constant@" + std::to_string(slot), &tensor));
  for (const PlanInput& in : plan.inputs) {
    KILN_TRY(add(in.slot, ValueKind::input, in.name, nullptr));
    inputs_.push_back({slot_value[static_cast<size_t>(in.slot)], {}, {}});
  }
  for (const PlanStep& step : plan.steps)
    for (int slot : step.outputs)
      if (slot >= 0) KILN_TRY(add(slot, ValueKind::intermediate, step.name, nullptr));
  return Status::ok();
}

int CudaEngine::value_for(int v, DevicePrecision precision) {
  const DType wanted = cuda_device_dtype(values_[static_cast<size_t>(v)].host_dtype, precision);
  if (values_[static_cast<size_t>(v)].dtype == wanted) return v;
  const auto key = std::make_pair(v, wanted);
  if (auto found = converted_.find(key); found != converted_.end()) return found->second;
  DeviceValue copy;
  copy.name = values_[static_cast<size_t>(v)].name + " (as " + std::string(dtype_name(wanted)) + ")";
  copy.kind = ValueKind::intermediate;
  copy.host_dtype = values_[static_cast<size_t>(v)].host_dtype;
  copy.dtype = wanted;
  copy.shape = values_[static_cast<size_t>(v)].shape;
  values_.push_back(std::move(copy));
  const int c = static_cast<int>(values_.size()) - 1;
  DeviceStep convert;
  convert.name = values_[static_cast<size_t>(c)].name;
  convert.impl = &kStorageConvertImpl;
  convert.kernel = std::make_unique<StorageConvert>(context_, *float_type_of(values_[static_cast<size_t>(v)].dtype), *float_type_of(wanted),
                                                    shape_numel(values_[static_cast<size_t>(c)].shape));
  convert.inputs = {v};
  convert.outputs = {c};
  step_info_.push_back({convert.name, std::string(kStorageConvertImpl.name), "plain", "Cast"});
  steps_.push_back(std::move(convert));
  converted_.emplace(key, c);
  return c;
}

Status CudaEngine::add_step(const Plan& plan, const PlanStep& step, bool kept, const std::vector<int>& slot_value,
                            const std::vector<const Tensor*>& constant_of) {
  const DevicePrecision precision = kept ? DevicePrecision::fp32 : options_.precision;
  DeviceStep rt;
  rt.name = step.name;
  for (int slot : step.inputs) {
    const int v = slot < 0 || slot >= plan.num_slots ? -1 : slot_value[static_cast<size_t>(slot)];
    KILN_REQUIRE(slot < 0 || v >= 0, invalid_argument, "node '", step.name, "' reads slot ", slot, ", which nothing writes");
    rt.inputs.push_back(v < 0 ? v : value_for(v, precision));
  }
  for (int slot : step.outputs) rt.outputs.push_back(slot < 0 || slot >= plan.num_slots ? -1 : slot_value[static_cast<size_t>(slot)]);
  KILN_ASSIGN(build, cuda_kernel_build(plan, step, constant_of, precision));
  KILN_ASSIGN(choice, cuda_kernel_select(build, kept ? wide_context_ : context_));
  if (options_.verbose) {
    *options_.verbose << "kiln: " << step.name << " (" << cuda_op_name(step.op) << ") -> " << choice.impl->name << '\n';
    for (const std::string& r : choice.rejections)
      if (r.find(": handles ") == std::string::npos) *options_.verbose << "        not " << r << '\n';
  }
  rt.impl = choice.impl;
  rt.kernel = std::move(choice.kernel);
  step_info_.push_back({rt.name, std::string(rt.impl->name), "plain", std::string(cuda_op_name(step.op))});
  steps_.push_back(std::move(rt));
  return Status::ok();
}

// As the CPU engine's plan_arena: liveness, in-place grants, then plan_buffers over inputs and
// intermediates (inputs are copied in before step 0 and live until their last reader).
Status CudaEngine::plan_arena() {
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int v : steps_[i].outputs)
      if (v >= 0 && values_[static_cast<size_t>(v)].first_step < 0) values_[static_cast<size_t>(v)].first_step = static_cast<int>(i);
    for (int v : steps_[i].inputs)
      if (v >= 0) values_[static_cast<size_t>(v)].last_step = static_cast<int>(i);
  }
  const int end = static_cast<int>(steps_.size());
  std::vector<int> buffer_end(values_.size(), -1);
  for (size_t v = 0; v < values_.size(); ++v) {
    DeviceValue& value = values_[v];
    if (value.kind == ValueKind::input) {
      value.first_step = 0;
      buffer_end[v] = value.returned ? end : std::max(value.last_step, 0);
    } else if (value.kind == ValueKind::output) {
      buffer_end[v] = end;
    } else if (value.kind == ValueKind::intermediate && value.first_step >= 0) {
      buffer_end[v] = std::max(value.last_step, value.first_step);
    }
  }
  auto buffer_of = [&](int v) {
    while (values_[static_cast<size_t>(v)].shares_buffer_of >= 0) v = values_[static_cast<size_t>(v)].shares_buffer_of;
    return v;
  };
  for (size_t i = 0; i < steps_.size(); ++i) {
    const DeviceStep& step = steps_[i];
    const int k = step.kernel->in_place_input();
    if (k < 0 || static_cast<size_t>(k) >= step.inputs.size() || step.outputs.empty()) continue;
    const int in = step.inputs[static_cast<size_t>(k)], out = step.outputs[0];
    if (in < 0 || out < 0) continue;
    const int buffer = buffer_of(in);
    if (values_[static_cast<size_t>(buffer)].kind != ValueKind::intermediate) continue;
    if (buffer_end[static_cast<size_t>(buffer)] != static_cast<int>(i)) continue;
    if (values_[static_cast<size_t>(out)].bytes() != values_[static_cast<size_t>(in)].bytes()) continue;
    bool read_twice = false;
    for (size_t j = 0; j < step.inputs.size(); ++j)
      if (static_cast<int>(j) != k && step.inputs[j] >= 0 && buffer_of(step.inputs[j]) == buffer) read_twice = true;
    if (read_twice) continue;
    values_[static_cast<size_t>(out)].shares_buffer_of = buffer;
    buffer_end[static_cast<size_t>(buffer)] = buffer_end[static_cast<size_t>(out)];
    ++memory_.in_place_steps;
  }
  std::vector<BufferRequest> requests;
  std::vector<int> owners;
  for (size_t v = 0; v < values_.size(); ++v) {
    if (buffer_end[v] < 0 || values_[v].shares_buffer_of >= 0) continue;
    requests.push_back({static_cast<int64_t>(values_[v].bytes()), values_[v].first_step, buffer_end[v]});
    owners.push_back(static_cast<int>(v));
  }
  KILN_ASSIGN(plan, plan_buffers(requests, kDeviceAlignment));
  for (size_t r = 0; r < owners.size(); ++r) values_[static_cast<size_t>(owners[r])].offset = plan.offsets[r];
  for (size_t v = 0; v < values_.size(); ++v)
    if (values_[v].shares_buffer_of >= 0) values_[v].offset = values_[static_cast<size_t>(buffer_of(static_cast<int>(v)))].offset;
  memory_.arena_bytes = plan.arena_bytes;
  memory_.lower_bound_bytes = plan.lower_bound_bytes;
  memory_.sum_of_buffers_bytes = plan.sum_of_buffers_bytes;
  KILN_ASSIGN(arena, DeviceBuffer::allocate(static_cast<size_t>(plan.arena_bytes), "the activation arena"));
  arena_ = std::move(arena);
  // Zeroed once: a buffer read with a zero scale (cuDNN's z without a residual) then never holds
  // NaN bit patterns from whatever the allocation contained.
  if (arena_.bytes()) KILN_CUDA_TRY(cudaMemsetAsync(arena_.data(), 0, arena_.bytes(), context_.stream));
  return Status::ok();
}

// Every constant once, into one allocation, converted to the device dtype on the host.
Status CudaEngine::upload_constants() {
  int64_t total = 0;
  for (DeviceValue& v : values_) {
    if (v.kind != ValueKind::constant) continue;
    v.offset = total;
    total += align_bytes(static_cast<int64_t>(v.bytes()), kDeviceAlignment);
  }
  memory_.weight_bytes = total;
  KILN_ASSIGN(weights, DeviceBuffer::allocate(static_cast<size_t>(total), "the weights"));
  weights_ = std::move(weights);
  std::vector<uint16_t> halves;
  for (const DeviceValue& v : values_) {
    if (v.kind != ValueKind::constant || v.bytes() == 0) continue;
    const void* src = v.constant->raw();
    if (v.dtype != v.host_dtype) {  // float32 -> float16 or bfloat16
      halves.resize(static_cast<size_t>(v.constant->numel()));
      const float* f = v.constant->data<float>();
      const bool bf16 = v.dtype == DType::bf16;
      for (size_t i = 0; i < halves.size(); ++i) halves[i] = bf16 ? BFloat16::from_float(f[i]) : Half::from_float(f[i]);
      src = halves.data();
    }
    KILN_CUDA_TRY(cudaMemcpy(static_cast<char*>(weights_.data()) + v.offset, src, v.bytes(), cudaMemcpyHostToDevice));
  }
  return Status::ok();
}

Status CudaEngine::make_staging() {
  auto stage = [&](Staging& s, const char* what) -> Status {
    const DeviceValue& v = values_[static_cast<size_t>(s.value)];
    KILN_ASSIGN(host, PinnedBuffer::allocate(v.host_bytes(), std::string(what) + " '" + v.name + "'"));
    s.host = std::move(host);
    if (v.dtype != v.host_dtype) {
      KILN_ASSIGN(converted, DeviceBuffer::allocate(v.host_bytes(), std::string("the float32 copy of ") + what + " '" + v.name + "'"));
      s.converted = std::move(converted);
    }
    return Status::ok();
  };
  for (Staging& s : inputs_) KILN_TRY(stage(s, "input"));
  for (Staging& s : outputs_) KILN_TRY(stage(s, "output"));
  return Status::ok();
}

void* CudaEngine::device_pointer(int v) const {
  const DeviceValue& value = values_[static_cast<size_t>(v)];
  if (value.kind == ValueKind::constant) return static_cast<char*>(weights_.data()) + value.offset;
  return value.offset < 0 ? nullptr : static_cast<char*>(arena_.data()) + value.offset;
}

Status CudaEngine::build(const Plan& plan, const DeviceEngineOptions& options) {
  options_ = options;
  context_.precision = options.precision;
  KILN_CUDA_TRY(cudaSetDevice(options.device_index));
  KILN_CUDA_TRY(cudaGetDeviceProperties(&properties_, options.device_index));
  KILN_CUDA_TRY(cudaStreamCreateWithFlags(&context_.stream, cudaStreamNonBlocking));
  KILN_CUDNN_TRY(cudnnCreate(&context_.cudnn));
  KILN_CUDNN_TRY(cudnnSetStream(context_.cudnn, context_.stream));
  KILN_CUBLAS_TRY(cublasLtCreate(&context_.cublaslt));
  wide_context_ = context_;  // the same stream and handles (destroyed once, through context_)
  wide_context_.precision = DevicePrecision::fp32;
  KILN_ASSIGN(mixed, mixed_precision(plan, options));
  mixed_ = std::move(mixed);

  std::vector<int> slot_value(static_cast<size_t>(plan.num_slots), -1);
  KILN_TRY(add_values(plan, slot_value));
  std::vector<const Tensor*> constant_of(plan.slot_types.size(), nullptr);
  for (const auto& [slot, tensor] : plan.constants) constant_of[static_cast<size_t>(slot)] = &tensor;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    Status st = add_step(plan, step, mixed_.kept_step[i], slot_value, constant_of);
    if (!st) return st.code() == ErrorCode::unsupported ? st : st.with_context("node '" + step.name + "' (" + std::string(cuda_op_name(step.op)) + "): ");
  }
  for (const auto& [slot, name] : plan.outputs) {
    const int v = slot >= 0 && slot < plan.num_slots ? slot_value[static_cast<size_t>(slot)] : -1;
    KILN_REQUIRE(v >= 0, invalid_argument, "output '", name, "' is never computed");
    if (values_[static_cast<size_t>(v)].kind == ValueKind::intermediate) values_[static_cast<size_t>(v)].kind = ValueKind::output;
    values_[static_cast<size_t>(v)].returned = true;
    outputs_.push_back({v, {}, {}});
    output_names_.push_back(name);
  }
  size_t workspace = 0;
  for (const DeviceStep& step : steps_) workspace = std::max(workspace, step.kernel->workspace_bytes());
  memory_.scratch_bytes = static_cast<int64_t>(workspace);
  KILN_TRY(upload_constants());
  KILN_TRY(plan_arena());
  KILN_ASSIGN(buffer, DeviceBuffer::allocate(workspace, "the cuDNN/cuBLASLt workspace"));
  workspace_ = std::move(buffer);
  KILN_TRY(make_staging());
  // Weights went up with cudaMemcpy on the legacy stream, which a non-blocking stream does not
  // wait for, and kernels may have initialized constants on ours: all of it is done before a run.
  KILN_CUDA_TRY(cudaDeviceSynchronize());
  const int64_t batch = inputs_.empty() || values_[static_cast<size_t>(inputs_[0].value)].shape.empty()
                            ? 1
                            : values_[static_cast<size_t>(inputs_[0].value)].shape[0];
  use_graph_ = batch <= options.graph_max_batch;
  return Status::ok();
}

// Inputs converted (fp16/bf16 plans), every step, outputs out, all on the stream, after upload_inputs;
// with `step_ms`, events around each step. `resident`: inputs from their device copies instead,
// and outputs left on the device (device-only timing).
Status CudaEngine::enqueue(std::vector<double>* step_ms, bool resident) {
  const cudaStream_t stream = context_.stream;
  for (const Staging& s : inputs_) {
    const DeviceValue& v = values_[static_cast<size_t>(s.value)];
    void* dst = s.converted.data() ? s.converted.data() : device_pointer(s.value);
    if (resident && !s.converted.data())
      KILN_CUDA_TRY(cudaMemcpyAsync(dst, s.resident.data(), v.host_bytes(), cudaMemcpyDeviceToDevice, stream));
    if (s.converted.data())
      KILN_CUDA_TRY(launch_from_f32(*float_type_of(v.dtype), static_cast<const float*>(s.converted.data()), device_pointer(s.value),
                                    shape_numel(v.shape), stream));
  }
  KILN_TRY(enqueue_steps(0, steps_.size(), step_ms != nullptr));
  if (resident) return Status::ok();
  for (const Staging& s : outputs_) {
    const DeviceValue& v = values_[static_cast<size_t>(s.value)];
    const void* src = device_pointer(s.value);
    if (s.converted.data()) {
      KILN_CUDA_TRY(launch_to_f32(*float_type_of(v.dtype), src, static_cast<float*>(s.converted.data()), shape_numel(v.shape), stream));
      src = s.converted.data();
    }
    KILN_CUDA_TRY(cudaMemcpyAsync(s.host.data(), src, v.host_bytes(), cudaMemcpyDeviceToHost, stream));
  }
  return Status::ok();
}

// Steps [first, end) on the stream, with their arena pointers; `events`: one recorded before and
// after each step (profiling).
Status CudaEngine::enqueue_steps(size_t first, size_t end, bool events) {
  const cudaStream_t stream = context_.stream;
  CudaArgs args;
  args.workspace = workspace_.data();
  for (size_t i = first; i < end; ++i) {
    DeviceStep& step = steps_[i];
    args.inputs.clear();
    args.outputs.clear();
    for (int v : step.inputs) args.inputs.push_back(v < 0 ? nullptr : device_pointer(v));
    for (int v : step.outputs) args.outputs.push_back(v < 0 ? nullptr : device_pointer(v));
    if (events) KILN_CUDA_TRY(cudaEventRecord(events_[2 * i], stream));
    Status st = step.kernel->run(args);
    if (!st) return st.with_context("node '" + step.name + "': ");
    if (events) KILN_CUDA_TRY(cudaEventRecord(events_[2 * i + 1], stream));
  }
  return Status::ok();
}

// Records what `enqueue_all` puts on the stream (a whole run, the steps alone, a range of steps)
// as a CUDA Graph. Any failure (a library call that cannot be captured) returns null with the
// reason, and the sequence then launches step by step.
cudaGraphExec_t CudaEngine::capture(const std::function<Status()>& enqueue_all, std::string& failure) {
  if (cudaStreamBeginCapture(context_.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    failure = "stream capture could not begin";
    cudaGetLastError();
    return nullptr;
  }
  const Status enqueued = enqueue_all();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(context_.stream, &graph);
  if (!enqueued || ended != cudaSuccess || !graph) {
    failure = !enqueued ? enqueued.message() : cudaGetErrorString(ended);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    failure = cudaGetErrorString(made);
    cudaGetLastError();
    return nullptr;
  }
  return exec;
}

// Each input through its pinned buffer to the device in chunks: the host copy of chunk k + 1
// overlaps the transfer of chunk k (one whole copy, then one transfer, took 5.7 ms of ResNet-50's
// 12.7 ms at batch 64 on an H100), and several threads copy (chunked_copy.h). Outside any graph,
// which holds fixed host addresses.
// Graphed runs (batch up to graph_max_batch) capture `graph` on first use; null otherwise.
cudaGraphExec_t CudaEngine::graph_for(CapturedGraph& graph, bool resident) {
  if (use_graph_ && !graph.tried) {
    graph.tried = true;
    graph.exec = capture([this, resident] { return enqueue(nullptr, resident); }, graph.failure);
  }
  return graph.exec;
}

Status CudaEngine::upload_inputs(const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Staging& s = inputs_[i];
    const DeviceValue& v = values_[static_cast<size_t>(s.value)];
    char* pinned = static_cast<char*>(s.host.data());
    char* to = static_cast<char*>(s.converted.data() ? s.converted.data() : device_pointer(s.value));
    cudaError_t enqueued = cudaSuccess;
    copier_.copy(pinned, inputs[i].raw(), v.host_bytes(), [&](size_t at, size_t bytes) {
      if (enqueued == cudaSuccess)
        enqueued = cudaMemcpyAsync(to + at, pinned + at, bytes, cudaMemcpyHostToDevice, context_.stream);
    });
    KILN_CUDA_TRY(enqueued);
  }
  return Status::ok();
}

Result<std::vector<Tensor>> CudaEngine::run(const std::vector<Tensor>& inputs, std::vector<double>* step_ms) {
  KILN_REQUIRE(inputs.size() == inputs_.size(), invalid_argument, "the model has ", inputs_.size(), " inputs, but ", inputs.size(),
               " were given");
  KILN_CUDA_TRY(cudaSetDevice(options_.device_index));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DeviceValue& v = values_[static_cast<size_t>(inputs_[i].value)];
    KILN_REQUIRE(inputs[i].dtype() == v.host_dtype && inputs[i].shape() == v.shape, invalid_argument, "input '", v.name, "' is ",
                 inputs[i].describe(), ", the plan was compiled for ", dtype_name(v.host_dtype), shape_to_string(v.shape));
  }
  KILN_TRY(upload_inputs(inputs));
  if (step_ms) {
    if (events_.empty()) {
      events_.resize(2 * steps_.size(), nullptr);
      for (cudaEvent_t& e : events_) KILN_CUDA_TRY(cudaEventCreate(&e));
    }
    KILN_TRY(enqueue(step_ms));
  } else {
    if (cudaGraphExec_t graph = graph_for(run_graph_, false)) KILN_CUDA_TRY(cudaGraphLaunch(graph, context_.stream));
    else KILN_TRY(enqueue(nullptr));
  }
  KILN_CUDA_TRY(cudaStreamSynchronize(context_.stream));
  if (step_ms) {
    step_ms->assign(steps_.size(), 0.0);
    for (size_t i = 0; i < steps_.size(); ++i) {
      float ms = 0;
      KILN_CUDA_TRY(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]));
      (*step_ms)[i] = ms;
    }
  }
  ran_ = true;
  std::vector<Tensor> results;
  for (const Staging& s : outputs_) {
    const DeviceValue& v = values_[static_cast<size_t>(s.value)];
    Tensor t = Tensor::zeros(v.host_dtype, v.shape);
    if (t.nbytes()) std::memcpy(t.raw(), s.host.data(), t.nbytes());
    results.push_back(std::move(t));
  }
  return results;
}

// Device time of `iters` launches after `warmup`, from events around each: the captured `graph`
// when there is one, else `enqueue` on the stream; each time divided by `repeat` (launches per call).
template <typename Enqueue>
Result<std::vector<double>> time_with_events(cudaStream_t stream, cudaGraphExec_t graph, const Enqueue& enqueue, int warmup,
                                             int iters, int repeat) {
  OwnedHandle<cudaEvent_t, cudaEventDestroy> start, stop;
  KILN_CUDA_TRY(cudaEventCreate(&start.handle));
  KILN_CUDA_TRY(cudaEventCreate(&stop.handle));
  std::vector<double> times;
  for (int i = 0; i < warmup + iters; ++i) {
    KILN_CUDA_TRY(cudaEventRecord(start.handle, stream));
    if (graph) KILN_CUDA_TRY(cudaGraphLaunch(graph, stream));
    else KILN_TRY(enqueue());
    KILN_CUDA_TRY(cudaEventRecord(stop.handle, stream));
    KILN_CUDA_TRY(cudaEventSynchronize(stop.handle));
    float ms = 0;
    KILN_CUDA_TRY(cudaEventElapsedTime(&ms, start.handle, stop.handle));
    if (i >= warmup) times.push_back(static_cast<double>(ms) / repeat);
  }
  return times;
}

Result<std::vector<double>> CudaEngine::time_on_device(int warmup, int iters) {
  KILN_REQUIRE(ran_, invalid_argument, "device-only timing needs one run first (its inputs are the ones timed)");
  KILN_CUDA_TRY(cudaSetDevice(options_.device_index));
  for (Staging& s : inputs_) {
    if (s.converted.data() || s.resident.data()) continue;
    const DeviceValue& v = values_[static_cast<size_t>(s.value)];
    KILN_ASSIGN(resident, DeviceBuffer::allocate(v.host_bytes(), "the device copy of input '" + v.name + "'"));
    s.resident = std::move(resident);
    KILN_CUDA_TRY(cudaMemcpy(s.resident.data(), s.host.data(), v.host_bytes(), cudaMemcpyHostToDevice));
  }
  cudaGraphExec_t graph = graph_for(compute_graph_, true);
  return time_with_events(context_.stream, graph, [&] { return enqueue(nullptr, true); }, warmup, iters, 1);
}

Result<std::vector<double>> CudaEngine::time_steps_on_device(size_t first, size_t count, int repeat, int warmup, int iters) {
  KILN_REQUIRE(ran_, invalid_argument, "device-only timing needs one run first (its values are the ones timed)");
  KILN_REQUIRE(count > 0 && first < steps_.size() && count <= steps_.size() - first, invalid_argument, "steps ", first, " to ",
               first + count, " are not in the plan (", steps_.size(), " steps)");
  KILN_REQUIRE(repeat >= 1 && warmup >= 0 && iters >= 1, invalid_argument, "step timing needs repeat >= 1, warmup >= 0, iters >= 1");
  KILN_CUDA_TRY(cudaSetDevice(options_.device_index));
  const auto enqueue_range = [&]() -> Status {
    for (int r = 0; r < repeat; ++r) KILN_TRY(enqueue_steps(first, first + count, false));
    return Status::ok();
  };
  // Captured for this call only: a range is timed once per engine (kiln bench-target's points).
  OwnedHandle<cudaGraphExec_t, cudaGraphExecDestroy> graph;
  std::string failure;
  if (use_graph_) graph.handle = capture(enqueue_range, failure);
  return time_with_events(context_.stream, graph.handle, enqueue_range, warmup, iters, repeat);
}

std::string CudaEngine::describe() const {
  std::ostringstream os;
  os << properties_.name << " (sm_" << properties_.major << properties_.minor << "), " << device_precision_name(options_.precision)
     << ", ";
  if (!use_graph_) os << "stream launches (batch above " << options_.graph_max_batch << ")";
  else if (run_graph_.exec) os << "CUDA Graph";
  else if (run_graph_.tried) os << "stream launches (graph capture failed: " << run_graph_.failure << ")";
  else os << "CUDA Graph on first run";
  return os.str();
}

}  // namespace

Result<std::unique_ptr<DeviceEngine>> cuda_engine_create(const Plan& plan, const DeviceEngineOptions& options) {
  auto engine = std::make_unique<CudaEngine>();
  KILN_TRY(engine->build(plan, options));
  return std::unique_ptr<DeviceEngine>(std::move(engine));
}

}  // namespace kiln::cuda
