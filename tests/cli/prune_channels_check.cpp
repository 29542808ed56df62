// prune_channels end to end through the kiln binary (issue: structured pruning at 30% of the
// channels shrinks ResNet-18's MACs by at least 25%; the accuracy cost is reported on the
// Fashion-MNIST model, and every report says no fine-tuning was done).
//   prune_channels_check macs CACHE_DIR   ResNet-18 exported with default+prune_channels at 0.3:
//                                         `kiln inspect` counts MACs and parameters of both models
//                                         (an independent count, not the pass's own report).
//   prune_channels_check accuracy         `kiln verify` of the Fashion-MNIST example, pruned at
//                                         0.3, on the first 1,000 test images with labels: the
//                                         JSON and text reports carry both accuracies and the
//                                         no-fine-tuning statement (no accuracy is asserted).
// Exits 77 (skipped) when the model or the dataset is missing; no Catch2, so ctest sees the 77.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
constexpr int kSkip = 77;
const char* const kDataDir = "/usr/share/datasets/fashion-mnist";

int fail(const std::string& why, const std::string& output = "") {
  std::cerr << "FAIL: " << why << '\n' << output << '\n';
  return 1;
}

// Runs a shell command; its stdout (and stderr with 2>&1 in cmd) and whether it exited 0.
bool run(const std::string& cmd, std::string& output) {
  std::cout << cmd << '\n';
  output.clear();
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return false;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

nlohmann::json inspect(const std::string& model, std::string& output) {
  if (!run("timeout 300 " KILN_BINARY " inspect " + model + " --json", output)) return nullptr;
  return nlohmann::json::parse(output, nullptr, false);
}

int check_macs(const fs::path& cache) {
  const fs::path model = cache / "resnet18.onnx";
  if (!fs::exists(model)) {
    std::cout << "SKIP: " << model << " not in the model cache (run the models_export test)\n";
    return kSkip;
  }
  const fs::path pruned = fs::temp_directory_path() / ("kiln_pruned_resnet18_" + std::to_string(getpid()) + ".onnx");
  std::string out;
  const bool exported = run("timeout 300 " KILN_BINARY " export " + model.string() +
                                " --passes default+prune_channels --prune-channels 0.3 -o " + pruned.string() + " 2>&1",
                            out);
  const std::string log = out;
  if (!exported) return fail("kiln export with prune_channels did not exit 0", log);
  if (log.find("prune_channels (no fine-tuning)") == std::string::npos)
    return fail("the pass did not report that no fine-tuning was done", log);
  const nlohmann::json before = inspect(model.string(), out);
  if (before.is_discarded() || before.is_null()) return fail("kiln inspect of the original model failed", out);
  const nlohmann::json after = inspect(pruned.string(), out);
  fs::remove(pruned);
  if (after.is_discarded() || after.is_null()) return fail("kiln inspect of the pruned model failed", out);
  const double macs_before = before["totals"]["macs"], macs_after = after["totals"]["macs"];
  const double params_before = before["totals"]["params"], params_after = after["totals"]["params"];
  const double reduction = 1.0 - macs_after / macs_before;
  std::cout << std::fixed << std::setprecision(0) << "ResNet-18 at ratio 0.3: MACs " << macs_before << " -> " << macs_after << " (-" << std::setprecision(1) << 100 * reduction
            << std::setprecision(0) << "%), parameters " << params_before << " -> " << params_after << '\n';
  if (!(reduction >= 0.25)) return fail("MACs fell by " + std::to_string(100 * reduction) + "%, not >= 25%", log);
  if (!(params_after < params_before)) return fail("the weights did not shrink", log);
  return 0;
}

int check_accuracy() {
  const std::string images = std::string(kDataDir) + "/t10k-images-idx3-ubyte.gz";
  const std::string labels = std::string(kDataDir) + "/t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(images) || !fs::exists(labels)) {
    std::cout << "SKIP: " << images << " not found (apt-get install dataset-fashion-mnist)\n";
    return kSkip;
  }
  const std::string base = "timeout 300 " KILN_BINARY " verify " KILN_EXAMPLES_DIR "/fashion-mnist/model.onnx --idx-images " +
                           images + " --idx-labels " + labels +
                           " --mean 0.2860 --std 0.3530 --batch 100 --limit 1000 --passes default+prune_channels "
                           "--prune-channels 0.3";
  std::string out;
  if (!run(base + " --json 2>/dev/null", out)) return fail("kiln verify --json did not exit 0", out);
  const nlohmann::json report = nlohmann::json::parse(out, nullptr, false);
  if (report.is_discarded() || !report.contains("pruning") || report["outputs"].size() != 1)
    return fail("no JSON report with a 'pruning' field and one output", out);
  const nlohmann::json& p = report["pruning"];
  const nlohmann::json& o = report["outputs"][0];
  if (p["fine_tuned"] != false || p["passes"] != nlohmann::json::array({"prune_channels"}))
    return fail("the pruning field does not say prune_channels ran without fine-tuning", out);
  if (!o.contains("reference_accuracy") || !o.contains("compiled_accuracy") || !p["accuracy_cost"].is_number() ||
      double(p["accuracy_cost"]) != double(o["accuracy_drop"]))
    return fail("the accuracy cost is not reported", out);
  std::cout << "Fashion-MNIST, 1,000 test images, ratio 0.3: accuracy " << o["reference_accuracy"] << " -> "
            << o["compiled_accuracy"] << " (cost " << p["accuracy_cost"] << ")\n";

  if (!run(base + " 2>&1", out)) return fail("kiln verify did not exit 0", out);
  if (out.find("pruned by prune_channels without fine-tuning; accuracy cost: ") == std::string::npos ||
      out.find("prune_channels (no fine-tuning)") == std::string::npos)
    return fail("the text report or the pass log does not state the missing fine-tuning and the cost", out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "macs" && argc > 2) return check_macs(argv[2]);
  if (mode == "accuracy") return check_accuracy();
  std::cerr << "usage: prune_channels_check macs CACHE_DIR | accuracy\n";
  return 2;
}
