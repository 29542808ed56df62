// Unit tests: filled in by the owner of this group.
#include <catch2/catch.hpp>
