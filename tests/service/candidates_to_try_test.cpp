// What kiln optimize measures: the plan's top CPU candidates, plus the best of every other
// precision (predictions miss most across precisions; fp32 is the accuracy fallback), and up to two
// near misses that would win if their constraint held when measured.
#include <catch2/catch.hpp>

#include "service/planning/plan_application.h"

using namespace kiln;

namespace {

perf::Candidate candidate(const std::string& device, const std::string& precision, int64_t batch, double latency_ms = 1,
                          double violation = 0) {
  perf::Candidate c;
  c.device = device;
  c.precision = precision;
  c.batch = batch;
  c.latency_ms = latency_ms;
  c.throughput_per_s = 1000.0 * static_cast<double>(batch) / latency_ms;
  if (violation > 0) c.blocked_by = {"throughput"}, c.violation = violation;
  return c;
}

std::vector<std::string> names(const std::vector<perf::Candidate>& cs) {
  std::vector<std::string> out;
  for (const perf::Candidate& c : cs) out.push_back(c.device + " " + c.precision + " b" + std::to_string(c.batch));
  return out;
}

}  // namespace

TEST_CASE("candidates to try: the top CPU ones, then the best of each precision not among them", "[planning]") {
  perf::PlanResult plan;
  plan.candidates = {candidate("cuda", "fp16", 8), candidate("cpu", "int8", 4), candidate("cpu", "int8", 1),
                     candidate("cpu", "int8", 16), candidate("cpu", "bf16", 4), candidate("cpu", "int8", 8),
                     candidate("cpu", "fp32", 4), candidate("cpu", "bf16", 1), candidate("cpu", "fp32", 1)};
  CHECK(names(planning::candidates_to_try(plan, 3, api::Objective::latency)) ==
        std::vector<std::string>{"cpu int8 b4", "cpu int8 b1", "cpu int8 b16", "cpu bf16 b4", "cpu fp32 b4"});
  // A precision already in the top ones adds nothing.
  CHECK(names(planning::candidates_to_try(plan, 4, api::Objective::latency)) ==
        std::vector<std::string>{"cpu int8 b4", "cpu int8 b1", "cpu int8 b16", "cpu bf16 b4", "cpu fp32 b4"});
  CHECK(names(planning::candidates_to_try(plan, 1, api::Objective::latency)) == std::vector<std::string>{"cpu int8 b4", "cpu bf16 b4", "cpu fp32 b4"});
  CHECK(planning::candidates_to_try(perf::PlanResult{}, 3, api::Objective::latency).empty());
}

TEST_CASE("candidates to try: near misses that would win are measured too", "[planning]") {
  // Minimum latency under a throughput bound: b4 and b8 meet it as predicted; b1 misses it by 5%
  // and would be faster, b2 by 8% and faster too, fp32 b1 by 5% but slower; bf16 b1 misses by 30%.
  perf::PlanResult plan;
  plan.candidates = {candidate("cpu", "int8", 4, 2.0),        candidate("cpu", "int8", 8, 3.0),
                     candidate("cpu", "int8", 1, 1.0, 0.05),  candidate("cpu", "fp32", 1, 4.0, 0.05),
                     candidate("cpu", "int8", 2, 1.5, 0.08),  candidate("cpu", "int8", 16, 1.2, 0.09),
                     candidate("cpu", "bf16", 1, 1.1, 0.30)};
  plan.chosen = 0;
  CHECK(names(planning::candidates_to_try(plan, 2, api::Objective::latency)) ==
        std::vector<std::string>{"cpu int8 b4", "cpu int8 b8", "cpu fp32 b1", "cpu bf16 b1", "cpu int8 b1", "cpu int8 b2"});
  // Without a feasible choice every near miss could win; still at most two.
  plan.chosen.reset();
  CHECK(names(planning::candidates_to_try(plan, 1, api::Objective::latency)).size() == 3 + 2);
}
