#include "kernels/device/mixed_precision.h"

#include <algorithm>
#include <set>
#include <string>

namespace kiln {

bool MixedPrecision::any() const { return std::find(kept_step.begin(), kept_step.end(), true) != kept_step.end(); }

Result<MixedPrecision> mixed_precision(const Plan& plan, const DeviceEngineOptions& options) {
  MixedPrecision out;
  out.kept_step.assign(plan.steps.size(), false);
  out.stored_wide.assign(static_cast<size_t>(std::max(plan.num_slots, 0)), false);
  if (options.keep_fp32.empty()) return out;
  KILN_REQUIRE(options.precision != DevicePrecision::fp32, invalid_argument,
               "keeping nodes in fp32 is for tf32, fp16 and bf16 plans: an fp32 plan computes every step in float32");
  const std::set<std::string> keep(options.keep_fp32.begin(), options.keep_fp32.end());
  std::set<std::string> found;
  for (size_t s = 0; s < plan.steps.size(); ++s)
    if (keep.count(plan.steps[s].name)) out.kept_step[s] = true, found.insert(plan.steps[s].name);
  for (const std::string& name : keep)
    KILN_REQUIRE(found.count(name), invalid_argument, "keep fp32: no step of the plan is node '", name, "'");

  std::vector<bool> read(out.stored_wide.size(), false), read_by_kept_only(out.stored_wide.size(), true);
  const auto in_range = [&](int slot) { return slot >= 0 && static_cast<size_t>(slot) < out.stored_wide.size(); };
  for (size_t s = 0; s < plan.steps.size(); ++s)
    for (int in : plan.steps[s].inputs)
      if (in_range(in)) {
        read[static_cast<size_t>(in)] = true;
        read_by_kept_only[static_cast<size_t>(in)] = read_by_kept_only[static_cast<size_t>(in)] && out.kept_step[s];
      }
  const auto wide_if_only_kept_read = [&](int slot) {
    if (in_range(slot)) out.stored_wide[static_cast<size_t>(slot)] = read[static_cast<size_t>(slot)] && read_by_kept_only[static_cast<size_t>(slot)];
  };
  for (const auto& [slot, tensor] : plan.constants) wide_if_only_kept_read(slot);
  for (const PlanInput& in : plan.inputs) wide_if_only_kept_read(in.slot);
  for (size_t s = 0; s < plan.steps.size(); ++s)
    for (int o : plan.steps[s].outputs)
      if (in_range(o)) out.stored_wide[static_cast<size_t>(o)] = out.kept_step[s];
  return out;
}

}  // namespace kiln
