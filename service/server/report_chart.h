// The report's chart as inline SVG: one row per configuration with its predicted and measured
// latency as two bars on a shared millisecond axis, a note beside each row (throughput, accuracy)
// and the chosen row marked. Colours are presentation attributes, so the chart reads the same
// without the stylesheet; role="img" with a title and description, and the same figures are in
// a table next to it for screen readers.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln::server {

struct ChartRow {
  std::string label;
  std::optional<double> predicted_ms;
  std::optional<double> measured_ms;
  std::string note;  // e.g. "1234/s · drop 0.10 pt"
  bool chosen = false;
};

// `title` and `description` label the image; all text is escaped here.
std::string report_chart_svg(const std::vector<ChartRow>& rows, const std::string& title, const std::string& description);

}  // namespace kiln::server
