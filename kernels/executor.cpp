#include "kernels/executor.h"

#include <omp.h>

#include <algorithm>
#include <string>

namespace kiln {
namespace {

std::string step_context(const PlanStep& step) {
  return "node '" + step.name + "' (" + std::string(op_name(step.op)) + "): ";
}

Status check_arity(const PlanStep& step, const OpDef& def) {
  const int n_in = static_cast<int>(step.inputs.size());
  const int n_out = static_cast<int>(step.outputs.size());
  KILN_REQUIRE(n_in >= def.min_inputs && (def.max_inputs < 0 || n_in <= def.max_inputs), invalid_argument,
               "has ", n_in, " inputs, expected ", def.min_inputs, "..",
               def.max_inputs < 0 ? std::string("n") : std::to_string(def.max_inputs));
  KILN_REQUIRE(n_out >= def.min_outputs && n_out <= def.max_outputs, invalid_argument, "has ", n_out,
               " outputs, expected ", def.min_outputs, "..", def.max_outputs);
  for (int i = 0; i < def.min_inputs; ++i)
    KILN_REQUIRE(step.inputs[static_cast<size_t>(i)] >= 0, invalid_argument, "required input ", i, " is missing");
  return Status::ok();
}

}  // namespace

Status check_step_types(const Plan& plan, const PlanStep& step, const std::vector<const Tensor*>& constants) {
  const OpDef& def = op_def(step.op);
  Status st = check_arity(step, def);
  if (!st) return st.with_context(step_context(step));
  auto type_of = [&](int slot) -> const ValueType* {
    return slot >= 0 && static_cast<size_t>(slot) < plan.slot_types.size() ? &plan.slot_types[static_cast<size_t>(slot)]
                                                                            : nullptr;
  };
  InferContext infer;
  infer.attrs = &step.attrs;
  for (int slot : step.inputs) {
    const ValueType* t = slot < 0 ? nullptr : type_of(slot);
    KILN_REQUIRE(slot < 0 || t, invalid_argument, step_context(step), "reads slot ", slot, ", which has no type");
    infer.inputs.push_back(t);
    infer.values.push_back(slot >= 0 && static_cast<size_t>(slot) < constants.size() ? constants[static_cast<size_t>(slot)]
                                                                                      : nullptr);
  }
  st = def.infer(infer);
  if (!st) return st.with_context(step_context(step));
  for (size_t i = 0; i < step.outputs.size() && i < infer.outputs.size(); ++i) {
    const ValueType* recorded = type_of(step.outputs[i]);
    if (step.outputs[i] < 0) continue;
    KILN_REQUIRE(recorded, invalid_argument, step_context(step), "writes slot ", step.outputs[i], ", which has no type");
    const ValueType& want = infer.outputs[i];
    if (!want.rank_known) continue;  // data-dependent: the kernel checks at run time
    bool same = want.dtype == recorded->dtype && recorded->rank_known && want.shape.size() == recorded->shape.size();
    for (size_t d = 0; same && d < want.shape.size(); ++d)
      same = !want.shape[d].known() || (recorded->shape[d].known() && want.shape[d].value == recorded->shape[d].value);
    KILN_REQUIRE(same, invalid_argument, step_context(step), "output ", i, " is recorded as ",
                 dtype_name(recorded->dtype), sym_shape_to_string(recorded->shape), " but its inputs make it ",
                 dtype_name(want.dtype), sym_shape_to_string(want.shape));
  }
  return Status::ok();
}

namespace {

// The shape to allocate for output `index`, or limit_exceeded when it needs more than `max_bytes`.
Result<Shape> checked_output_shape(const ValueType& type, size_t index, int64_t max_bytes) {
  Shape shape = sym_shape_concrete(type.shape);
  int64_t bytes = static_cast<int64_t>(dtype_size(type.dtype));
  bool too_big = false;
  for (int64_t d : shape) {
    KILN_REQUIRE(d >= 0, internal, "output ", index, " has a negative dim: ", shape_to_string(shape));
    if (d == 0) return shape;
    too_big = too_big || __builtin_mul_overflow(bytes, d, &bytes) || bytes > max_bytes;
  }
  KILN_REQUIRE(!too_big && bytes <= max_bytes, limit_exceeded, "output ", index, " ",
               dtype_name(type.dtype), shape_to_string(shape), " is larger than the executor's limit of ",
               max_bytes, " bytes per value");
  return shape;
}

Status run_step(const PlanStep& step, std::vector<Tensor>& slots, const ExecuteOptions& options, int threads) {
  const OpDef& def = op_def(step.op);
  KILN_TRY(check_arity(step, def));

  // Shallow copies only when a hook may replace them.
  std::vector<Tensor> replaced;
  if (options.step_inputs) {
    for (int slot : step.inputs) replaced.push_back(slot < 0 ? Tensor() : slots[static_cast<size_t>(slot)]);
    options.step_inputs(step, replaced);
  }
  std::vector<ValueType> input_types(step.inputs.size());
  InferContext infer;
  infer.attrs = &step.attrs;
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    const int slot = step.inputs[i];
    if (slot < 0) {
      infer.inputs.push_back(nullptr);
      infer.values.push_back(nullptr);
      continue;
    }
    const Tensor& t = options.step_inputs ? replaced[i] : slots[static_cast<size_t>(slot)];
    input_types[i] = ValueType::of(t.dtype(), sym_shape_from(t.shape()));
    infer.inputs.push_back(&input_types[i]);
    infer.values.push_back(&t);
  }
  KILN_TRY(def.infer(infer));
  KILN_REQUIRE(infer.outputs.size() >= step.outputs.size(), internal, "shape inference produced ",
               infer.outputs.size(), " outputs for ", step.outputs.size(), " node outputs");

