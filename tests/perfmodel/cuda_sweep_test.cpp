// The GPU kernel sweep without a GPU: its shapes (the CPU grid, batch-64 copies, interleaved so
// that every op comes early) and, with the plugin built, that the CUDA backend has a kernel for
// every step of every plan it times (the host link's too), in each precision (the plugin's capability query needs no
// device), with the op's steps after its producers (what the device timing requires).
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "kernels/device/device_plugin.h"
#include "perfmodel/microbench/cuda_sweep.h"
#include "perfmodel/microbench/kernel_sweep.h"

using namespace kiln;
using namespace kiln::perf;

TEST_CASE("the GPU sweep's shapes: the CPU grid (less the CPU pipeline's fusions) plus cheap batch-64 copies and large-work points, every op early",
          "[perfmodel][cuda]") {
  std::vector<SweepShape> grid = sweep_grid(false);
  const auto cpu_fusion = [](const SweepShape& s) { return s.op == SweepOp::depth_first || s.op == SweepOp::concat_affine; };
  REQUIRE(std::erase_if(grid, cpu_fusion) > 0);
  const std::vector<SweepShape> shapes = cuda_sweep_shapes(false);
  std::set<std::string> keys, grid_keys, large_keys;
  for (const SweepShape& s : grid) grid_keys.insert(sweep_key(s));
  for (const SweepShape& s : sweep_device_large_grid()) large_keys.insert(sweep_key(s));
  int batch64 = 0, large = 0;
  for (const SweepShape& s : shapes) {
    CHECK(!cpu_fusion(s));
    CHECK(keys.insert(sweep_key(s)).second);  // no shape twice
    if (grid_keys.count(sweep_key(s))) continue;
    CHECK(sweep_bytes(s, 4) <= 256.0 * (1 << 20));
    if (large_keys.count(sweep_key(s))) {
      ++large;
      continue;
    }
    ++batch64;
    CHECK(s.batch == 64);
    CHECK(s.op != SweepOp::gemm);
    CHECK(sweep_bytes(s, 4) <= 256.0 * (1 << 20));
    SweepShape twin = s;
    twin.batch = 32;
    CHECK(grid_keys.count(sweep_key(twin)) == 1);
  }
  CHECK(batch64 > 20);
  CHECK(large > 40);
  CHECK(shapes.size() == grid.size() + static_cast<size_t>(batch64 + large));
  // Interleaved: the first nine shapes are the nine ops, so a sweep cut short still covers them.
  std::set<SweepOp> first;
  for (size_t i = 0; i < 9; ++i) first.insert(shapes[i].op);
  CHECK(first.size() == 9);
  CHECK(cuda_sweep_shapes(true).size() == sweep_grid(true).size());
}

TEST_CASE("every plan the GPU sweep times has a CUDA kernel for each step (no GPU needed)", "[perfmodel][cuda]") {
#ifndef KILN_CUDA_PLUGIN_PATH
  WARN("built without the CUDA plugin: its capability query cannot be asked");
#else
  DevicePluginSearch search;
  search.env_path = KILN_CUDA_PLUGIN_PATH;
  std::vector<SweepShape> sample = cuda_sweep_shapes(true);
  const std::vector<SweepShape> all = cuda_sweep_shapes(false);
  for (size_t i = 0; i < all.size(); i += 7) sample.push_back(all[i]);  // every op, kernel and stride (a seeded sample)
  std::vector<std::pair<std::string, Plan>> plans;
  for (const SweepShape& shape : sample) {
    auto plan = cuda_sweep_plan(shape);
    INFO(sweep_key(shape) << ": " << (plan ? std::string() : plan.error().message));
    REQUIRE(plan);
    // Producers first, then the op's steps: what the device timing replays alone.
    bool op_seen = false;
    for (const PlanStep& step : plan->steps) {
      const bool producer = step.name.rfind(kSweepProducerNode, 0) == 0;
      CHECK_FALSE((producer && op_seen));
      op_seen = op_seen || !producer;
    }
    CHECK(op_seen);
    plans.emplace_back(sweep_key(shape), std::move(*plan));
  }
  auto peak = cuda_peak_plan(256);
  REQUIRE(peak);
  plans.emplace_back("peak", std::move(*peak));
  auto bandwidth = cuda_bandwidth_plan(int64_t{1} << 20);
  REQUIRE(bandwidth);
  plans.emplace_back("bandwidth", std::move(*bandwidth));
  auto host_link = cuda_host_link_plan(8);
  REQUIRE(host_link);
  plans.emplace_back("host link", std::move(*host_link));
  for (const auto& [what, plan] : plans)
    for (DevicePrecision precision : {DevicePrecision::fp32, DevicePrecision::tf32, DevicePrecision::fp16, DevicePrecision::bf16}) {
      DeviceEngineOptions options;
      options.precision = precision;
      const Status supported = cuda_plugin_check_plan(plan, options, search);
      INFO(what << " " << device_precision_name(precision) << ": " << supported.message());
      CHECK(supported.ok());
    }
#endif
}
