#include "compilers/onnx/import.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <unordered_set>

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>

#include "compilers/ir/verify.h"
#include "compilers/onnx/op_import.h"
#include "compilers/onnx/tensor_proto.h"

namespace kiln {
namespace {

using onnx_detail::NodeImportContext;

Result<std::vector<uint8_t>> read_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  KILN_REQUIRE(!ec && std::filesystem::exists(status), io, "cannot open '", path, "': no such file");
  KILN_REQUIRE(std::filesystem::is_regular_file(status), io, "'", path, "' is not a regular file");
  std::ifstream in(path, std::ios::binary);
  KILN_REQUIRE(in.good(), io, "cannot open '", path, "' for reading");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  KILN_REQUIRE(size <= max_bytes, limit_exceeded, "'", path, "' is ", size, " bytes; the limit is ", max_bytes,
               " (store large weights as ONNX external data)");
  in.seekg(0);
  std::vector<uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  KILN_REQUIRE(in.good() || size == 0, io, "error reading '", path, "'");
  return bytes;
}

// Counts what a serialized model would make protobuf allocate, on the wire bytes alone, so that
// an oversized graph is refused before it is parsed. Only the messages that hold nodes and value
// declarations are entered; everything else is skipped by its length. Malformed wire data ends
// the walk quietly: protobuf's parser then reports it.
class WireCounter {
 public:
  int64_t nodes = 0;
  int64_t values = 0;

  // Field numbers from onnx.proto.
  enum class Message { model, graph, node, attribute, function };

  bool over_limit() const { return nodes > limits::kMaxGraphNodes || values > limits::kMaxGraphValues; }

  // Walks the message in [p, end); false on malformed data or once a limit is passed.
  bool walk(const uint8_t* p, const uint8_t* end, Message kind, int depth) {
    if (depth > limits::kMaxNestingDepth) return false;
    while (p < end) {
      uint64_t key = 0;
      if (!read_varint(p, end, key)) return false;
      const uint64_t field = key >> 3;
      switch (key & 7) {
        case 0: {
          uint64_t ignored = 0;
          if (!read_varint(p, end, ignored)) return false;
          break;
        }
        case 1: if (end - p < 8) return false; p += 8; break;
        case 5: if (end - p < 4) return false; p += 4; break;
        case 2: {
          uint64_t len = 0;
          if (!read_varint(p, end, len) || len > static_cast<uint64_t>(end - p)) return false;
          const uint8_t* sub = p;
          p += len;
          const auto child = child_message(kind, field);
          if (child && !walk(sub, p, *child, depth + 1)) return false;
          if (over_limit()) return false;
          break;
        }
        default: return false;  // groups: not used by ONNX
      }
    }
    return true;
  }

 private:
  static bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }

  // The submessage kind of a length-delimited `field` of `kind`, counting what it declares.
  std::optional<Message> child_message(Message kind, uint64_t field) {
    switch (kind) {
      case Message::model:
        if (field == 7) return Message::graph;      // ModelProto.graph
        if (field == 25) return Message::function;  // ModelProto.functions
        return std::nullopt;
      case Message::graph:
        if (field == 1) {  // GraphProto.node
          ++nodes;
          return Message::node;
        }
        if (field == 5 || field == 11 || field == 12 || field == 13 || field == 15) ++values;
        return std::nullopt;  // initializer, input, output, value_info, sparse_initializer
      case Message::function:
        if (field == 7) {  // FunctionProto.node
          ++nodes;
          return Message::node;
        }
        return std::nullopt;
      case Message::node:
        return field == 5 ? std::optional(Message::attribute) : std::nullopt;  // NodeProto.attribute
      case Message::attribute:
        if (field == 6 || field == 11) return Message::graph;  // AttributeProto.g, graphs
        return std::nullopt;
    }
    return std::nullopt;
  }
};