  std::vector<Tensor> outputs(step.outputs.size());
  RunContext run;
  run.attrs = &step.attrs;
  run.threads = threads;
  run.inputs = infer.values;
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    const ValueType& type = infer.outputs[i];
    KILN_REQUIRE(type.rank_known && sym_shape_is_concrete(type.shape), internal,
                 "output ", i, " has no concrete shape although every input is known");
    KILN_ASSIGN(shape, checked_output_shape(type, i, options.max_value_bytes));
    outputs[i] = Tensor::zeros(type.dtype, std::move(shape));
    run.outputs.push_back(&outputs[i]);
  }
  KILN_TRY(def.run(run));
  for (size_t i = 0; i < step.outputs.size(); ++i)
    if (step.outputs[i] >= 0) slots[static_cast<size_t>(step.outputs[i])] = std::move(outputs[i]);
  return Status::ok();
}

}  // namespace

Status check_input(const PlanInput& declared, const Tensor& value) {
  const std::string expected =
      std::string(dtype_name(declared.type.dtype)) + sym_shape_to_string(declared.type.shape);
  KILN_REQUIRE(value.dtype() == declared.type.dtype, invalid_argument, "input '", declared.name, "' expects ",
               expected, ", got ", value.describe());
  if (!declared.type.rank_known) return Status::ok();
  bool fits = value.rank() == declared.type.rank();
  for (size_t d = 0; fits && d < declared.type.shape.size(); ++d)
    fits = !declared.type.shape[d].known() || declared.type.shape[d].value == value.shape()[d];
  KILN_REQUIRE(fits, shape_mismatch, "input '", declared.name, "' expects ", expected, ", got ",
               value.describe());
  return Status::ok();
}

Result<ExecuteResult> execute_reference(const Plan& plan, const std::vector<Tensor>& inputs,
                                        const ExecuteOptions& options) {
  KILN_REQUIRE(inputs.size() == plan.inputs.size(), invalid_argument, "the model has ", plan.inputs.size(),
               " inputs, but ", inputs.size(), " were given");
  std::vector<Tensor> slots(static_cast<size_t>(plan.num_slots));
  for (const auto& [slot, value] : plan.constants) slots[static_cast<size_t>(slot)] = value;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_TRY(check_input(plan.inputs[i], inputs[i]));
    slots[static_cast<size_t>(plan.inputs[i].slot)] = inputs[i];
  }

  // Last step reading each slot, so intermediates are freed as soon as they are dead.
  std::vector<int> last_use(slots.size(), -1);
  for (size_t s = 0; s < plan.steps.size(); ++s)
    for (int slot : plan.steps[s].inputs)
      if (slot >= 0) last_use[static_cast<size_t>(slot)] = static_cast<int>(s);
  std::vector<bool> pinned(slots.size(), options.keep_all_values);
  for (const auto& [slot, name] : plan.outputs) pinned[static_cast<size_t>(slot)] = true;
  // omp_get_num_procs: the CPUs of this process's affinity mask (a Slurm allocation, a cgroup's cpuset).
  const int threads = options.threads > 0 ? options.threads : std::max(1, omp_get_num_procs());

  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& step = plan.steps[s];
    for (int slot : step.inputs)
      KILN_REQUIRE(slot < 0 || slots[static_cast<size_t>(slot)].defined(), internal, step_context(step),
                   "reads slot ", slot, " before it is written");
    Status status = run_step(step, slots, options, threads);
    if (!status) return status.with_context(step_context(step));
    for (int slot : step.inputs)
      if (slot >= 0 && last_use[static_cast<size_t>(slot)] == static_cast<int>(s) && !pinned[static_cast<size_t>(slot)])
        slots[static_cast<size_t>(slot)] = Tensor();
  }

  ExecuteResult result;
  for (const auto& [slot, name] : plan.outputs) {
    KILN_REQUIRE(slots[static_cast<size_t>(slot)].defined(), invalid_graph, "output '", name, "' was never computed");
    result.outputs.push_back(slots[static_cast<size_t>(slot)]);
  }
  if (options.keep_all_values) result.slot_values = std::move(slots);
  return result;
}

}  // namespace kiln
