#include "compilers/onnx/export.h"

#include <fstream>

#include <onnx/checker.h>

#include "compilers/ir/shape_inference.h"
#include "compilers/onnx/import.h"
#include "compilers/onnx/op_export.h"
#include "compilers/onnx/tensor_proto.h"

namespace kiln {

static_assert(kOnnxExportOpset <= kOnnxMaxOpset, "kiln must import what it exports");

namespace {

// ONNX declares a rank for every graph input and output: a graph whose output types were never
// inferred (built by hand, not run through the pass runner) is exported from a typed copy.
Result<Graph> typed_copy(const Graph& graph) {
  Graph typed = graph;
  KILN_TRY(graph_infer_shapes(typed).status());
  for (ValueId id : typed.outputs)
    KILN_REQUIRE(typed.value(id).type.rank_known, unsupported, "graph output '", typed.value(id).name,
                 "' has no known rank, which ONNX requires of an output");
  return typed;
}

bool outputs_typed(const Graph& graph) {
  for (ValueId id : graph.outputs)
    if (!graph.value(id).type.rank_known) return false;
  return true;
}

Result<onnx::ModelProto> export_typed(const Graph& graph, const OnnxExportOptions& options) {
  onnx::ModelProto model;
  model.set_ir_version(onnx::IR_VERSION);
  model.set_producer_name(options.producer_name);
  model.set_producer_version(options.producer_version);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxExportOpset);
  onnx::GraphProto& g = *model.mutable_graph();
  g.set_name(graph.name.empty() ? "kiln" : graph.name);

  onnx_detail::ExportContext ctx(graph, g);
  for (ValueId id : graph.inputs) onnx_detail::value_type_to_proto(graph.value(id).type, ctx.ref(id), *g.add_input());
  for (const Node& node : graph.nodes) KILN_TRY(onnx_detail::export_node(ctx, node));
  for (ValueId id : graph.outputs) onnx_detail::value_type_to_proto(graph.value(id).type, ctx.ref(id), *g.add_output());
  ctx.write_initializers();

  if (options.run_checker) {
    try {
      onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
      return make_error(ErrorCode::internal, "the exported model fails ONNX's checks (a kiln exporter bug): ", msg);
    }
  }
  return model;
}

}  // namespace

Result<onnx::ModelProto> onnx_export_model(const Graph& graph, const OnnxExportOptions& options) {
  for (const Node& node : graph.nodes) KILN_TRY(onnx_detail::export_check_node(node));
  if (outputs_typed(graph)) return export_typed(graph, options);
  KILN_ASSIGN(typed, typed_copy(graph));
  return export_typed(typed, options);
}

Status onnx_export_file(const Graph& graph, const std::string& path, const OnnxExportOptions& options) {
  KILN_ASSIGN(model, onnx_export_model(graph, options));
  KILN_REQUIRE(model.ByteSizeLong() <= kOnnxMaxModelBytes, limit_exceeded, "the exported model is ",
               model.ByteSizeLong(), " bytes, more than protobuf's limit of ", kOnnxMaxModelBytes,
               " (kiln does not write external data)");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  KILN_REQUIRE(out.good(), io, "cannot open '", path, "' for writing");
  KILN_REQUIRE(model.SerializeToOstream(&out), io, "error writing '", path, "'");
  out.close();
  KILN_REQUIRE(!out.fail(), io, "error writing '", path, "' (disk full?)");
  return Status::ok();
}

}  // namespace kiln
