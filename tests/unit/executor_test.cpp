// Unit tests for the reference executor.
#include <catch2/catch.hpp>
