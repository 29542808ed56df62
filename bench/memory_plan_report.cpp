// Memory planning report: for each torchvision model in the build-time cache, the arena the
// greedy-by-size planner needs for batch 1 against the liveness lower bound, with and without
// in-place activations, next to the no-reuse sum and the weights. Prints a table; asserts nothing.
// Usage: kiln_memory_plan_report [CACHE_DIR] [--passes] [MODEL...]
//   CACHE_DIR defaults to build/model-cache; --passes plans the graph after the default pipeline.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "compilers/ir/shape_inference.h"
#include "compilers/onnx/import.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "compilers/planning/memory_plan.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const char* const kModels[] = {"resnet18",           "resnet50",    "mobilenet_v2", "efficientnet_b0",
                               "squeezenet1_1",      "shufflenet_v2_x1_0", "densenet121", "googlenet",
                               "convnext_tiny"};

double mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

struct Row {
  size_t nodes = 0;
  GraphMemoryPlan best, by_size, by_offset, in_place;
};

Result<Row> plan_model(const fs::path& path, bool with_passes) {
  KILN_ASSIGN(graph, onnx_import_file(path.string()));
  ShapeInferenceOptions infer;
  infer.bindings = {{"batch", 1}};
  if (with_passes) {
    PassRunOptions options;
    options.bindings = infer.bindings;
    options.check_numerics = false;
    KILN_TRY(run_passes(graph, default_pipeline(), options).status());
  }
  KILN_ASSIGN(shapes, graph_infer_shapes(graph, infer));
  Row row;
  row.nodes = graph.nodes.size();
  GraphMemoryOptions options;
  options.constant_values = &shapes.known_values;  // folded shape arithmetic is compile-time data
  auto plan = [&](PlacementStrategy strategy, bool in_place, GraphMemoryPlan& out) -> Status {
    options.strategy = strategy;
    options.in_place = in_place;
    KILN_ASSIGN(p, plan_graph_memory(graph, options));
    KILN_TRY(verify_memory_plan(p.buffers, p.memory).with_context("invalid plan: "));
    out = std::move(p);
    return Status::ok();
  };
  KILN_TRY(plan(PlacementStrategy::best_of_both, false, row.best));
  KILN_TRY(plan(PlacementStrategy::greedy_by_size, false, row.by_size));
  KILN_TRY(plan(PlacementStrategy::lowest_offset_first, false, row.by_offset));
  KILN_TRY(plan(PlacementStrategy::best_of_both, true, row.in_place));
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir = "build/model-cache";
  bool with_passes = false;
  std::vector<std::string> names;
  bool dir_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--passes") with_passes = true;
    else if (!dir_given && fs::is_directory(arg)) dir = arg, dir_given = true;
    else names.push_back(arg);
  }
  if (names.empty()) names.assign(std::begin(kModels), std::end(kModels));

  std::printf("memory plan, batch 1, alignment 64, %s; sizes in MB (1e6 bytes)\n",
              with_passes ? "after the default pass pipeline" : "graph as imported");
  std::printf("columns: sum = every intermediate, no reuse; bound = most bytes live at one step; by-size =\n"
              "greedy by size (TFLite); low-off = lowest offset first; arena = the smaller of the two; ratio =\n"
              "arena / bound; in-place (ip) = unary activations overwrite their dying input; ip# = such values\n\n");
  std::printf("%-19s %5s %8s %8s %8s %8s %8s %6s | %8s %8s %6s %4s | %8s\n", "model", "nodes", "sum", "bound",
              "by-size", "low-off", "arena", "ratio", "ip.bound", "ip.arena", "ratio", "ip#", "weights");
  double worst = 0;
  for (const std::string& name : names) {
    const fs::path path = dir / (name + ".onnx");
    if (!fs::exists(path)) {
      std::printf("%-19s not in %s\n", name.c_str(), dir.c_str());
      continue;
    }
    auto row = plan_model(path, with_passes);
    if (!row) {
      std::printf("%-19s error: %s\n", name.c_str(), row.error().message.c_str());
      continue;
    }
    const MemoryPlan& p = row->best.memory;
    const MemoryPlan& ip = row->in_place.memory;
    const double ratio = p.lower_bound_bytes ? static_cast<double>(p.arena_bytes) / p.lower_bound_bytes : 1.0;
    const double ip_ratio = ip.lower_bound_bytes ? static_cast<double>(ip.arena_bytes) / ip.lower_bound_bytes : 1.0;
    worst = std::max({worst, ratio, ip_ratio});
    std::printf("%-19s %5zu %8.2f %8.2f %8.2f %8.2f %8.2f %6.3f | %8.2f %8.2f %6.3f %4d | %8.2f\n", name.c_str(),
                row->nodes, mb(p.sum_of_buffers_bytes), mb(p.lower_bound_bytes), mb(row->by_size.memory.arena_bytes),
                mb(row->by_offset.memory.arena_bytes), mb(p.arena_bytes), ratio, mb(ip.lower_bound_bytes),
                mb(ip.arena_bytes), ip_ratio, row->in_place.in_place_values, mb(row->best.weights_bytes));
  }
  std::printf("worst arena / lower bound: %.3f\n", worst);
  return 0;
}
