#include "service/server/report_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "service/server/html_text.h"

namespace kiln::server {
namespace {

// Layout, in SVG user units.
constexpr int kWidth = 820;
constexpr int kLabelWidth = 190;    // row labels, left of the bars
constexpr int kNoteWidth = 230;     // notes, right of the bars (value labels first)
constexpr int kTop = 48;            // legend above
constexpr int kRowHeight = 46;
constexpr int kBarHeight = 14;
constexpr int kAxisHeight = 28;
constexpr const char* kPredictedFill = "#9bb7d4";
constexpr const char* kMeasuredFill = "#1f5f99";
constexpr const char* kChosenFill = "#fff4cc";

// A round axis end at or above `max`: 1, 2 or 5 times a power of ten.
double axis_end(double max) {
  if (!(max > 0)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(max)));
  for (double step : {1.0, 2.0, 5.0, 10.0})
    if (step * power >= max) return step * power;
  return 10 * power;
}

// An axis label: 0, 0.5, 2, 250 (no trailing zeros).
std::string tick_text(double value) {
  std::string s = number_text(value);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

std::string report_chart_svg(const std::vector<ChartRow>& rows, const std::string& title, const std::string& description) {
  double max_ms = 0;
  for (const ChartRow& r : rows) {
    if (r.predicted_ms && std::isfinite(*r.predicted_ms)) max_ms = std::max(max_ms, *r.predicted_ms);
    if (r.measured_ms && std::isfinite(*r.measured_ms)) max_ms = std::max(max_ms, *r.measured_ms);
  }
  const double end = axis_end(max_ms);
  const int plot_left = kLabelWidth;
  const int plot_width = kWidth - kLabelWidth - kNoteWidth;
  const int height = kTop + static_cast<int>(rows.size()) * kRowHeight + kAxisHeight;
  auto x_of = [&](double ms) { return plot_left + std::clamp(ms / end, 0.0, 1.0) * plot_width; };

  std::ostringstream s;
  s << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << kWidth << ' ' << height
    << "\" role=\"img\" aria-labelledby=\"chart-title chart-desc\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<title id=\"chart-title\">" << html_escape(title) << "</title>\n"
    << "<desc id=\"chart-desc\">" << html_escape(description) << "</desc>\n";
  // Legend.
  s << "<rect x=\"" << plot_left << "\" y=\"10\" width=\"14\" height=\"" << kBarHeight << "\" fill=\"" << kPredictedFill
    << "\"/><text x=\"" << plot_left + 20 << "\" y=\"21\">predicted</text>\n"
    << "<rect x=\"" << plot_left + 110 << "\" y=\"10\" width=\"14\" height=\"" << kBarHeight << "\" fill=\"" << kMeasuredFill
    << "\"/><text x=\"" << plot_left + 130 << "\" y=\"21\">measured</text>\n"
    << "<text x=\"" << plot_left + 220 << "\" y=\"21\">★ chosen</text>\n";
  // Grid lines and the axis labels, at fifths of the axis.
  const int axis_y = kTop + static_cast<int>(rows.size()) * kRowHeight;
  for (int i = 0; i <= 5; ++i) {
    const double x = plot_left + plot_width * i / 5.0;
    s << "<line x1=\"" << x << "\" y1=\"" << kTop - 4 << "\" x2=\"" << x << "\" y2=\"" << axis_y << "\" stroke=\"#ccc\"/>"
      << "<text x=\"" << x << "\" y=\"" << axis_y + 16 << "\" text-anchor=\"middle\">" << tick_text(end * i / 5.0)
      << (i == 5 ? " ms" : "") << "</text>\n";
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const ChartRow& r = rows[i];
    const int y = kTop + static_cast<int>(i) * kRowHeight;
    if (r.chosen)
      s << "<rect x=\"0\" y=\"" << y << "\" width=\"" << kWidth << "\" height=\"" << kRowHeight << "\" fill=\""
        << kChosenFill << "\"/>\n";
    s << "<text x=\"" << kLabelWidth - 8 << "\" y=\"" << y + 27 << "\" text-anchor=\"end\""
      << (r.chosen ? " font-weight=\"bold\"" : "") << ">" << (r.chosen ? "★ " : "") << html_escape(text_shorten(r.label, 26))
      << "</text>\n";
    auto bar = [&](const std::optional<double>& ms, int bar_y, const char* fill, const char* what) {
      if (!ms || !std::isfinite(*ms)) {
        s << "<text x=\"" << plot_left + 4 << "\" y=\"" << bar_y + 11 << "\" fill=\"#666\">" << what << ": none</text>\n";
        return;
      }
      const double x_end = x_of(*ms);
      s << "<rect x=\"" << plot_left << "\" y=\"" << bar_y << "\" width=\"" << std::max(1.0, x_end - plot_left) << "\" height=\""
        << kBarHeight << "\" fill=\"" << fill << "\"><title>" << what << " " << number_text(*ms) << " ms</title></rect>"
        << "<text x=\"" << x_end + 4 << "\" y=\"" << bar_y + 11 << "\">" << number_text(*ms) << " ms</text>\n";
    };
    bar(r.predicted_ms, y + 6, kPredictedFill, "predicted");
    bar(r.measured_ms, y + 6 + kBarHeight + 2, kMeasuredFill, "measured");
    s << "<text x=\"" << kWidth - kNoteWidth + 50 << "\" y=\"" << y + 27 << "\">" << html_escape(text_shorten(r.note, 28))
      << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace kiln::server
