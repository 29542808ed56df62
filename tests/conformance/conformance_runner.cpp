// Walks the ONNX backend conformance suite (Debian's libonnx-testdata), runs every case whose
// ops and dtypes kiln supports with the reference executor and compares with the stored
// outputs at rtol 1e-3 / atol 1e-5. Prints one line per failure and the closing line
//   conformance: N passed, M failed, K skipped
// Cases listed in the exclusion file (name + reason) are counted as skipped, with the reason.
//
// Usage: kiln_conformance DATA_DIR EXCLUSIONS_FILE [--min-passed N] [--verbose] [--filter SUBSTRING]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "compilers/ir/shape_inference.h"
#include "compilers/lower/to_plan.h"
#include "compilers/onnx/import.h"
#include "kernels/executor.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

enum class Outcome { passed, failed, skipped };

struct CaseResult {
  Outcome outcome;
  std::string reason;
};

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  // input_10.pb sorts after input_9.pb
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    const auto num = [](const fs::path& p) {
      const std::string s = p.stem().string();
      return std::stoi(s.substr(s.find('_') + 1));
    };
    return num(a) < num(b);
  });
  return files;
}

std::string compare(const Tensor& got, const Tensor& want, const std::string& name) {
  std::ostringstream os;
  if (got.dtype() != want.dtype()) {
    os << "output '" << name << "' is " << got.describe() << ", expected " << want.describe();
    return os.str();
  }
  if (got.shape() != want.shape()) {
    os << "output '" << name << "' has shape " << shape_to_string(got.shape()) << ", expected "
       << shape_to_string(want.shape());
    return os.str();
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.value_as_double(i);
    const double w = want.value_as_double(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= 1e-5 + 1e-3 * std::fabs(w))) {
      os << "output '" << name << "' element " << i << ": got " << g << ", expected " << w;
      return os.str();
    }
  }
  return {};
}

CaseResult run_case(const fs::path& dir) {
  auto graph = onnx_import_file((dir / "model.onnx").string());
  if (!graph) {
    const Outcome o = graph.error().code == ErrorCode::unsupported ? Outcome::skipped : Outcome::failed;
    return {o, graph.error().message};
  }
  auto inferred = graph_infer_shapes(*graph);
  if (!inferred) {
    const Outcome o = inferred.error().code == ErrorCode::unsupported ? Outcome::skipped : Outcome::failed;
    return {o, "shape inference: " + inferred.error().message};
  }
  const Plan plan = graph_to_plan(*graph);
  bool any_set = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_directory() || e.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    any_set = true;
    std::vector<Tensor> inputs;
    for (const auto& f : sorted_files(e.path(), "input_")) {
      auto t = onnx_read_tensor_file(f.string());
      if (!t) return {t.error().code == ErrorCode::unsupported ? Outcome::skipped : Outcome::failed, t.error().message};
      inputs.push_back(*t);
    }
    std::vector<Tensor> expected;
    for (const auto& f : sorted_files(e.path(), "output_")) {
      auto t = onnx_read_tensor_file(f.string());
      if (!t) return {t.error().code == ErrorCode::unsupported ? Outcome::skipped : Outcome::failed, t.error().message};
      expected.push_back(*t);
    }
    auto result = execute_reference(plan, inputs);
    if (!result) {
      const Outcome o = result.error().code == ErrorCode::unsupported ? Outcome::skipped : Outcome::failed;
      return {o, result.error().message};
    }
    if (expected.size() != result->outputs.size())
      return {Outcome::failed, "produced " + std::to_string(result->outputs.size()) + " outputs, expected " +
                                   std::to_string(expected.size())};
    for (size_t i = 0; i < expected.size(); ++i) {
      std::string mismatch = compare(result->outputs[i], expected[i], plan.outputs[i].second);
      if (!mismatch.empty()) return {Outcome::failed, e.path().filename().string() + ": " + mismatch};
    }
  }
  if (!any_set) return {Outcome::skipped, "no test data sets"};
  return {Outcome::passed, {}};
}

