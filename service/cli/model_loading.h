// Shared by the CLI verbs: import a model with its shapes inferred.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compilers/ir/graph.h"
#include "kernels/plan.h"

namespace kiln::cli {

// --batch N / --dims name=value: how symbolic dimensions get values.
struct DimOptions {
  int64_t batch = 1;
  std::string dims;

  void add_to(CLI::App& cmd);
  // --batch binds the symbol on dim 0 of every input; --dims binds the rest by name.
  Result<DimBindings> resolve(const Graph& graph) const;
};

struct LoadedModel {
  Graph graph;
  DimBindings bindings;
};

// Imports an ONNX model, verifies it, binds its symbolic dims (none when `dims` is null) and
// infers shapes.
Result<LoadedModel> load_model(const std::string& path, const DimOptions* dims);

// Parses "batch=4,seq=128" into bindings.
Result<DimBindings> parse_bindings(const std::string& text);

}  // namespace kiln::cli
