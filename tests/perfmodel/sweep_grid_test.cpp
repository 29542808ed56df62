// The sweep grid: deterministic, within the designed ranges, unique keys, every op present, and
// the quick grid small; features (MACs, bytes) computed from the shape.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "perfmodel/measurement.h"
#include "perfmodel/microbench/sweep_grid.h"

using namespace kiln::perf;

TEST_CASE("the full grid is deterministic, covers every op and stays in the designed ranges", "[perfmodel][grid]") {
  const std::vector<SweepShape> a = sweep_grid(false), b = sweep_grid(false);
  REQUIRE(a.size() == b.size());
  std::set<std::string> keys;
  std::map<SweepOp, int> per_op;
  std::set<int64_t> kernels, strides, batches;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(sweep_key(a[i]) == sweep_key(b[i]));
    keys.insert(sweep_key(a[i]));
    ++per_op[a[i].op];
    if (a[i].op == SweepOp::conv) {
      kernels.insert(a[i].kernel);
      strides.insert(a[i].stride);
      batches.insert(a[i].batch);
      const bool stem = a[i].in_c == 3;  // the stems at the end: 3 channels at 224x224
      CHECK(a[i].in_c >= (stem ? 3 : 16));
      CHECK(a[i].out_c <= 2048);
      CHECK(a[i].h >= 7);
      CHECK(a[i].h <= (stem ? 224 : 112));
      CHECK(sweep_macs(a[i]) <= 1.2e9);
    }
  }
  CHECK(keys.size() == a.size());
  for (SweepOp op : {SweepOp::conv, SweepOp::depthwise_conv, SweepOp::gemm, SweepOp::maxpool, SweepOp::avgpool,
                     SweepOp::global_avgpool, SweepOp::add, SweepOp::concat, SweepOp::eltwise, SweepOp::depth_first,
                     SweepOp::concat_affine})
    CHECK(per_op[op] > 0);
  CHECK(kernels == std::set<int64_t>{1, 3, 5, 7});
  CHECK(strides == std::set<int64_t>{1, 2});
  CHECK(batches == std::set<int64_t>{1, 8, 32});
  // Inverted-residual layers off the power-of-two channels: 1x1 expansions and projections x6 with
  // channels off oneDNN's 16-lane blocks, and depthwise convs on the expanded channels.
  const auto thin_conv = [&](bool expand) {
    return std::count_if(a.begin(), a.end(), [&](const SweepShape& s) {
      return s.op == SweepOp::conv && (s.in_c % 16 || s.out_c % 16) && (expand ? s.out_c == 6 * s.in_c : s.in_c == 6 * s.out_c);
    });
  };
  CHECK(thin_conv(true) > 0);
  CHECK(thin_conv(false) > 0);
  CHECK(std::count_if(a.begin(), a.end(), [](const SweepShape& s) {
          return s.op == SweepOp::depthwise_conv && (s.in_c & (s.in_c - 1)) != 0;  // not a power of two
        }) > 0);
  CHECK(sweep_grid(true).size() < 12);
}

