#include "kernels/engine.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "kernels/executor.h"
#include "kernels/registry.h"

namespace kiln {

namespace {

enum class ValueKind { constant, input, intermediate, output };

struct RtValue {
  std::string name;
  ValueKind kind = ValueKind::intermediate;
  DType dtype = DType::f32;
  Shape shape;
  Layout layout;
  const Tensor* constant = nullptr;
  int first_step = -1;
  int last_step = -1;
  int64_t offset = -1;  // in the arena, for intermediates
  int plain_copy = -1;  // value holding this one converted to plain layout, once made
  int shares_buffer_of = -1;  // value whose arena buffer this one reuses in place

  size_t bytes() const {
    return layout.plain() ? static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype) : layout.opaque->bytes();
  }
};

struct RtStep {
  std::string name;
  const KernelImpl* impl = nullptr;  // nullptr for conversions
  std::unique_ptr<Kernel> kernel;
  std::vector<int> inputs;  // value indices; -1 absent
  std::vector<int> outputs;
};

}  // namespace

struct Engine::State {
  std::vector<RtValue> values;
  std::vector<RtStep> steps;
  std::vector<int> inputs;   // value index per plan input
  std::vector<int> outputs;  // value index per plan output
  std::vector<PlanInput> input_decls;
  std::vector<std::string> output_names;
  std::vector<EngineStep> step_info;
  EngineMemory memory;
  int threads = 1;
  std::vector<uint8_t> arena_storage;
  uint8_t* arena = nullptr;
  std::vector<uint8_t> scratch;
  std::vector<Tensor> constants;  // keeps plan constants alive
};

namespace {

Status check_concrete(const Plan& plan, int slot) {
  KILN_REQUIRE(slot >= 0 && static_cast<size_t>(slot) < plan.slot_types.size(), internal, "slot ", slot,
               " has no type in the plan");
  const ValueType& t = plan.slot_types[static_cast<size_t>(slot)];
  KILN_REQUIRE(t.rank_known && sym_shape_is_concrete(t.shape), invalid_argument, "value in slot ", slot,
               " has shape ", sym_shape_to_string(t.shape),
               "; compiled execution needs concrete shapes (compile for a batch size)");
  return Status::ok();
}

// Adds a step converting value `v` to plain layout (once per value) and returns the plain value.
Result<int> plain_version(Engine::State& s, int v, int at_step, std::ostream* verbose) {
  // A copy, not a reference: pushing the plain value below may move s.values.
  const RtValue value = s.values[static_cast<size_t>(v)];
  if (value.layout.plain()) return v;
  if (value.plain_copy >= 0) return value.plain_copy;
  KILN_ASSIGN(kernel, value.layout.opaque->make_to_plain(value.dtype, value.shape));
  RtValue copy;
  copy.name = value.name + "/plain";
  copy.dtype = value.dtype;
  copy.shape = value.shape;
  copy.first_step = at_step;
  s.values.push_back(copy);
  const int c = static_cast<int>(s.values.size()) - 1;
  s.values[static_cast<size_t>(v)].plain_copy = c;
  RtStep step;
  step.name = value.name + " to plain";
  step.kernel = std::move(kernel);
  step.inputs = {v};
  step.outputs = {c};
  s.steps.push_back(std::move(step));
  s.step_info.push_back({s.steps.back().name, "convert." + std::string(value.layout.opaque->backend()), "plain", "ToPlain"});
  if (verbose) *verbose << "kiln: " << s.step_info.back().node << " -> " << s.step_info.back().kernel << " [plain]\n";
  return c;
}

KernelBuild make_build(const Engine::State& s, const PlanStep& step, const std::vector<int>& inputs,
                       const std::vector<int>& outputs, int threads) {
  KernelBuild build;
  build.op = step.op;
  build.attrs = &step.attrs;
  build.node_name = step.name;
  build.threads = threads;
  for (int v : inputs) {
    ValueDesc d;
    if (v < 0) {
      d.present = false;
    } else {
      const RtValue& value = s.values[static_cast<size_t>(v)];
      d.dtype = value.dtype;
      d.shape = value.shape;
      d.layout = value.layout;
      d.constant = value.constant;
    }
    build.inputs.push_back(std::move(d));
  }
  for (int v : outputs) {
    ValueDesc d;
    if (v < 0) {
      d.present = false;
    } else {
      d.dtype = s.values[static_cast<size_t>(v)].dtype;
      d.shape = s.values[static_cast<size_t>(v)].shape;
    }
    build.outputs.push_back(std::move(d));
  }
  return build;
}

Status add_plan_step(Engine::State& s, const PlanStep& step, const std::vector<int>& slot_value, std::ostream* verbose) {
  std::vector<int> inputs, outputs;
  for (int slot : step.inputs) inputs.push_back(slot < 0 ? -1 : slot_value[static_cast<size_t>(slot)]);
  for (int slot : step.outputs) outputs.push_back(slot < 0 ? -1 : slot_value[static_cast<size_t>(slot)]);

  // First with the layouts the producers chose; if nothing reads them, with plain copies.
  auto choice = kernel_select(make_build(s, step, inputs, outputs, s.threads));
  if (!choice) {
    bool any_opaque = false;
    for (int& v : inputs) {
      if (v < 0 || s.values[static_cast<size_t>(v)].layout.plain()) continue;
      any_opaque = true;
      KILN_ASSIGN(plain, plain_version(s, v, static_cast<int>(s.steps.size()), verbose));
      v = plain;
    }
    if (any_opaque) choice = kernel_select(make_build(s, step, inputs, outputs, s.threads));
  }
  if (!choice) return choice.status();
  const std::vector<Layout> layouts = choice->kernel->output_layouts();
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i] >= 0) s.values[static_cast<size_t>(outputs[i])].layout = i < layouts.size() ? layouts[i] : Layout{};
  if (verbose) {
    *verbose << "kiln: " << step.name << " (" << op_name(step.op) << ") -> " << choice->impl->name;
    if (!outputs.empty() && outputs[0] >= 0) *verbose << " [" << s.values[static_cast<size_t>(outputs[0])].layout.describe() << ']';
    *verbose << '\n';
    for (const std::string& r : choice->rejections) *verbose << "        not " << r << '\n';
  }
  RtStep rt;
  rt.name = step.name;
  rt.impl = choice->impl;
  rt.kernel = std::move(choice->kernel);
  rt.inputs = std::move(inputs);
  rt.outputs = std::move(outputs);
  s.step_info.push_back({rt.name, std::string(rt.impl->name),
                         rt.outputs.empty() || rt.outputs[0] < 0 ? "" : s.values[static_cast<size_t>(rt.outputs[0])].layout.describe(),
                         std::string(op_name(step.op))});
  s.steps.push_back(std::move(rt));
  return Status::ok();
}

