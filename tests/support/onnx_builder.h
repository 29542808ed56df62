// Builds small ONNX models in tests (with ONNX's own protobuf classes), so bad-input tests can
// craft exactly the defect they need.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace kiln::test {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 13) {
    model_.set_ir_version(8);
    model_.set_producer_name("kiln-tests");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // dims: >= 0 known, -1 symbolic "batch".
  OnnxBuilder& input(const std::string& name, std::vector<int64_t> dims, int elem = onnx::TensorProto::FLOAT) {
    value_info(model_.mutable_graph()->add_input(), name, dims, elem);
    return *this;
  }
  OnnxBuilder& output(const std::string& name, std::vector<int64_t> dims, int elem = onnx::TensorProto::FLOAT) {
    value_info(model_.mutable_graph()->add_output(), name, dims, elem);
    return *this;
  }
  OnnxBuilder& initializer(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::initializer_list<std::string> inputs,
                        std::initializer_list<std::string> outputs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  static void int_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void ints_attr(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  onnx::ModelProto& model() { return model_; }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  static void value_info(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& dims, int elem) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0) dim->set_dim_value(d);
      else dim->set_dim_param("batch");
    }
  }
  onnx::ModelProto model_;
};

// A valid model: y = Relu(x + bias), x: [batch, 4].
inline OnnxBuilder relu_add_model() {
  OnnxBuilder b;
  b.input("x", {-1, 4}).output("y", {-1, 4}).initializer("bias", {4}, {1.0f, -2.0f, 0.5f, -0.5f});
  b.node("Add", {"x", "bias"}, {"sum"}, "add");
  b.node("Relu", {"sum"}, {"y"}, "relu");
  return b;
}

}  // namespace kiln::test
