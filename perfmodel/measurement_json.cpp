#include "perfmodel/measurement_json.h"

namespace kiln::perf {

nlohmann::json measurement_to_json(const Measurement& m) {
  nlohmann::json j = nlohmann::json::object();
#define KILN_FIELD(f) j[#f] = m.f;
  KILN_MEASUREMENT_FIELDS(KILN_FIELD)
#undef KILN_FIELD
  return j;
}

Result<Measurement> measurement_from_json(const nlohmann::json& j, const std::string& where) {
  KILN_REQUIRE(j.is_object(), parse, where, ": expected an object");
  Measurement m;
#define KILN_FIELD(f) KILN_TRY(json_read_field(j, #f, m.f, where));
  KILN_MEASUREMENT_FIELDS(KILN_FIELD)
#undef KILN_FIELD
  KILN_REQUIRE(m.kind == kKindPeak || m.kind == kKindBandwidth || m.kind == kKindKernel || m.kind == kKindWeightReuse ||
                   m.kind == kKindModel || m.kind == kKindHostLink,
               parse, where, ".kind: '", m.kind, "' is not one of peak, bandwidth, kernel, weight_reuse, model, host_link");
  KILN_REQUIRE(!m.key.empty(), parse, where, ".key: empty");
  KILN_REQUIRE(m.threads > 0 && m.runs >= 0 && m.median_ms >= 0, parse, where, ": threads, runs or median_ms out of range");
  return m;
}

}  // namespace kiln::perf
