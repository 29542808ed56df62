// The foreign-load meter (perfmodel/microbench/foreign_load.h) sees another process's busy CPU
// and leaves out this process's own, which the 1-minute load average cannot.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "perfmodel/microbench/foreign_load.h"

using namespace kiln::perf;

namespace {

void spin_for(std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  volatile double x = 1;
  while (std::chrono::steady_clock::now() < end) x = x * 1.0000001 + 1e-9;
}

}  // namespace

TEST_CASE("the foreign-load meter counts another process's CPU, not this one's", "[unit]") {
  // This process spinning: its own CPU time is subtracted.
  const ForeignLoadMeter self;
  spin_for(std::chrono::milliseconds(400));
  const auto own = self.busy_cpus();
  REQUIRE(own);
  CHECK(*own >= 0.0);

  // A child spinning while this process sleeps: that is foreign load (at least part of a CPU even
  // on a machine shared with other tests).
  const ForeignLoadMeter other;
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    spin_for(std::chrono::milliseconds(400));
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const auto foreign = other.busy_cpus();
  REQUIRE(foreign);
  INFO("own spin read " << *own << " CPUs, a child's " << *foreign);
  CHECK(*foreign >= 0.4);
  CHECK(*foreign > *own - 0.5);
}
