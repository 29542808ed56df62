// Unit tests for kernels/core.
#include <catch2/catch.hpp>
