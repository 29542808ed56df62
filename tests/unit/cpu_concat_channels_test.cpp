// kiln's channel Concat (kernels/cpu/concat_channels.cpp) against the reference: plain inputs,
// oneDNN's channel-blocked conv outputs (the fire modules' form), batches and large images split
// into pieces; mixed layouts and other axes stay with oneDNN's concat.
#include <catch2/catch.hpp>

#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

Attrs axis(int64_t a) { return attrs({{"axis", a}}); }

int conv3x3(Builder& b, int x, int64_t c) {
  const int64_t cin = b.concrete(x)[1];
  return b.op(OpKind::Conv, attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}), {x, b.weight({c, cin, 3, 3}, 0.5f), b.weight({c})});
}

}  // namespace

TEST_CASE("cpu.concat_channels joins plain inputs image by image", "[cpu]") {
  Builder b;
  b.output(b.op(OpKind::Concat, axis(1), {b.input({2, 3, 5, 7}), b.input({2, 5, 5, 7}), b.input({2, 1, 5, 7})}));
  b.output(b.op(OpKind::Concat, axis(-3), {b.input({1, 40, 30, 30}), b.input({1, 24, 30, 30})}));  // pieces of 16K floats
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.concat_channels") == 2);
}

TEST_CASE("cpu.concat_channels joins oneDNN's channel-blocked conv outputs in their layout", "[cpu]") {
  Builder b;
  const int x = b.input({3, 8, 11, 13});
  const int c = b.op(OpKind::Concat, axis(1), {conv3x3(b, x, 16), conv3x3(b, x, 32)});
  b.output(conv3x3(b, c, 8));  // read in the concat's layout by the next conv
  auto engine = check(b);
  std::string conv_layout;
  for (const EngineStep& st : engine->steps())
    if (st.op == "Conv" && conv_layout.empty()) conv_layout = st.output_layout;
  const bool blocked = conv_layout.find("aBcd8b") != std::string::npos || conv_layout.find("aBcd16b") != std::string::npos;
  if (!blocked) WARN("oneDNN's convs wrote " << conv_layout << " here, not channel blocks: the blocked path is not tested");
  REQUIRE(count_kernel(*engine, "cpu.concat_channels") == (blocked ? 1 : 0));
  if (blocked)
    for (const EngineStep& st : engine->steps())
      if (st.kernel == "cpu.concat_channels") CHECK(st.output_layout == conv_layout.substr(0, conv_layout.find(':', 7)));
}

TEST_CASE("cpu.concat_channels leaves other axes and mixed layouts to oneDNN", "[cpu]") {
  Builder b;
  b.output(b.op(OpKind::Concat, axis(2), {b.input({2, 3, 5, 7}), b.input({2, 3, 4, 7})}));
  const int x = b.input({1, 8, 6, 6});
  b.output(b.op(OpKind::Concat, axis(1), {conv3x3(b, x, 16), b.input({1, 16, 6, 6})}));
  b.output(b.op(OpKind::Concat, axis(1), {b.input({2, 6}), b.input({2, 3})}));
  auto engine = check(b);
  CHECK(count_kernel(*engine, "cpu.concat_channels") == 0);
}