TEST_CASE("the full grid ends with real layers of models outside the evaluation set, the stems, then max pools", "[perfmodel][grid]") {
  struct Layer {
    SweepOp op;
    int64_t in_c, out_c, hw, kernel, stride;
  };
  const Layer zoo[] = {
#include "perfmodel/microbench/zoo_layers.inc"
  };
  std::set<std::string> zoo_keys;
  for (int64_t batch : {1, 8, 32})
    for (const Layer& l : zoo)
      zoo_keys.insert(sweep_key(SweepShape{l.op, batch, l.in_c, l.out_c, l.hw, l.hw, l.kernel, l.stride, l.kernel / 2}));
  struct GemmLayer {
    int64_t tokens, k, n;
  };
  const GemmLayer gemm_zoo[] = {
#include "perfmodel/microbench/zoo_gemm_layers.inc"
  };
  std::set<std::string> gemm_zoo_keys;
  for (int64_t batch : {1, 8, 32})
    for (const GemmLayer& l : gemm_zoo) {
      SweepShape s{SweepOp::gemm, batch * l.tokens};
      s.m = batch * l.tokens, s.k = l.k, s.n = l.n;
      gemm_zoo_keys.insert(sweep_key(s));
    }
  struct PoolLayer {
    int64_t channels, hw, kernel, stride, pad;
  };
  const PoolLayer pool_zoo[] = {
#include "perfmodel/microbench/zoo_pool_layers.inc"
  };
  std::set<std::string> pool_zoo_keys;
  for (int64_t batch : {1, 8, 32})
    for (const PoolLayer& l : pool_zoo)
      pool_zoo_keys.insert(sweep_key(SweepShape{SweepOp::maxpool, batch, l.channels, l.channels, l.hw, l.hw, l.kernel, l.stride, l.pad}));
  std::vector<SweepShape> grid = sweep_grid(false);
  // Last more max pools: other models' own at every batch, and before them none of those; then the grid's,
  // three per channel count, none measured twice.
  std::map<int64_t, int> extra_pools;
  size_t zoo_pools = 0;
  std::set<std::string> pool_keys;
  while (!grid.empty() && grid.back().op == SweepOp::maxpool) {
    INFO(sweep_key(grid.back()));
    CHECK(pool_keys.insert(sweep_key(grid.back())).second);
    if (pool_zoo_keys.count(sweep_key(grid.back()))) {
      ++zoo_pools;
    } else {
      CHECK(zoo_pools == 0);
      ++extra_pools[grid.back().in_c];
    }
    grid.pop_back();
  }
  CHECK(zoo_pools == 3 * std::size(pool_zoo));
  CHECK(extra_pools.size() == 8);
  for (const auto& [channels, n] : extra_pools) CHECK(n == 3);
  for (const SweepShape& s : grid)
    if (s.op == SweepOp::maxpool) CHECK(pool_keys.count(sweep_key(s)) == 0);
  // Before them the stems: 3 channels at 224x224, stride 2, 3x3 to 16..64 channels and ResNet's 7x7, at every batch.
  size_t stems = 0;
  std::set<int64_t> stem_batches, stem_widths;
  while (!grid.empty() && grid.back().op == SweepOp::conv && grid.back().in_c == 3) {
    INFO(sweep_key(grid.back()));
    CHECK(grid.back().h == 224);
    CHECK(grid.back().stride == 2);
    CHECK((grid.back().kernel == 3 || grid.back().kernel == 7));
    CHECK(sweep_record_op(grid.back()) == kStemConvOp);
    stem_batches.insert(grid.back().batch);
    if (grid.back().kernel == 3) stem_widths.insert(grid.back().out_c);
    grid.pop_back();
    ++stems;
  }
  CHECK(stems >= 15);
  CHECK(stem_batches == std::set<int64_t>{1, 8, 32});
  CHECK(stem_widths == std::set<int64_t>{16, 24, 32, 48, 64});
  // Before them the LayerNorms (added after the rest), at every batch; their channels are real widths.
  size_t norms = 0;
  std::set<int64_t> norm_batches;
  while (!grid.empty() && grid.back().op == SweepOp::layernorm) {
    INFO(sweep_key(grid.back()));
    CHECK(grid.back().batch * grid.back().in_c * grid.back().h * grid.back().w <= 20000000);
    CHECK(sweep_macs(grid.back()) == static_cast<double>(grid.back().batch * grid.back().in_c * grid.back().h * grid.back().w));
    norm_batches.insert(grid.back().batch);
    grid.pop_back();
    ++norms;
  }
  CHECK(norms == 30);
  CHECK(norm_batches == std::set<int64_t>{1, 8, 32});
  // Before them the fully connected layers (classifiers, transformer MLPs), by rows: one row and many.
  size_t gemm_tail = 0;
  std::set<int64_t> rows;
  for (auto it = grid.rbegin(); it != grid.rend() && it->op == SweepOp::gemm; ++it, ++gemm_tail) {
    INFO(sweep_key(*it));
    CHECK(gemm_zoo_keys.count(sweep_key(*it)) == 1);
    rows.insert(it->m);
  }
  CHECK(gemm_tail == 48);
  CHECK(rows.count(1) == 1);
  CHECK(*rows.rbegin() >= 1024);
  // Before them the convolutions.
  REQUIRE(grid.size() > 120 + gemm_tail);
  std::set<std::string> kinds;
  for (size_t i = grid.size() - gemm_tail - 120; i < grid.size() - gemm_tail; ++i) {
    INFO(sweep_key(grid[i]));
    CHECK(zoo_keys.count(sweep_key(grid[i])) == 1);
    kinds.insert(sweep_op_name(grid[i].op) + " k" + std::to_string(grid[i].kernel));
  }
  // Stratified: 1x1, 3x3 and 5x5 convolutions and depthwise convolutions all appear.
  for (const char* kind : {"conv k1", "conv k3", "depthwise_conv k3", "depthwise_conv k5"}) CHECK(kinds.count(kind) == 1);
}

