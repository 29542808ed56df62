#include "service/cli/model_loading.h"

#include <filesystem>
#include <sstream>

#include "compilers/ir/shape_inference.h"
#include "compilers/onnx/import.h"

namespace kiln::cli {

void DimOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--batch", batch, "Value for each input's symbolic first dimension (default 1)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--dims", dims, "Values for other symbolic dimensions, e.g. seq=128,width=640");
}

Result<DimBindings> DimOptions::resolve(const Graph& graph) const {
  DimBindings bindings;
  for (ValueId id : graph.inputs) {
    const ValueType& t = graph.value(id).type;
    if (t.rank_known && !t.shape.empty() && !t.shape[0].known() && !t.shape[0].symbol.empty())
      bindings[t.shape[0].symbol] = batch;
  }
  if (!dims.empty()) {
    KILN_ASSIGN(extra, parse_bindings(dims));
    for (const auto& [k, v] : extra) bindings[k] = v;
  }
  return bindings;
}

Result<LoadedModel> load_model(const std::string& path, const DimOptions* dims) {
  KILN_ASSIGN(graph, onnx_import_file(path));
  DimBindings bindings;
  if (dims) {
    KILN_ASSIGN(resolved, dims->resolve(graph));
    bindings = std::move(resolved);
  }
  ShapeInferenceOptions options;
  options.bindings = bindings;
  auto inferred = graph_infer_shapes(graph, options);
  if (!inferred) return inferred.status().with_context(path + ": ");
  return LoadedModel{std::move(graph), std::move(bindings)};
}

Result<DimBindings> parse_bindings(const std::string& text) {
  DimBindings bindings;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    KILN_REQUIRE(eq != std::string::npos && eq > 0, invalid_argument, "dimension binding '", item,
                 "' must look like name=value");
    try {
      size_t used = 0;
      const int64_t v = std::stoll(item.substr(eq + 1), &used);
      KILN_REQUIRE(used == item.size() - eq - 1 && v > 0, invalid_argument, "dimension '", item.substr(0, eq),
                   "' must be a positive integer");
      bindings[item.substr(0, eq)] = v;
    } catch (const std::exception&) {
      return make_error(ErrorCode::invalid_argument, "dimension '", item.substr(0, eq), "' must be a positive integer");
    }
  }
  return bindings;
}

}  // namespace kiln::cli