Status plan_arena(Engine::State& s) {
  for (size_t i = 0; i < s.steps.size(); ++i) {
    for (int v : s.steps[i].outputs)
      if (v >= 0 && s.values[static_cast<size_t>(v)].first_step < 0) s.values[static_cast<size_t>(v)].first_step = static_cast<int>(i);
    for (int v : s.steps[i].inputs)
      if (v >= 0) s.values[static_cast<size_t>(v)].last_step = static_cast<int>(i);
  }
  // Last step at which each buffer is needed (outputs: until the run returns).
  std::vector<int> buffer_end(s.values.size(), -1);
  for (size_t v = 0; v < s.values.size(); ++v) {
    const RtValue& value = s.values[v];
    if (value.first_step < 0) continue;
    if (value.kind == ValueKind::output) buffer_end[v] = static_cast<int>(s.steps.size());
    else if (value.kind == ValueKind::intermediate) buffer_end[v] = std::max(value.last_step, value.first_step);
  }
  // In place: a step's output 0 takes over the buffer of the input its kernel names (a fused
  // residual) when that buffer is needed by nothing after this step and no other input of the
  // step reads it; this removes the residual copy and one buffer per residual block.
  auto buffer_of = [&](int v) {
    while (s.values[static_cast<size_t>(v)].shares_buffer_of >= 0) v = s.values[static_cast<size_t>(v)].shares_buffer_of;
    return v;
  };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const RtStep& step = s.steps[i];
    const int k = step.kernel->in_place_input();
    if (k < 0 || static_cast<size_t>(k) >= step.inputs.size() || step.outputs.empty()) continue;
    const int in = step.inputs[static_cast<size_t>(k)], out = step.outputs[0];
    if (in < 0 || out < 0) continue;
    const int buffer = buffer_of(in);
    if (s.values[static_cast<size_t>(buffer)].kind != ValueKind::intermediate) continue;
    if (buffer_end[static_cast<size_t>(buffer)] != static_cast<int>(i)) continue;
    if (s.values[static_cast<size_t>(out)].bytes() != s.values[static_cast<size_t>(in)].bytes()) continue;
    bool read_twice = false;
    for (size_t j = 0; j < step.inputs.size(); ++j)
      if (static_cast<int>(j) != k && step.inputs[j] >= 0 && buffer_of(step.inputs[j]) == buffer) read_twice = true;
    if (read_twice) continue;
    s.values[static_cast<size_t>(out)].shares_buffer_of = buffer;
    buffer_end[static_cast<size_t>(buffer)] = buffer_end[static_cast<size_t>(out)];
    ++s.memory.in_place_steps;
  }
  std::vector<BufferRequest> requests;
  std::vector<int> owners;
  for (size_t v = 0; v < s.values.size(); ++v) {
    RtValue& value = s.values[v];
    if (buffer_end[v] < 0 || value.shares_buffer_of >= 0) continue;
    requests.push_back({static_cast<int64_t>(value.bytes()), value.first_step, buffer_end[v]});
    owners.push_back(static_cast<int>(v));
  }
  KILN_ASSIGN(plan, plan_buffers(requests));
  for (size_t r = 0; r < owners.size(); ++r) s.values[static_cast<size_t>(owners[r])].offset = plan.offsets[r];
  for (size_t v = 0; v < s.values.size(); ++v)
    if (s.values[v].shares_buffer_of >= 0) s.values[v].offset = s.values[static_cast<size_t>(buffer_of(static_cast<int>(v)))].offset;
  s.memory.arena_bytes = plan.arena_bytes;
  s.memory.lower_bound_bytes = plan.lower_bound_bytes;
  s.memory.sum_of_buffers_bytes = plan.sum_of_buffers_bytes;
  s.arena_storage.assign(static_cast<size_t>(plan.arena_bytes) + 64, 0);
  const auto base = reinterpret_cast<uintptr_t>(s.arena_storage.data());
  s.arena = s.arena_storage.data() + ((64 - base % 64) % 64);
  return Status::ok();
}

}  // namespace