TEST_CASE("a device's large-work grid: batch-64 convs and fully connected layers beyond a core's cap, none in the grid",
          "[perfmodel][grid]") {
  const std::vector<SweepShape> a = sweep_device_large_grid(), b = sweep_device_large_grid();
  REQUIRE(a.size() == b.size());
  std::set<std::string> keys, grid_keys;
  for (const SweepShape& s : sweep_grid(false)) grid_keys.insert(sweep_key(s));
  std::set<int64_t> kernels;
  int convs = 0, gemms = 0;
  double largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const SweepShape& s = a[i];
    INFO(sweep_key(s));
    CHECK(sweep_key(s) == sweep_key(b[i]));  // deterministic
    CHECK(keys.insert(sweep_key(s)).second);
    CHECK(grid_keys.count(sweep_key(s)) == 0);
    CHECK(sweep_macs(s) > 2.4e9);  // past what a batch-64 copy of a capped batch-32 point reaches
    CHECK(sweep_macs(s) <= 3e10);
    largest = std::max(largest, sweep_macs(s));
    if (s.op == SweepOp::gemm) {
      ++gemms;
      CHECK(s.m % 64 == 0);
    } else {
      CHECK(s.op == SweepOp::conv);
      CHECK(s.batch == 64);
      kernels.insert(s.kernel);
      ++convs;
    }
  }
  CHECK(convs >= 48);
  CHECK(gemms > 0);
  CHECK(kernels.count(1) == 1);
  CHECK(kernels.count(3) == 1);
  CHECK(largest > 1e10);
}

TEST_CASE("the border grid: convs and depthwise convs reading plain float32 (stems among them) or float32 in their format, "
          "or with SiLU, and gemms reading float32, keyed apart",
          "[perfmodel][grid]") {
  const std::vector<SweepShape> border = sweep_border_grid(false);
  std::set<std::string> interior_keys;
  for (const SweepShape& s : sweep_grid(false)) interior_keys.insert(sweep_key(s));
  std::set<SweepOp> ops;
  bool stem = false;
  int float_inputs = 0, silus = 0, residuals = 0, signed_inputs = 0, float_gemms = 0;
  std::set<int64_t> gemm_rows;
  for (const SweepShape& s : border) {
    CHECK(int{s.plain_input} + int{s.float_input} + int{s.silu} + int{s.residual} + int{s.signed_input} == 1);
    CHECK(sweep_key(s).rfind(s.plain_input ? "plain " : s.float_input ? "f32in " : s.silu ? "silu " : s.residual ? "sum " : "s8in ", 0) == 0);
    silus += s.silu;
    if (s.signed_input) {
      ++signed_inputs;
      CHECK(sweep_record_op(s) == sweep_op_name(s.op) + kFromSignedSuffix);
    }
    if (s.residual) {
      ++residuals;
      CHECK(s.op == SweepOp::conv);
      CHECK(sweep_record_op(s) == std::string("conv") + kResidualSuffix);
    }
    CHECK(interior_keys.count(sweep_key(s)) == 0);
    if (s.float_input && s.op == SweepOp::gemm) {
      ++float_gemms;
      gemm_rows.insert(s.m);
      CHECK(sweep_record_op(s) == std::string("gemm") + kFromFloatSuffix);
      CHECK(sweep_macs(s) <= 2.5e9);  // the zoo's layers at batch 8 (ConvNeXt-T's MLP: 0.93 GMACs)
    } else if (s.float_input) {
      ++float_inputs;
      CHECK(s.op == SweepOp::conv);
      CHECK(s.in_c % 2 == 0);  // two producers of half the channels
    }
    ops.insert(s.op);
    stem = stem || s.in_c == 3;
    CHECK(static_cast<double>(s.batch * s.in_c * s.h * s.w) <= 1.3e7);  // a point takes milliseconds, not seconds
  }
  CHECK(ops == std::set<SweepOp>{SweepOp::conv, SweepOp::depthwise_conv, SweepOp::gemm});
  CHECK(float_gemms == 32);
  CHECK(gemm_rows.count(1) == 1);  // a classifier at batch 1
  CHECK(gemm_rows.size() >= 5);    // from one row to thousands
  CHECK(stem);
  CHECK(float_inputs >= 12);
  CHECK(silus >= 12);
  CHECK(residuals == 36);
  CHECK(signed_inputs == 40);
  CHECK(border.size() >= 60);
}