std::map<std::string, std::string> read_exclusions(const std::string& path) {
  std::map<std::string, std::string> exclusions;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find_first_of(" \t");
    const std::string name = line.substr(0, space);
    std::string reason = space == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", space));
    exclusions[name] = reason;
  }
  return exclusions;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: kiln_conformance DATA_DIR EXCLUSIONS_FILE [--min-passed N] "
                 "[--verbose] [--filter SUBSTRING]\n";
    return 2;
  }
  const fs::path data_dir = argv[1];
  const auto exclusions = read_exclusions(argv[2]);
  int min_passed = 0;
  bool verbose = false;
  std::string filter;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-passed" && i + 1 < argc) min_passed = std::stoi(argv[++i]);
    else if (a == "--verbose") verbose = true;
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
  }
  if (!fs::is_directory(data_dir)) {
    std::cerr << "conformance: data directory " << data_dir << " not found (install libonnx-testdata)\n";
    return 1;
  }

  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  std::map<std::string, std::pair<int, int>> per_suite;  // suite -> passed, supported
  for (const char* suite : {"node", "simple", "pytorch-converted", "pytorch-operator"}) {
    const fs::path suite_dir = data_dir / suite;
    if (!fs::is_directory(suite_dir)) continue;
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(suite_dir))
      if (e.is_directory()) cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    for (const auto& dir : cases) {
      const std::string name = dir.filename().string();
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      const std::string label = std::string(suite) + "/" + name;
      CaseResult r = run_case(dir);
      auto excluded = exclusions.find(name);
      if (excluded != exclusions.end() && r.outcome != Outcome::skipped) {
        if (r.outcome == Outcome::passed) std::cout << "note: " << label << " passes but is excluded; remove it from the exclusion file\n";
        r = {Outcome::skipped, "excluded: " + excluded->second};
      }
      auto& counts = per_suite[suite];
      switch (r.outcome) {
        case Outcome::passed:
          ++passed;
          ++counts.first;
          ++counts.second;
          if (verbose) std::cout << "PASS " << label << '\n';
          break;
        case Outcome::failed:
          ++failed;
          ++counts.second;
          std::cout << "FAIL " << label << ": " << r.reason << '\n';
          break;
        case Outcome::skipped: {
          ++skipped;
          if (verbose) std::cout << "SKIP " << label << ": " << r.reason << '\n';
          std::string key = r.reason;
          if (key.rfind("excluded", 0) != 0) {
            // group by the op or dtype that made it unsupported
            auto q = key.find('\'');
            auto q2 = q == std::string::npos ? q : key.find('\'', q + 1);
            if (key.find("unsupported op") != std::string::npos && q2 != std::string::npos) key = "op " + key.substr(q, q2 - q + 1);
            else if (auto t = key.find("element type "); t != std::string::npos) key = "dtype " + key.substr(t + 13, key.find(',', t) - t - 13);
          } else {
            key = "excluded";
          }
          ++skip_reasons[key];
          break;
        }
      }
    }
  }
  std::cout << "\nper suite (passed / supported):";
  for (const auto& [suite, c] : per_suite) std::cout << ' ' << suite << ' ' << c.first << '/' << c.second;
  std::cout << "\nskipped by reason:";
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto& [k, v] : skip_reasons) reasons.emplace_back(v, k);
  std::sort(reasons.rbegin(), reasons.rend());
  for (size_t i = 0; i < reasons.size() && i < 25; ++i) std::cout << "\n  " << reasons[i].first << "  " << reasons[i].second;
  std::cout << "\n\nconformance: " << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  if (passed < min_passed) std::cout << "conformance: fewer than the required " << min_passed << " cases passed\n";
  return failed == 0 && passed >= min_passed ? 0 : 1;
}
