// The sweep grid: deterministic, within the designed ranges, unique keys, every op present, and
// the quick grid small; features (MACs, bytes) computed from the shape.
#include <catch2/catch.hpp>

#include <map>
#include <set>

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
      CHECK(a[i].in_c >= 16);
      CHECK(a[i].out_c <= 2048);
      CHECK(a[i].h >= 7);
      CHECK(a[i].h <= 112);
      CHECK(sweep_macs(a[i]) <= 1.2e9);
    }
  }
  CHECK(keys.size() == a.size());
  for (SweepOp op : {SweepOp::conv, SweepOp::depthwise_conv, SweepOp::gemm, SweepOp::maxpool, SweepOp::avgpool,
                     SweepOp::global_avgpool, SweepOp::add, SweepOp::concat, SweepOp::eltwise})
    CHECK(per_op[op] > 0);
  CHECK(kernels == std::set<int64_t>{1, 3, 5, 7});
  CHECK(strides == std::set<int64_t>{1, 2});
  CHECK(batches == std::set<int64_t>{1, 8, 32});
  CHECK(sweep_grid(true).size() < 12);
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