TEST_CASE("a depth-first block's features: the expansion at the input plane, the rest at the output's", "[perfmodel][grid]") {
  SweepShape s{SweepOp::depth_first, 8, 16, 24, 56, 56, 3, 2, 1};
  s.mid_c = 96;
  CHECK(sweep_out_h(s) == 28);
  CHECK(sweep_macs(s) == 8.0 * 56 * 56 * 16 * 96 + 8.0 * 28 * 28 * 96 * (9 + 24));
  CHECK(sweep_bytes(s, 4) == 4.0 * (8 * 16 * 56 * 56 + 8 * 24 * 28 * 28 + 96 * (16 + 9 + 24) + 2 * 96 + 24));
  CHECK(sweep_key(s) == "dfconv k3 s2 16->96->24 56x56 b8");
  CHECK(sweep_record_op(s) == "depth_first");
  SweepShape dw = s;  // without the expansion: the depthwise stage reads the input
  dw.in_c = 96;
  dw.expand = false;
  CHECK(sweep_macs(dw) == 8.0 * 28 * 28 * 96 * (9 + 24));
  CHECK(sweep_key(dw) == "dfconv k3 s2 96->24 56x56 b8");
  CHECK(sweep_record_op(dw) == "depth_first_dw");
  SweepShape lone = s;  // without the projection: the depthwise stage's output is the block's
  lone.out_c = 96;
  lone.project = false;
  CHECK(sweep_macs(lone) == 8.0 * 56 * 56 * 16 * 96 + 8.0 * 28 * 28 * 96 * 9);
  CHECK(sweep_key(lone) == "dfconv k3 s2 16->96 56x56 b8");
  CHECK(sweep_record_op(lone) == "depth_first_expand");
}

TEST_CASE("sweep features: output size, MACs and bytes of a conv and a gemm", "[perfmodel][grid]") {
  const SweepShape conv{SweepOp::conv, 1, 64, 128, 56, 56, 3, 2, 1};
  CHECK(sweep_out_h(conv) == 28);
  CHECK(sweep_macs(conv) == 28.0 * 28 * 128 * 64 * 9);
  CHECK(sweep_bytes(conv, 4) == 4.0 * (64 * 56 * 56 + 128 * 28 * 28 + 128 * 64 * 9) + 4.0 * 128);
  CHECK(sweep_key(conv) == "conv k3 s2 64->128 56x56 b1");
  SweepShape gemm{SweepOp::gemm, 8};
  gemm.m = 8;
  gemm.k = 512;
  gemm.n = 1000;
  CHECK(sweep_macs(gemm) == 8.0 * 512 * 1000);
  CHECK(sweep_key(gemm) == "gemm 8x512->1000");
}
