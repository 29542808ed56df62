// What kiln optimize measures: the plan's top CPU candidates, plus the best of every other
// precision (predictions miss most across precisions; fp32 is the accuracy fallback).
#include <catch2/catch.hpp>

#include "service/planning/plan_application.h"

using namespace kiln;

namespace {

perf::Candidate candidate(const std::string& device, const std::string& precision, int64_t batch) {
  perf::Candidate c;
  c.device = device;
  c.precision = precision;
  c.batch = batch;
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
  CHECK(names(planning::candidates_to_try(plan, 3)) ==
        std::vector<std::string>{"cpu int8 b4", "cpu int8 b1", "cpu int8 b16", "cpu bf16 b4", "cpu fp32 b4"});
  // A precision already in the top ones adds nothing.
  CHECK(names(planning::candidates_to_try(plan, 4)) ==
        std::vector<std::string>{"cpu int8 b4", "cpu int8 b1", "cpu int8 b16", "cpu bf16 b4", "cpu fp32 b4"});
  CHECK(names(planning::candidates_to_try(plan, 1)) == std::vector<std::string>{"cpu int8 b4", "cpu bf16 b4", "cpu fp32 b4"});
  CHECK(planning::candidates_to_try(perf::PlanResult{}, 3).empty());
}