Status check_model_size(std::span<const uint8_t> bytes) {
  KILN_REQUIRE(bytes.size() <= limits::kMaxModelBytes, limit_exceeded, "model is ", bytes.size(),
               " bytes, more than the limit of ", limits::kMaxModelBytes,
               " bytes on a protobuf model (store large weights as ONNX external data)");
  WireCounter counter;
  counter.walk(bytes.data(), bytes.data() + bytes.size(), WireCounter::Message::model, 0);
  KILN_REQUIRE(counter.nodes <= limits::kMaxGraphNodes, limit_exceeded, "model has more than ",
               limits::kMaxGraphNodes, " nodes, the limit on one model (refused before parsing)");
  KILN_REQUIRE(counter.values <= limits::kMaxGraphValues, limit_exceeded, "model declares more than ",
               limits::kMaxGraphValues, " initializers, inputs, outputs and value infos, the limit on one model "
               "(refused before parsing)");
  return Status::ok();
}

Result<std::shared_ptr<onnx::ModelProto>> parse_model(std::span<const uint8_t> bytes) {
  KILN_REQUIRE(!bytes.empty(), parse, "not an ONNX model: the input is empty (0 bytes)");
  KILN_TRY(check_model_size(bytes));
  auto model = std::make_shared<onnx::ModelProto>();
  google::protobuf::io::CodedInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(static_cast<int>(kOnnxMaxModelBytes - 1));
  stream.SetRecursionLimit(limits::kMaxNestingDepth);
  KILN_REQUIRE(model->ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage(), parse,
               "not an ONNX model: the protobuf data is truncated or malformed (", bytes.size(), " bytes)");
  KILN_REQUIRE(model->has_graph(), parse, "not an ONNX model: no graph in the file (", bytes.size(), " bytes)");
  KILN_REQUIRE(model->ir_version() >= 3, unsupported, "ONNX IR version ", model->ir_version(),
               " is not supported (kiln needs IR version 3 or newer)");
  return model;
}

