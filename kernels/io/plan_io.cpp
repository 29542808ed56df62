#include "kernels/io/plan_io.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "kernels/io/npy.h"

namespace kiln {
namespace {

void print_top1(std::ostream& os, const Tensor& t) {
  if (t.dtype() != DType::f32 || t.rank() != 2 || t.dim(1) < 2) return;
  const int64_t rows = std::min<int64_t>(t.dim(0), 16);
  os << "  top-1 per row:";
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = t.data<float>() + r * t.dim(1);
    int64_t best = 0;
    for (int64_t c = 1; c < t.dim(1); ++c)
      if (row[c] > row[best]) best = c;
    os << ' ' << best;
  }
  if (t.dim(0) > rows) os << " ...";
  os << '\n';
}

}  // namespace

Result<std::vector<Tensor>> plan_inputs_match(const NamedTensors& entries, const Plan& plan, const std::string& what,
                                              std::vector<std::string>& ignored) {
  const bool single = plan.inputs.size() == 1 && entries.size() == 1;
  std::vector<Tensor> inputs;
  for (const PlanInput& in : plan.inputs) {
    const Tensor* found = nullptr;
    for (const auto& [name, t] : entries)
      if (name == in.name) found = &t;
    if (!found && single) found = &entries[0].second;
    if (!found) {
      std::ostringstream names;
      for (size_t i = 0; i < entries.size(); ++i) names << (i ? ", " : "") << "'" << entries[i].first << "'";
      return make_error(ErrorCode::invalid_argument, what, " has no entry for model input '", in.name,
                        "' (it has ", names.str(), ")");
    }
    inputs.push_back(*found);
  }
  for (const auto& [name, t] : entries) {
    bool used = single;
    for (const PlanInput& in : plan.inputs) used = used || in.name == name;
    if (!used) ignored.push_back(name);
  }
  return inputs;
}

Result<std::vector<Tensor>> plan_inputs_read(const std::string& path, const Plan& plan, std::vector<std::string>& ignored) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".npy") {
    KILN_REQUIRE(plan.inputs.size() == 1, invalid_argument, "the model has ", plan.inputs.size(),
                 " inputs: give them as a .npz with one entry per input name");
    KILN_ASSIGN(t, npy_read_file(path));
    return std::vector<Tensor>{std::move(t)};
  }
  KILN_REQUIRE(ext == ".npz", invalid_argument, "input file '", path, "' must be .npy or .npz");
  KILN_ASSIGN(entries, npz_read_file(path));
  return plan_inputs_match(entries, plan, path, ignored);
}

NamedTensors plan_outputs_name(const Plan& plan, const std::vector<Tensor>& results) {
  NamedTensors named;
  for (size_t i = 0; i < plan.outputs.size() && i < results.size(); ++i) named.emplace_back(plan.outputs[i].second, results[i]);
  return named;
}

Status plan_outputs_write(const std::string& path, const Plan& plan, const std::vector<Tensor>& results) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  return npz_write_file(path, plan_outputs_name(plan, results));
}

Result<std::vector<Tensor>> plan_run_engine(const Plan& plan, const std::vector<Tensor>& inputs,
                                            const EngineOptions& options) {
  KILN_ASSIGN(engine, Engine::create(plan, options));
  return engine->run(inputs);
}

void plan_outputs_print(std::ostream& os, const Plan& plan, const std::vector<Tensor>& results) {
  for (size_t i = 0; i < plan.outputs.size() && i < results.size(); ++i) {
    os << "output " << plan.outputs[i].second << ": " << results[i].describe() << '\n';
    print_top1(os, results[i]);
  }
}

}  // namespace kiln
