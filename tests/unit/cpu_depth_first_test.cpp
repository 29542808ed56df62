// kiln's own depth-first kernel (kernels/cpu/depth_first_conv.cpp) against the reference
// DepthFirstConv, on every ISA path this CPU has (AVX-512, AVX2, portable; KILN_CPU_ISA caps the
// choice): depthwise 3x3/5x5 with stride 1 and 2 and each vector-friendly activation, the
// squeeze-excite scale with and without a depthwise stage, residuals in NHWC and plain layouts,
// awkward channel counts (13, 37: vector tails), batches 2 and 3, an expansion in front (tall
// images, so a band takes many tiles of rows), and no projection after the depthwise stage. The reference DepthFirstConv itself
// is checked against the unfused Conv/Mul/Conv graph in passes_fuse_test.cpp.
#include <catch2/catch.hpp>


#include "kernels/cpu/isa.h"
#include "kernels/post_ops.h"
#include "tests/support/isa_cap.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct Case {
  const char* what;
  int64_t n, c, h, w, m;
  int64_t k = 3, stride = 1, pad = 1;
  bool dw = true, scale = false;
  const char* dw_act = "clip";
  const char* act = "none";
  int residual = 0;  // 0: none, 1: from a oneDNN conv (NHWC), 2: a plain graph input
  int64_t expand_from = 0;  // > 0: an expansion from this many channels to c in front
  const char* ex_act = "clip";
  bool project = true;      // false: Y is the depthwise stage's result (m must equal c)
};

// X comes from a 1x1 oneDNN conv, so it is in oneDNN's NHWC layout as in a real model; a case
// with `plain_x` reads a graph input (plain NCHW) directly.
void run_case(const Case& t, bool plain_x, CpuIsa isa) {
  Builder b;
  const int64_t cx = t.expand_from > 0 ? t.expand_from : t.c;
  const int x0 = b.input({t.n, cx, t.h, t.w});
  int x = x0;
  if (!plain_x) x = b.op(OpKind::Conv, {}, {x0, b.weight({cx, cx, 1, 1}, 0.3f), b.weight({cx})});
  std::vector<int> in(9, -1);
  in[0] = x;
  Attrs a;
  if (t.expand_from > 0) {
    in[7] = b.weight({t.c, cx, 1, 1}, 0.3f);
    in[8] = b.weight({t.c});
    a.set("ex_activation", std::string(t.ex_act));
    a.set("ex_activation_alpha", 0.0f);
    a.set("ex_activation_beta", 6.0f);
  }
  int64_t oh = t.h, ow = t.w;
  if (t.dw) {
    in[1] = b.weight({t.c, 1, t.k, t.k}, 0.5f);
    in[2] = b.weight({t.c});
    a.set("dw_strides", std::vector<int64_t>{t.stride, t.stride});
    a.set("dw_pads", std::vector<int64_t>{t.pad, t.pad, t.pad, t.pad});
    a.set("dw_activation", std::string(t.dw_act));
    a.set("dw_activation_alpha", 0.0f);
    a.set("dw_activation_beta", 6.0f);
    oh = (t.h + 2 * t.pad - t.k) / t.stride + 1;
    ow = (t.w + 2 * t.pad - t.k) / t.stride + 1;
  }
  if (t.scale) in[3] = b.input({t.n, t.c, 1, 1}, 0.0f, 1.0f);
  if (t.project) {
    in[4] = b.weight({t.m, t.c, 1, 1}, 0.3f);
    in[5] = b.weight({t.m});
  }
  if (t.residual == 1) {
    const int r0 = b.input({t.n, t.m, oh, ow});
    in[6] = b.op(OpKind::Conv, {}, {r0, b.weight({t.m, t.m, 1, 1}, 0.3f)});
  } else if (t.residual == 2) {
    in[6] = b.input({t.n, t.m, oh, ow});
  }
  while (in.size() > 5 && in.back() < 0) in.pop_back();
  if (t.project) a.set("activation", std::string(t.act));
  a.set("activation_alpha", 0.0f);
  a.set("activation_beta", 6.0f);
  b.output(b.op(OpKind::DepthFirstConv, a, in));
  const IsaCap cap(isa);
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.depth_first_conv." + std::string(cpu_isa_name(isa))) == 1);
}

const Case kCases[] = {
    {"dw 3x3 s1, relu6, 13 -> 37 channels", 1, 13, 9, 11, 37},
    {"dw 3x3 s2, relu6, residual from a conv", 1, 24, 10, 9, 24, 3, 2, 1, true, false, "clip", "none", 1},
    {"dw 5x5 s1 pad 2, relu, 40 -> 20, batch 2", 2, 40, 12, 13, 20, 5, 1, 2, true, false, "relu"},
    {"dw 5x5 s2, silu (scalar tail), scale", 1, 19, 11, 11, 33, 5, 2, 2, true, true, "silu"},
    {"dw 3x3 s1, no activation, scale, relu epilogue, plain residual", 2, 17, 7, 7, 9, 3, 1, 1, true, true, "none", "relu", 2},
    {"scale only (squeeze-excite), 48 -> 70, batch 2", 2, 48, 6, 5, 70, 1, 1, 0, false, true},
    {"scale only, 7 -> 3, sigmoid epilogue", 1, 7, 14, 3, 3, 1, 1, 0, false, true, "none", "sigmoid"},
    {"dw 3x3 s1 on a 1-pixel-wide image, 300 -> 20 channels (k blocks)", 1, 300, 5, 1, 20},
    // With an expansion in front: bands of rows sliding down the image.
    {"expand 8 -> 24, dw 3x3 s1, project -> 8, plain residual", 1, 24, 23, 19, 8, 3, 1, 1, true, false, "clip",
     "none", 2, 8},
    {"expand 5 -> 37, dw 3x3 s2, project -> 16, batch 3", 3, 37, 29, 30, 16, 3, 2, 1, true, false, "clip", "none", 0,
     5},
    {"expand 16 -> 48, silu, dw 5x5 s2 pad 2, silu, no projection", 2, 48, 21, 17, 48, 5, 2, 2, true, false, "silu",
     "none", 0, 16, "silu", false},
    {"expand 6 -> 20, dw 5x5 s1, scale, project -> 11, relu", 1, 20, 40, 9, 11, 5, 1, 2, true, true, "relu", "relu",
     0, 6, "relu"},
    {"no projection: dw 3x3 s1 alone, 21 channels", 2, 21, 8, 8, 21, 3, 1, 1, true, false, "clip", "none", 0, 0,
     "clip", false},
};

}  // namespace

TEST_CASE("the depth-first kernel matches the reference on every ISA path", "[cpu][depth_first]") {
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::portable}) {
    if (!cpu_isa_available(isa)) {
      WARN("this CPU has no " << cpu_isa_name(isa) << ": path not tested here");
      continue;
    }
    for (const Case& t : kCases)
      for (bool plain_x : {false, true}) {
        INFO(cpu_isa_name(isa) << ": " << t.what << (plain_x ? ", X plain NCHW" : ", X from a oneDNN conv"));
        run_case(t, plain_x, isa);
      }
  }
}

TEST_CASE("KILN_CPU_ISA caps the ISA and the portable path is always there", "[cpu]") {
  REQUIRE(cpu_isa_available(CpuIsa::portable));
  const IsaCap cap(CpuIsa::portable);
  REQUIRE_FALSE(cpu_isa_available(CpuIsa::avx2));
  REQUIRE_FALSE(cpu_isa_available(CpuIsa::avx512));
}
