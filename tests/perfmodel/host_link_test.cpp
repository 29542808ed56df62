// The host link fit (perfmodel/host_link.h): a line through a GPU profile's host_link points.
#include <catch2/catch.hpp>

#include "perfmodel/host_link.h"

using namespace kiln::perf;

namespace {

Measurement link_point(double bytes, double ms) {
  Measurement m;
  m.kind = kKindHostLink;
  m.key = "host_link " + std::to_string(bytes);
  m.bytes = bytes;
  m.median_ms = ms;
  return m;
}

}  // namespace

TEST_CASE("the host link: a line fixed + bytes / rate through the host_link points, other kinds ignored", "[perfmodel][host_link]") {
  CHECK_FALSE(host_link_fit({}).has_value());
  Measurement kernel = link_point(1e6, 1.0);
  kernel.kind = kKindKernel;
  CHECK_FALSE(host_link_fit({kernel}).has_value());

  // Exactly on 0.05 ms + 25 GB/s (25e6 bytes per ms).
  const auto on_line = [](double bytes) { return link_point(bytes, 0.05 + bytes / 25e6); };
  const auto fit = host_link_fit({on_line(0.6e6), on_line(4.8e6), on_line(38.5e6), kernel});
  REQUIRE(fit.has_value());
  CHECK(fit->points == 3);
  CHECK(fit->fixed_ms == Approx(0.05));
  CHECK(fit->bytes_per_ms == Approx(25e6));
  CHECK(host_link_ms(*fit, 10e6) == Approx(0.05 + 0.4));
  CHECK(host_link_describe(*fit) == "measured: 0.05 ms + 25.0 GB/s (3 points)");

  // One point, or a line that would pay time back at zero bytes: through the origin instead.
  const auto one = host_link_fit({link_point(10e6, 0.5)});
  REQUIRE(one.has_value());
  CHECK(one->fixed_ms == 0);
  CHECK(one->bytes_per_ms == Approx(20e6));
  const auto steep = host_link_fit({link_point(1e6, 0.01), link_point(10e6, 1.0)});
  REQUIRE(steep.has_value());
  CHECK(steep->fixed_ms == 0);
  CHECK(host_link_ms(*steep, 10e6) == Approx(1.0).epsilon(0.02));
}
