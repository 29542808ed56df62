// --keep-faster's rule for a point measured twice (perfmodel/bench_target.h, reading_choice): two
// readings that agree within kReadingsAgreeRatio are noise and their mean is stored; a larger gap
// is a slow spell and the faster reading stays; a reading taken under load counts only against another.
#include <catch2/catch.hpp>

#include "perfmodel/bench_target.h"

using namespace kiln::perf;

TEST_CASE("reading choice: the mean of readings within 15%, the faster beyond", "[perfmodel][unit]") {
  CHECK(reading_choice(1.00, false, 1.00, false) == ReadingChoice::mean);
  CHECK(reading_choice(1.00, false, 1.14, false) == ReadingChoice::mean);
  CHECK(reading_choice(1.14, false, 1.00, false) == ReadingChoice::mean);
  CHECK(reading_choice(1.00, false, 1.16, false) == ReadingChoice::stored);  // the new reading ran in a slow spell
  CHECK(reading_choice(1.16, false, 1.00, false) == ReadingChoice::fresh);   // the stored one did
  CHECK(reading_choice(1.00, false, 3.00, false) == ReadingChoice::stored);
  CHECK(reading_choice(3.00, false, 1.00, false) == ReadingChoice::fresh);
}

TEST_CASE("reading choice: a stored reading taken under load, or none, gives way to the new one", "[perfmodel][unit]") {
  CHECK(reading_choice(1.00, true, 1.05, false) == ReadingChoice::fresh);
  CHECK(reading_choice(1.00, true, 2.00, false) == ReadingChoice::fresh);
  CHECK(reading_choice(0.00, false, 1.00, false) == ReadingChoice::fresh);
  CHECK(reading_choice(1.00, true, 1.05, true) == ReadingChoice::fresh);
}

TEST_CASE("reading choice: a new reading taken under load leaves a quiet stored one as it is", "[perfmodel][unit]") {
  CHECK(reading_choice(1.00, false, 1.05, true) == ReadingChoice::stored);  // a mean would carry the load flag
  CHECK(reading_choice(1.00, false, 0.50, true) == ReadingChoice::stored);
}