Engine::Engine(std::unique_ptr<State> state) : state_(std::move(state)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const Plan& plan, const EngineOptions& options) {
  auto s = std::make_unique<State>();
  s->threads = options.threads > 0 ? options.threads : cpu_quota_threads();
  std::vector<int> slot_value(static_cast<size_t>(plan.num_slots), -1);
  auto add_value = [&](int slot, ValueKind kind, std::string name) -> Result<int> {
    KILN_TRY(check_concrete(plan, slot));
    RtValue v;
    v.name = std::move(name);
    v.kind = kind;
    v.dtype = plan.slot_types[static_cast<size_t>(slot)].dtype;
    v.shape = sym_shape_concrete(plan.slot_types[static_cast<size_t>(slot)].shape);
    s->values.push_back(std::move(v));
    slot_value[static_cast<size_t>(slot)] = static_cast<int>(s->values.size()) - 1;
    return slot_value[static_cast<size_t>(slot)];
  };
  s->constants.reserve(plan.constants.size());
  std::vector<const Tensor*> constant_of(static_cast<size_t>(plan.num_slots), nullptr);
  for (const auto& [slot, tensor] : plan.constants) {
    KILN_REQUIRE(slot >= 0 && slot < plan.num_slots && static_cast<size_t>(slot) < plan.slot_types.size(),
                 invalid_argument, "constant for slot ", slot, ", which the plan does not have");
    const ValueType& declared = plan.slot_types[static_cast<size_t>(slot)];
    KILN_REQUIRE(declared.dtype == tensor.dtype() && declared.rank_known &&
                     sym_shape_is_concrete(declared.shape) && sym_shape_concrete(declared.shape) == tensor.shape(),
                 invalid_argument, "constant in slot ", slot, " is ", dtype_name(tensor.dtype()),
                 shape_to_string(tensor.shape()), " but the slot is ", dtype_name(declared.dtype),
                 sym_shape_to_string(declared.shape));
    s->constants.push_back(tensor);
    constant_of[static_cast<size_t>(slot)] = &s->constants.back();
    s->values.push_back(RtValue{});
    RtValue& v = s->values.back();
    v.name = "constant@" + std::to_string(slot);
    v.kind = ValueKind::constant;
    v.dtype = tensor.dtype();
    v.shape = tensor.shape();
    v.constant = &s->constants.back();
    slot_value[static_cast<size_t>(slot)] = static_cast<int>(s->values.size()) - 1;
    s->memory.weight_bytes += static_cast<int64_t>(tensor.nbytes());
  }
  for (const PlanInput& in : plan.inputs) {
    KILN_ASSIGN(v, add_value(in.slot, ValueKind::input, in.name));
    s->inputs.push_back(v);
    s->input_decls.push_back(in);
    s->input_decls.back().type = plan.slot_types[static_cast<size_t>(in.slot)];
  }
  for (const PlanStep& step : plan.steps)
    for (int slot : step.outputs)
      if (slot >= 0) {
        KILN_ASSIGN(v, add_value(slot, ValueKind::intermediate, step.name));
        (void)v;
      }
  for (const PlanStep& step : plan.steps) {
    for (int slot : step.inputs)
      KILN_REQUIRE(slot < 0 || slot_value[static_cast<size_t>(slot)] >= 0, invalid_argument, "node '", step.name,
                   "' reads slot ", slot, ", which nothing writes");
    KILN_TRY(check_step_types(plan, step, constant_of));  // fast kernels trust these types
    Status st = add_plan_step(*s, step, slot_value, options.verbose);
    if (!st) return st.with_context("node '" + step.name + "' (" + std::string(op_name(step.op)) + "): ");
  }
  for (const auto& [slot, name] : plan.outputs) {
    KILN_REQUIRE(slot_value[static_cast<size_t>(slot)] >= 0, invalid_argument, "output '", name, "' is never computed");
    int v = slot_value[static_cast<size_t>(slot)];
    KILN_ASSIGN(plain, plain_version(*s, v, static_cast<int>(s->steps.size()), options.verbose));
    s->values[static_cast<size_t>(plain)].kind =
        s->values[static_cast<size_t>(plain)].kind == ValueKind::intermediate ? ValueKind::output : s->values[static_cast<size_t>(plain)].kind;
    s->outputs.push_back(plain);
    s->output_names.push_back(name);
  }
  size_t scratch = 0;
  for (const RtStep& step : s->steps) scratch = std::max(scratch, step.kernel->scratch_bytes());
  s->scratch.assign(scratch, 0);
  s->memory.scratch_bytes = static_cast<int64_t>(scratch);
  KILN_TRY(plan_arena(*s));
  return std::unique_ptr<Engine>(new Engine(std::move(s)));
}

