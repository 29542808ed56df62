#include "perfmodel/host_link.h"

#include <cstdio>

namespace kiln::perf {

std::optional<HostLinkFit> host_link_fit(const std::vector<Measurement>& measurements) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Measurement& m : measurements) {
    if (m.kind != kKindHostLink || !(m.bytes > 0) || !(m.median_ms >= 0)) continue;
    n += 1, sx += m.bytes, sy += m.median_ms, sxx += m.bytes * m.bytes, sxy += m.bytes * m.median_ms;
  }
  if (n == 0) return std::nullopt;
  HostLinkFit fit;
  fit.points = static_cast<int>(n);
  // Least squares; where it would give a negative fixed cost (or a single point), a line through
  // the origin: a copy never pays back time.
  const double var = n * sxx - sx * sx;
  const double slope = var > 0 ? (n * sxy - sx * sy) / var : 0;
  const double intercept = (sy - slope * sx) / n;
  if (n >= 2 && slope > 0 && intercept >= 0) {
    fit.fixed_ms = intercept;
    fit.bytes_per_ms = 1 / slope;
  } else {
    const double through_origin = sxy / sxx;
    fit.bytes_per_ms = through_origin > 0 ? 1 / through_origin : 0;
  }
  if (!(fit.bytes_per_ms > 0)) return std::nullopt;
  return fit;
}

double host_link_ms(const HostLinkFit& fit, double io_bytes) { return fit.fixed_ms + io_bytes / fit.bytes_per_ms; }

std::string host_link_describe(const HostLinkFit& fit) {
  char text[96];
  std::snprintf(text, sizeof text, "measured: %.3g ms + %.1f GB/s (%d point%s)", fit.fixed_ms, fit.bytes_per_ms / 1e6, fit.points,
                fit.points == 1 ? "" : "s");
  return text;
}

}  // namespace kiln::perf