Result<int64_t> default_opset(const onnx::ModelProto& model) {
  int64_t opset = -1;
  for (const auto& entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx") opset = entry.version();
  KILN_REQUIRE(opset >= 0, unsupported, "the model imports no version of the default ONNX opset (only ",
               model.opset_import_size() ? model.opset_import(0).domain() : std::string("nothing"), ")");
  KILN_REQUIRE(opset >= kOnnxMinOpset && opset <= kOnnxMaxOpset, unsupported, "opset ", opset,
               " is not supported (kiln imports opsets ", kOnnxMinOpset, " to ", kOnnxMaxOpset, ")");
  return opset;
}

// Names and string attributes longer than limits::kMaxStringBytes are refused.
Status check_string(const std::string& s, const char* what) {
  KILN_REQUIRE(s.size() <= limits::kMaxStringBytes, limit_exceeded, what, " '", s.substr(0, 32), "...' is ",
               s.size(), " bytes, more than the limit of ", limits::kMaxStringBytes);
  return Status::ok();
}

Result<AttrValue> convert_attribute(const onnx::AttributeProto& a, const std::string& dir,
                                    const std::shared_ptr<const void>& keep) {
  KILN_TRY(check_string(a.name(), "attribute name"));
  KILN_TRY(check_string(a.s(), "string attribute"));
  for (const auto& s : a.strings()) KILN_TRY(check_string(s, "string attribute"));
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT: return AttrValue(a.f());
    case onnx::AttributeProto::INT: return AttrValue(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::STRING: return AttrValue(a.s());
    case onnx::AttributeProto::INTS: return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS: return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::STRINGS: return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto::TENSOR: {
      KILN_ASSIGN(t, onnx_detail::tensor_from_proto(a.t(), dir, keep));
      return AttrValue(std::move(t));
    }
    default:
      return make_error(ErrorCode::unsupported, "attribute '", a.name(),
                        "' is a graph, sparse tensor or type, which kiln does not support");
  }
}

class Importer {
 public:
  Importer(std::shared_ptr<onnx::ModelProto> model, std::string dir) : model_(std::move(model)), dir_(std::move(dir)) {}

  Result<Graph> run() {
    KILN_ASSIGN(opset, default_opset(*model_));
    opset_ = opset;
    const onnx::GraphProto& g = model_->graph();
    graph_.name = g.name();
    std::string producer = model_->producer_name();
    if (!model_->producer_version().empty()) producer += " " + model_->producer_version();
    graph_.source = {"onnx", producer, opset};

    KILN_TRY(import_initializers(g));
    KILN_TRY(import_inputs(g));
    for (int i = 0; i < g.node_size(); ++i) KILN_TRY(import_node(g.node(i), i));
    KILN_TRY(import_outputs(g));
    KILN_TRY(graph_verify(graph_));
    KILN_TRY(graph_sort(graph_));
    return std::move(graph_);
  }

 private:
  Status import_initializers(const onnx::GraphProto& g) {
    KILN_REQUIRE(g.sparse_initializer_size() == 0, unsupported, "sparse initializers are not supported");
    std::shared_ptr<const void> keep = model_;
    for (const auto& init : g.initializer()) {
      KILN_TRY(check_string(init.name(), "initializer name"));
      KILN_REQUIRE(!init.name().empty(), invalid_graph, "an initializer has no name");
      KILN_REQUIRE(graph_.find_value(init.name()) == kNoValue, invalid_graph, "duplicate initializer '", init.name(), "'");
      KILN_ASSIGN(t, onnx_detail::tensor_from_proto(init, dir_, keep));
      const ValueId id = graph_.add_value(init.name(), ValueType::of(t.dtype(), sym_shape_from(t.shape())));
      graph_.initializers[id] = std::move(t);
    }
    return Status::ok();
  }

  Status import_inputs(const onnx::GraphProto& g) {
    for (const auto& info : g.input()) {
      KILN_TRY(check_string(info.name(), "graph input name"));
      const ValueId existing = graph_.find_value(info.name());
      if (existing != kNoValue && graph_.is_initializer(existing)) continue;  // IR < 4 lists weights as inputs
      KILN_REQUIRE(existing == kNoValue, invalid_graph, "duplicate graph input '", info.name(), "'");
      KILN_ASSIGN(type, onnx_detail::value_type_from_proto(info));
      graph_.inputs.push_back(graph_.add_value(info.name(), std::move(type)));
    }
    return Status::ok();
  }

  Status import_outputs(const onnx::GraphProto& g) {
    for (const auto& info : g.output()) {
      const ValueId id = graph_.find_value(info.name());
      KILN_REQUIRE(id != kNoValue, invalid_graph, "graph output '", info.name(), "' is not produced by any node");
      if (graph_.value(id).producer >= 0 && info.type().has_tensor_type()) {
        KILN_ASSIGN(type, onnx_detail::value_type_from_proto(info));
        graph_.value(id).type = type;  // declared; shape inference checks it against what it computes
      }
      graph_.outputs.push_back(id);
    }
    return Status::ok();
  }

  std::string unique_node_name(const onnx::NodeProto& proto, int index) {
    if (!proto.name().empty()) return proto.name();
    std::string name = proto.op_type() + "_" + std::to_string(index);
    while (node_names_.count(name)) name += "_";
    return name;
  }

  // Inputs may name values produced later in the file (kiln sorts afterwards), so unknown
  // names get a value now and verification reports those that nobody produces.
  ValueId value_for(const std::string& name) {
    const ValueId id = graph_.find_value(name);
    return id != kNoValue ? id : graph_.add_value(name, ValueType::unranked(DType::f32));
  }

  Status import_node(const onnx::NodeProto& proto, int index) {
    KILN_TRY(check_string(proto.name(), "node name"));
    KILN_TRY(check_string(proto.op_type(), "op type"));
    for (const auto& name : proto.input()) KILN_TRY(check_string(name, "node input name"));
    for (const auto& name : proto.output()) KILN_TRY(check_string(name, "node output name"));
    Node node;
    node.name = unique_node_name(proto, index);
    KILN_REQUIRE(node_names_.insert(node.name).second, invalid_graph, "duplicate node name '", node.name, "'");
    std::shared_ptr<const void> keep = model_;
    for (const auto& a : proto.attribute()) {
      auto value = convert_attribute(a, dir_, keep);
      if (!value) return value.status().with_context("node '" + node.name + "' (" + proto.op_type() + "): ");
      node.attrs.set(a.name(), std::move(*value));
    }
    for (const auto& in : proto.input()) node.inputs.push_back(in.empty() ? kNoValue : value_for(in));
    for (const auto& out : proto.output()) {
      if (out.empty()) {
        node.outputs.push_back(kNoValue);
        continue;
      }
      const ValueId id = value_for(out);
      KILN_REQUIRE(!graph_.is_initializer(id), invalid_graph, "node '", node.name, "' writes '", out,
                   "', which is an initializer");
      KILN_REQUIRE(produced_.insert(id).second, invalid_graph, "value '", out, "' is produced by more than one node (again by node '",
                   node.name, "')");
      node.outputs.push_back(id);
    }
    NodeImportContext ctx{graph_, opset_, proto, nullptr};
    ctx.add_constant = [&](const std::string& suffix, Tensor value) {
      std::string name = node.name + "/" + suffix;
      while (graph_.find_value(name) != kNoValue) name += "_";
      const ValueId id = graph_.add_value(name, ValueType::of(value.dtype(), sym_shape_from(value.shape())));
      graph_.initializers[id] = std::move(value);
      return id;
    };
    KILN_TRY(onnx_detail::import_node(ctx, node));
    graph_.add_node(std::move(node));
    return Status::ok();
  }

  std::shared_ptr<onnx::ModelProto> model_;
  std::string dir_;
  int64_t opset_ = 0;
  Graph graph_;
  std::unordered_set<std::string> node_names_;
  std::unordered_set<ValueId> produced_;
};

Status run_checker(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    return make_error(ErrorCode::invalid_graph, "the model fails ONNX's checks: ", msg);
  }
  return Status::ok();
}

