// The thread pace probe (perfmodel/microbench/thread_pace.h): CPUs lost when threads together are
// slower than one, and a probe that times both on this machine.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "perfmodel/microbench/thread_pace.h"

using namespace kiln;
using namespace kiln::perf;

TEST_CASE("thread pace: CPUs count as lost only when the threads together are slower than one", "[unit]") {
  CHECK(thread_pace_lost_cpus({2, 1.0, 0.6}) == 0.0);  // 1.7x faster: a quiet machine
  CHECK(thread_pace_lost_cpus({2, 1.0, 1.0}) == 0.0);  // no faster (one thread fills the memory bus): not loaded
  CHECK(thread_pace_lost_cpus({2, 1.0, 2.0}) == Approx(1.0));   // the Zen 4 VM's slow mode: half the speed of one
  CHECK(thread_pace_lost_cpus({4, 1.0, 1.25}) == Approx(0.8));  // 0.8x at four threads
  CHECK(thread_pace_lost_cpus({2, 1.0, 0.0}) == 0.0);  // not measured
  // The store's rule (kLoadSlack 0.5) flags two-thread points from 0.75x one thread's speed down.
  CHECK(thread_pace_lost_cpus({2, 1.0, 1.0 / 0.76}) < 0.5);
  CHECK(thread_pace_lost_cpus({2, 1.0, 1.0 / 0.74}) > 0.5);
}

TEST_CASE("thread pace probe: times one streaming Add on one thread and on two", "[unit]") {
  CHECK(ThreadPaceProbe::create(1).status().code() == ErrorCode::invalid_argument);
  auto probe = ThreadPaceProbe::create(2);
  REQUIRE(probe);
  auto pace = probe->measure();
  REQUIRE(pace);
  INFO("one thread " << pace->one_thread_ms << " ms, two " << pace->threads_ms << " ms");
  CHECK(pace->threads == 2);
  CHECK(pace->one_thread_ms > 0);
  CHECK(pace->threads_ms > 0);
  CHECK(pace->speedup() == Approx(pace->one_thread_ms / pace->threads_ms));
  CHECK(thread_pace_lost_cpus(*pace) >= 0.0);
}

TEST_CASE("thread pace: a passive OpenMP wait policy is warned about, any other is not", "[unit]") {
  const char* before = std::getenv("OMP_WAIT_POLICY");
  const std::string saved = before ? before : "";
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  CHECK(omp_passive_wait_warning().find("OMP_WAIT_POLICY=PASSIVE") == 0);
  setenv("OMP_WAIT_POLICY", "active", 1);
  CHECK(omp_passive_wait_warning().empty());
  unsetenv("OMP_WAIT_POLICY");
  CHECK(omp_passive_wait_warning().empty());
  if (before) setenv("OMP_WAIT_POLICY", saved.c_str(), 1);
}
