// kiln inspect MODEL: op counts, parameters, MACs and activation memory per layer and in total.
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compilers/analysis/model_stats.h"
#include "compilers/ir/printer.h"
#include "service/cli/commands.h"
#include "service/cli/model_loading.h"

namespace kiln::cli {
namespace {

struct InspectOptions {
  std::string model;
  DimOptions dims;
  bool json = false;
  bool dump_ir = false;
};

std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T"};
  int p = 0;
  while (v >= 1000.0 && p < 4) {
    v /= 1000.0;
    ++p;
  }
  std::ostringstream os;
  os << std::fixed << std::setprecision(p == 0 ? 0 : 2) << v << ' ' << prefixes[p] << unit;
  return os.str();
}

std::string type_string(const ValueType& t) {
  return std::string(dtype_name(t.dtype)) + (t.rank_known ? sym_shape_to_string(t.shape) : "[?]");
}

nlohmann::json to_json(const Graph& graph, const ModelStats& stats, const DimBindings& bindings) {
  nlohmann::json j;
  j["source"] = {{"format", graph.source.format}, {"producer", graph.source.producer}, {"opset", graph.source.opset}};
  j["bindings"] = bindings;
  for (ValueId id : graph.inputs) j["inputs"].push_back({{"name", graph.value(id).name}, {"type", type_string(graph.value(id).type)}});
  for (ValueId id : graph.outputs) j["outputs"].push_back({{"name", graph.value(id).name}, {"type", type_string(graph.value(id).type)}});
  j["op_counts"] = stats.op_counts;
  j["totals"] = {{"nodes", graph.nodes.size()},
                 {"params", stats.params},
                 {"param_bytes", stats.param_bytes},
                 {"macs", stats.macs},
                 {"activation_bytes_total", stats.activation_bytes_total},
                 {"activation_bytes_peak", stats.activation_bytes_peak},
                 {"complete", stats.complete},
                 {"malformed_layers", stats.malformed}};
  j["layers"] = nlohmann::json::array();
  for (const LayerStats& l : stats.layers)
    j["layers"].push_back({{"name", l.name}, {"op", std::string(op_name(l.op))}, {"output", l.output_type},
                           {"macs", l.macs}, {"params", l.params}, {"activation_bytes", l.activation_bytes}});
  return j;
}

void print_text(const std::string& path, const Graph& graph, const ModelStats& stats, const DimBindings& bindings) {
  std::cout << "model: " << path << "  (" << graph.source.format << ", opset " << graph.source.opset << ", producer '"
            << graph.source.producer << "')\n";
  for (ValueId id : graph.inputs) std::cout << "input:  " << graph.value(id).name << ' ' << type_string(graph.value(id).type) << '\n';
  for (ValueId id : graph.outputs) std::cout << "output: " << graph.value(id).name << ' ' << type_string(graph.value(id).type) << '\n';
  if (!bindings.empty()) {
    std::cout << "bound:  ";
    for (const auto& [k, v] : bindings) std::cout << k << '=' << v << ' ';
    std::cout << '\n';
  }
  std::printf("\n%-40s %-20s %-26s %12s %10s %12s\n", "layer", "op", "output", "MACs", "params", "act bytes");
  for (const LayerStats& l : stats.layers)
    std::printf("%-40.40s %-20s %-26.26s %12s %10lld %12s\n", l.name.c_str(), std::string(op_name(l.op)).c_str(),
                l.output_type.c_str(), l.macs < 0 ? "?" : std::to_string(l.macs).c_str(),
                static_cast<long long>(l.params),
                l.activation_bytes < 0 ? "?" : std::to_string(l.activation_bytes).c_str());
  std::cout << "\nops:";
  for (const auto& [op, n] : stats.op_counts) std::cout << ' ' << op << "=" << n;
  std::cout << "\nnodes: " << graph.nodes.size() << '\n'
            << "parameters: " << stats.params << " (" << human(static_cast<double>(stats.param_bytes), "B") << ")\n"
            << "MACs: " << human(static_cast<double>(stats.macs), "MAC") << '\n'
            << "activations: " << human(static_cast<double>(stats.activation_bytes_total), "B")
            << " in all intermediates, peak live " << human(static_cast<double>(stats.activation_bytes_peak), "B")
            << " in this node order\n";
  for (const std::string& layer : stats.malformed)
    std::cout << "note: layer '" << layer << "' has a weight with no output channels: its MACs are not counted\n";
  if (stats.shapes_unknown) std::cout << "note: some shapes are symbolic; bind them (--batch, --dims) for complete figures\n";
}

int run_inspect(const InspectOptions& opts) {
  auto model = load_model(opts.model, &opts.dims);
  if (!model) return report_error(model.error().message);
  const Graph& graph = model->graph;
  const ModelStats stats = model_stats(graph);
  if (opts.dump_ir) graph_print(graph, std::cout);
  if (opts.json) std::cout << to_json(graph, stats, model->bindings).dump(2) << '\n';
  else print_text(opts.model, graph, stats, model->bindings);
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print a model's layers, op counts, parameters, MACs and activation memory");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  opts->dims.add_to(*cmd);
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->add_flag("--dump-ir", opts->dump_ir, "Print kiln's IR of the imported model");
  cmd->callback([opts, &run] { run = [opts] { return run_inspect(*opts); }; });
}

}  // namespace kiln::cli
