// A Measurement as a JSON object with one key per field (KILN_MEASUREMENT_FIELDS), and the
// checked reading of such objects: shared by target profiles and the planner's cost cache.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "kernels/core/status.h"
#include "perfmodel/measurement.h"

namespace kiln::perf {

nlohmann::json measurement_to_json(const Measurement& m);

// Every field present and of its type, kind one of peak/bandwidth/kernel, key not empty, counts in
// range; `where` names the object in errors ("targets[0].measurements[3]").
Result<Measurement> measurement_from_json(const nlohmann::json& j, const std::string& where);

// Reads field `name` of `j` into `v` (string, integer in range, or number).
template <typename T>
Status json_read_field(const nlohmann::json& j, const char* name, T& v, const std::string& where) {
  const auto it = j.find(name);
  KILN_REQUIRE(it != j.end(), parse, where, ": missing field '", name, "'");
  if constexpr (std::is_same_v<T, std::string>) {
    KILN_REQUIRE(it->is_string(), parse, where, ".", name, ": expected a string");
    v = it->template get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    KILN_REQUIRE(it->is_boolean(), parse, where, ".", name, ": expected true or false");
    v = it->template get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    KILN_REQUIRE(it->is_number_integer() && !(it->is_number_unsigned() && it->template get<uint64_t>() > INT64_MAX), parse,
                 where, ".", name, ": expected an integer");
    const int64_t x = it->template get<int64_t>();
    KILN_REQUIRE(std::in_range<T>(x), parse, where, ".", name, ": ", x, " is out of range");
    v = static_cast<T>(x);
  } else {
    KILN_REQUIRE(it->is_number(), parse, where, ".", name, ": expected a number");
    v = it->template get<T>();
  }
  return Status::ok();
}

}  // namespace kiln::perf
