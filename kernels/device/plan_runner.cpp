#include "kernels/device/plan_runner.h"

#include "kernels/device/device_plugin.h"
#include "kernels/executor.h"

namespace kiln {

std::string_view device_kind_name(DeviceKind kind) { return kind == DeviceKind::cuda ? "cuda" : "cpu"; }

std::optional<DeviceKind> device_kind_from_name(std::string_view name) {
  if (name == "cpu") return DeviceKind::cpu;
  if (name == "cuda") return DeviceKind::cuda;
  return std::nullopt;
}

PlanRunner::~PlanRunner() = default;

Result<std::unique_ptr<PlanRunner>> PlanRunner::create(const Plan& plan, const PlanRunnerOptions& options) {
  std::unique_ptr<PlanRunner> runner(new PlanRunner());
  runner->device_ = options.device;
  if (options.device == DeviceKind::cpu) {
    KILN_REQUIRE(options.device_options.keep_fp32.empty(), invalid_argument,
                 "nodes kept in fp32 (--cuda-keep-fp32) are a GPU plan's mixed precision: add --device cuda");
    KILN_ASSIGN(engine, Engine::create(plan, {options.threads, options.verbose}));
    runner->engine_ = std::move(engine);
    return runner;
  }
  // The device backends trust the plan's types as the CPU kernels do: checked here, where the
  // op definitions are.
  std::vector<const Tensor*> constant_of(static_cast<size_t>(std::max(plan.num_slots, 0)), nullptr);
  for (const auto& [slot, tensor] : plan.constants)
    if (slot >= 0 && slot < plan.num_slots) constant_of[static_cast<size_t>(slot)] = &tensor;
  for (const PlanStep& step : plan.steps) KILN_TRY(check_step_types(plan, step, constant_of));
  for (const PlanInput& in : plan.inputs) {
    KILN_REQUIRE(in.slot >= 0 && static_cast<size_t>(in.slot) < plan.slot_types.size(), invalid_argument, "input '", in.name,
                 "' has no type in the plan");
    runner->input_decls_.push_back(in);
    runner->input_decls_.back().type = plan.slot_types[static_cast<size_t>(in.slot)];
  }
  KILN_ASSIGN(backend, cuda_backend_open(options.device_options.device_index));
  DeviceEngineOptions device_options = options.device_options;
  if (!device_options.verbose) device_options.verbose = options.verbose;
  KILN_TRY(backend->check_plan(plan, device_options));
  KILN_ASSIGN(device_engine, backend->create_engine(plan, device_options));
  runner->device_engine_ = std::move(device_engine);
  return runner;
}

Result<std::vector<Tensor>> PlanRunner::run(const std::vector<Tensor>& inputs, std::vector<double>* step_ms) {
  if (engine_) return engine_->run(inputs, step_ms);
  KILN_REQUIRE(inputs.size() == input_decls_.size(), invalid_argument, "the model has ", input_decls_.size(), " inputs, but ",
               inputs.size(), " were given");
  for (size_t i = 0; i < inputs.size(); ++i) KILN_TRY(check_input(input_decls_[i], inputs[i]));
  return device_engine_->run(inputs, step_ms);
}

Result<std::vector<double>> PlanRunner::time_on_device(int warmup, int iters) {
  KILN_REQUIRE(device_engine_, unsupported, "device-only timing needs a device plan (--device cuda)");
  return device_engine_->time_on_device(warmup, iters);
}

const std::vector<EngineStep>& PlanRunner::steps() const { return engine_ ? engine_->steps() : device_engine_->steps(); }
const EngineMemory& PlanRunner::memory() const { return engine_ ? engine_->memory() : device_engine_->memory(); }
int PlanRunner::threads() const { return engine_ ? engine_->threads() : 0; }

std::string PlanRunner::describe() const {
  if (engine_) return "cpu, " + std::to_string(engine_->threads()) + " threads";
  return "cuda: " + device_engine_->describe();
}

}  // namespace kiln