Result<std::vector<Tensor>> Engine::run(const std::vector<Tensor>& inputs, std::vector<double>* step_ms) {
  State& s = *state_;
  KILN_REQUIRE(inputs.size() == s.inputs.size(), invalid_argument, "the model has ", s.inputs.size(), " inputs, but ",
               inputs.size(), " were given");
  std::vector<const void*> data(s.values.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_TRY(check_input(s.input_decls[i], inputs[i]));
    data[static_cast<size_t>(s.inputs[i])] = inputs[i].raw();
  }
  for (size_t v = 0; v < s.values.size(); ++v) {
    const RtValue& value = s.values[v];
    if (value.kind == ValueKind::constant) data[v] = value.constant->raw();
    else if (value.offset >= 0) data[v] = s.arena + value.offset;
  }
  KernelArgs args;
  if (step_ms) step_ms->assign(s.steps.size(), 0.0);
  for (size_t i = 0; i < s.steps.size(); ++i) {
    RtStep& step = s.steps[i];
    const auto start = step_ms ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    args.inputs.clear();
    args.outputs.clear();
    for (int v : step.inputs) args.inputs.push_back(v < 0 ? nullptr : data[static_cast<size_t>(v)]);
    for (int v : step.outputs) args.outputs.push_back(v < 0 ? nullptr : const_cast<void*>(data[static_cast<size_t>(v)]));
    args.scratch = s.scratch.empty() ? nullptr : s.scratch.data();
    Status st = step.kernel->run(args);
    if (!st) return st.with_context("node '" + step.name + "': ");
    if (step_ms) (*step_ms)[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::vector<Tensor> outputs;
  for (int v : s.outputs) {
    const RtValue& value = s.values[static_cast<size_t>(v)];
    Tensor t = Tensor::zeros(value.dtype, value.shape);
    if (t.nbytes()) std::memcpy(t.raw(), data[static_cast<size_t>(v)], t.nbytes());
    outputs.push_back(std::move(t));
  }
  return outputs;
}

const std::vector<EngineStep>& Engine::steps() const { return state_->step_info; }
const EngineMemory& Engine::memory() const { return state_->memory; }
int Engine::threads() const { return state_->threads; }

int cpu_quota_threads() {
  cpu_set_t set;
  int cpus = 1;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  std::ifstream in("/sys/fs/cgroup/cpu.max");
  std::string quota, period;
  if (in >> quota >> period && quota != "max") {
    const double q = std::atof(quota.c_str()), p = std::atof(period.c_str());
    if (q > 0 && p > 0) cpus = std::min(cpus, std::max(1, static_cast<int>(std::ceil(q / p))));
  }
  return cpus;
}

}  // namespace kiln
