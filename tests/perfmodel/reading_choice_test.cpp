// --keep-faster's rule for a point measured twice (perfmodel/bench_target.h, reading_choice): two
// readings that agree within kReadingsAgreeRatio are noise and their mean is stored; a larger gap
// is a slow spell and the faster reading stays; a stored reading taken under load never counts.
#include <catch2/catch.hpp>

#include "perfmodel/bench_target.h"

using namespace kiln::perf;

TEST_CASE("reading choice: the mean of readings within 15%, the faster beyond", "[perfmodel][unit]") {
  CHECK(reading_choice(1.00, false, 1.00) == ReadingChoice::mean);
  CHECK(reading_choice(1.00, false, 1.14) == ReadingChoice::mean);
  CHECK(reading_choice(1.14, false, 1.00) == ReadingChoice::mean);
  CHECK(reading_choice(1.00, false, 1.16) == ReadingChoice::stored);  // the new reading ran in a slow spell
  CHECK(reading_choice(1.16, false, 1.00) == ReadingChoice::fresh);   // the stored one did
  CHECK(reading_choice(1.00, false, 3.00) == ReadingChoice::stored);
  CHECK(reading_choice(3.00, false, 1.00) == ReadingChoice::fresh);
}

TEST_CASE("reading choice: a stored reading taken under load, or none, gives way to the new one", "[perfmodel][unit]") {
  CHECK(reading_choice(1.00, true, 1.05) == ReadingChoice::fresh);
  CHECK(reading_choice(1.00, true, 2.00) == ReadingChoice::fresh);
  CHECK(reading_choice(0.00, false, 1.00) == ReadingChoice::fresh);
}