Result<Graph> import_model(std::span<const uint8_t> bytes, const OnnxImportOptions& options) {
  KILN_ASSIGN(model, parse_model(bytes));
  Importer importer(model, options.external_data_dir);
  KILN_ASSIGN(graph, importer.run());
  if (options.run_checker) KILN_TRY(run_checker(*model));
  return graph;
}

}  // namespace

Result<Graph> onnx_import_bytes(std::span<const uint8_t> bytes, const OnnxImportOptions& options) {
  return import_model(bytes, options);
}

Result<Graph> onnx_import_file(const std::string& path, const OnnxImportOptions& options) {
  KILN_ASSIGN(bytes, read_file(path, kOnnxMaxModelBytes));
  OnnxImportOptions opts = options;
  if (opts.external_data_dir.empty()) opts.external_data_dir = std::filesystem::path(path).parent_path().string();
  auto graph = import_model(bytes, opts);
  if (!graph) return graph.status().with_context(path + ": ");
  return graph;
}

Result<Tensor> onnx_read_tensor_file(const std::string& path) {
  KILN_ASSIGN(bytes, read_file(path, kOnnxMaxModelBytes));
  onnx::TensorProto proto;
  KILN_REQUIRE(proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), parse, path,
               ": not a serialized ONNX TensorProto");
  auto t = onnx_detail::tensor_from_proto(proto, std::filesystem::path(path).parent_path().string(), nullptr);
  if (!t) return t.status().with_context(path + ": ");
  return t;
}

}  // namespace kiln
