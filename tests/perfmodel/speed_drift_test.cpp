// The bench-target drift check: readings paired by thread count, the change and when it counts as
// the machine having moved, and one real probe on this machine.
#include <catch2/catch.hpp>

#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/speed_drift.h"

using namespace kiln::perf;

TEST_CASE("speed drift pairs readings by thread count and flags a move above 10%", "[perfmodel][unit]") {
  const std::vector<SpeedReading> start = {{1, 76.0, false}, {2, 135.0, false}, {4, 200.0, false}};
  const std::vector<SpeedReading> end = {{2, 173.0, true}, {1, 80.0, false}};
  const std::vector<SpeedDrift> d = speed_drift(start, end);
  REQUIRE(d.size() == 2);  // 4 threads: no reading at the end
  CHECK(d[0].threads == 1);
  CHECK(d[0].change() == Approx(80.0 / 76.0 - 1));
  CHECK_FALSE(d[0].moved());  // +5%
  CHECK_FALSE(d[0].loaded);
  CHECK(d[1].threads == 2);
  CHECK(d[1].moved());  // +28%
  CHECK(d[1].loaded);   // the end reading was under load
  CHECK(speed_drift_text(d[0]) == "f32 peak at 1 thread 76.0 -> 80.0 GFLOP/s (+5%)");
  CHECK(speed_drift_text(d[1]) == "f32 peak at 2 threads 135.0 -> 173.0 GFLOP/s (+28%) (under load)");
  CHECK(SpeedDrift{1, 100, 85, false}.moved());  // slower counts too
  CHECK(speed_drift({{1, 0.0, false}}, {{1, 50.0, false}}).empty());  // a failed reading pairs with nothing
}

TEST_CASE("the speed probe times the f32 peak at each thread count asked for", "[perfmodel][unit]") {
  BenchPlanOptions plan;
  plan.quick = true;
  plan.threads = {1};
  const auto readings = speed_probe(fingerprint_local(), plan);
  REQUIRE(readings);
  REQUIRE(readings->size() == 1);
  CHECK((*readings)[0].threads == 1);
  CHECK((*readings)[0].gflops > 0.1);
}
