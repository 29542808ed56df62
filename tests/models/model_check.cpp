// Checks the reference executor against PyTorch on torchvision exports from the build-time
// cache written by export_torchvision.py: NAME.onnx, NAME.input.npy, NAME.expected.npy.
// Passes when max|kiln - torch| <= 1e-4 * max|torch| for every model.
// Usage: kiln_model_check CACHE_DIR NAME... ; exits 77 (skip) when the cache has no such model.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "compilers/ir/shape_inference.h"
#include "compilers/lower/to_plan.h"
#include "compilers/onnx/import.h"
#include "kernels/executor.h"
#include "kernels/io/npy.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

constexpr int kSkip = 77;

Status check_model(const fs::path& dir, const std::string& name) {
  const auto start = std::chrono::steady_clock::now();
  KILN_ASSIGN(graph, onnx_import_file((dir / (name + ".onnx")).string()));
  KILN_TRY(graph_infer_shapes(graph));
  const Plan plan = graph_to_plan(graph);
  KILN_ASSIGN(input, npy_read_file((dir / (name + ".input.npy")).string()));
  KILN_ASSIGN(expected, npy_read_file((dir / (name + ".expected.npy")).string()));
  KILN_ASSIGN(result, execute_reference(plan, {input}));
  const Tensor& got = result.outputs.at(0);
  KILN_REQUIRE(got.shape() == expected.shape(), shape_mismatch, name, ": output shape ", shape_to_string(got.shape()),
               ", PyTorch gives ", shape_to_string(expected.shape()));
  double max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.value_as_double(i), w = expected.value_as_double(i);
    max_diff = std::max(max_diff, std::isnan(g) ? INFINITY : std::fabs(g - w));
    max_ref = std::max(max_ref, std::fabs(w));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double ratio = max_ref > 0 ? max_diff / max_ref : max_diff;
  std::printf("%-20s nodes %4zu  max|diff| %.3g  max|out| %.3g  ratio %.2e  (%.1f s)\n", name.c_str(), graph.nodes.size(),
              max_diff, max_ref, ratio, seconds);
  KILN_REQUIRE(ratio <= 1e-4, internal, name, ": max abs diff ", max_diff, " exceeds 1e-4 x max|output| (", max_ref, ")");
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kiln_model_check CACHE_DIR NAME...\n");
    return 2;
  }
  const fs::path dir = argv[1];
  int failed = 0, passed = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string name = argv[i];
    if (!fs::exists(dir / (name + ".onnx"))) {
      std::printf("skipped: %s is not in the model cache %s (PyTorch/torchvision missing? run scripts/test.sh, "
                  "which installs them)\n", name.c_str(), dir.c_str());
      return kSkip;
    }
    Status s = check_model(dir, name);
    if (s) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), s.message().c_str());
    }
  }
  std::printf("models: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
