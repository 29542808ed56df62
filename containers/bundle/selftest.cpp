#include "containers/bundle/selftest.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kernels/io/plan_io.h"
#include "kernels/precision.h"

namespace kiln {
namespace {

// splitmix64: a portable generator (std:: distributions differ between standard libraries).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

SelftestTolerance selftest_tolerance_for(const Plan& plan) {
  bool bf16 = false, int8 = false;
  for (const PlanStep& step : plan.steps) {
    auto p = precision_from_attrs(step.attrs);
    if (!p) continue;
    bf16 = bf16 || *p == Precision::bf16;
    int8 = int8 || *p == Precision::int8;
  }
  // bf16 keeps 8 bits of mantissa (relative rounding 2^-9 per value, accumulated over the layers);
  // int8 quantizes every activation to 1 part in 255 of its range.
  if (int8) return {1e-3, 8e-2};
  if (bf16) return {1e-3, 3e-2};
  return {};
}

Result<NamedTensors> selftest_inputs_make(const Plan& plan, uint64_t seed) {
  NamedTensors inputs;
  uint64_t state = seed;
  for (const PlanInput& in : plan.inputs) {
    KILN_REQUIRE(in.type.rank_known, unsupported, "input '", in.name, "' has an unknown rank: self-test vectors need fixed shapes");
    Shape shape;
    for (const Dim& d : in.type.shape) {
      KILN_REQUIRE(d.known(), unsupported, "input '", in.name, "' has a symbolic dimension '", d.symbol,
                   "': self-test vectors need a compiled plan with fixed shapes");
      shape.push_back(d.value);
    }
    Tensor t = Tensor::zeros(in.type.dtype, shape);
    if (dtype_is_float(in.type.dtype)) {
      visit_dtype(in.type.dtype, [&]<typename T>() {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
          T* dst = t.data<T>();
          for (int64_t i = 0; i < t.numel(); ++i) {
            const float u = static_cast<float>(splitmix64(state) >> 40) / static_cast<float>(1 << 24);
            dst[i] = T(2.0f * u - 1.0f);
          }
        }
      });
    }
    inputs.emplace_back(in.name, std::move(t));
  }
  return inputs;
}

std::vector<SelftestCheck> selftest_compare(const NamedTensors& expected, const NamedTensors& got,
                                            const SelftestTolerance& tolerance) {
  std::vector<SelftestCheck> checks;
  for (const auto& [name, want] : expected) {
    SelftestCheck check;
    check.output = name;
    const Tensor* have = nullptr;
    for (const auto& [n, t] : got)
      if (n == name) have = &t;
    if (!have) {
      check.problem = "missing from the results";
    } else if (have->dtype() != want.dtype() || have->shape() != want.shape()) {
      check.problem = "is " + have->describe() + ", expected " + want.describe();
    } else {
      double max_ref = 0;
      double max_err = 0;
      bool finite = true;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const double e = want.value_as_double(i);
        const double g = have->value_as_double(i);
        finite = finite && std::isfinite(g) == std::isfinite(e);
        if (std::isfinite(e)) max_ref = std::max(max_ref, std::fabs(e));
        if (std::isfinite(e) && std::isfinite(g)) max_err = std::max(max_err, std::fabs(g - e));
      }
      check.max_abs_error = max_err;
      check.limit = tolerance.abs + tolerance.rel * max_ref;
      if (!finite) check.problem = "has non-finite values where the reference has finite ones (or the reverse)";
      check.passed = finite && max_err <= check.limit;
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

Status selftest_status(const std::vector<SelftestCheck>& checks) {
  for (const SelftestCheck& c : checks) {
    if (c.passed) continue;
    if (!c.problem.empty()) return make_error(ErrorCode::invalid_argument, "self-test failed: output '", c.output, "' ", c.problem);
    return make_error(ErrorCode::invalid_argument, "self-test failed: output '", c.output,
                      "' differs from the verified reference by ", c.max_abs_error, " (limit ", c.limit, ")");
  }
  return Status::ok();
}

SelftestTolerance selftest_tolerance_on_device(SelftestTolerance bundle, const PlanRunnerOptions& options) {
  if (options.device == DeviceKind::cpu) return bundle;
  double rel = 0;
  if (options.device_options.precision == DevicePrecision::tf32) rel = 1e-2;
  if (options.device_options.precision == DevicePrecision::fp16) rel = 3e-2;
  // 8 mantissa bits: an H100 ran the torchvision set within 9.1e-2 (PyTorch's own bf16: 1.5e-1).
  if (options.device_options.precision == DevicePrecision::bf16) rel = 2e-1;
  bundle.rel = std::max(bundle.rel, rel);
  return bundle;
}

Result<std::vector<SelftestCheck>> selftest_run(const Plan& plan, const NamedTensors& inputs,
                                                const NamedTensors& expected, const SelftestTolerance& tolerance,
                                                const PlanRunnerOptions& options) {
  std::vector<std::string> ignored;
  KILN_ASSIGN(values, plan_inputs_match(inputs, plan, "the self-test inputs", ignored));
  KILN_ASSIGN(runner, PlanRunner::create(plan, options));
  KILN_ASSIGN(results, runner->run(values));
  return selftest_compare(expected, plan_outputs_name(plan, results), tolerance);
}

Result<SelftestTolerance> selftest_tolerance_read(const std::string& metadata_path) {
  std::ifstream in(metadata_path, std::ios::binary);
  KILN_REQUIRE(in, io, "cannot open '", metadata_path, "'");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json meta = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  KILN_REQUIRE(!meta.is_discarded() && meta.is_object(), parse, metadata_path, " is not a JSON object");
  SelftestTolerance tolerance;
  const auto st = meta.find("selftest");
  if (st == meta.end() || !st->is_object()) return tolerance;
  const auto tol = st->find("tolerance");
  if (tol == st->end() || !tol->is_object()) return tolerance;
  for (const char* key : {"abs", "rel"}) {
    const auto v = tol->find(key);
    if (v == tol->end()) continue;
    KILN_REQUIRE(v->is_number() && v->get<double>() >= 0, parse, metadata_path, ": selftest.tolerance.", key,
                 " must be a non-negative number");
    (std::string(key) == "abs" ? tolerance.abs : tolerance.rel) = v->get<double>();
  }
  return tolerance;
}

}  // namespace kiln
