#include "service/runtime/serve/model_signature.h"

#include <sstream>

#include "service/runtime/serve/v2_protocol.h"

namespace kiln::serve {
namespace {

Result<TensorSpec> spec_of(const std::string& name, const ValueType& type, const char* kind) {
  KILN_REQUIRE(type.rank_known && sym_shape_is_concrete(type.shape), invalid_argument, kind, " '", name, "' has shape ",
               type.rank_known ? sym_shape_to_string(type.shape) : std::string("(unknown rank)"),
               ": serving needs a plan compiled for fixed shapes (kiln compile --batch N)");
  return TensorSpec{name, type.dtype, sym_shape_concrete(type.shape)};
}

std::string names_of(const std::vector<TensorSpec>& specs) {
  std::ostringstream os;
  for (size_t i = 0; i < specs.size(); ++i) os << (i ? ", " : "") << "'" << specs[i].name << "'";
  return os.str();
}

bool leads_with(const TensorSpec& spec, int64_t batch) { return !spec.shape.empty() && spec.shape[0] == batch; }

}  // namespace

Result<ModelSignature> model_signature_of(const Plan& plan) {
  ModelSignature sig;
  for (const PlanInput& in : plan.inputs) {
    KILN_ASSIGN(spec, spec_of(in.name, in.type, "input"));
    sig.inputs.push_back(std::move(spec));
  }
  for (const auto& [slot, name] : plan.outputs) {
    KILN_REQUIRE(slot >= 0 && slot < static_cast<int>(plan.slot_types.size()), internal, "output '", name,
                 "' has no slot type");
    KILN_ASSIGN(spec, spec_of(name, plan.slot_types[static_cast<size_t>(slot)], "output"));
    sig.outputs.push_back(std::move(spec));
  }
  if (!sig.inputs.empty() && !sig.inputs[0].shape.empty() && sig.inputs[0].shape[0] >= 1) {
    const int64_t b = sig.inputs[0].shape[0];
    bool all = true;
    for (const TensorSpec& s : sig.inputs) all = all && leads_with(s, b);
    for (const TensorSpec& s : sig.outputs) all = all && leads_with(s, b);
    if (all) sig.batch = b;
  }
  return sig;
}

std::vector<int64_t> model_shape_public(const ModelSignature& signature, const TensorSpec& spec) {
  std::vector<int64_t> shape = spec.shape;
  if (signature.batch > 0 && !shape.empty()) shape[0] = -1;
  return shape;
}

Result<MatchedInputs> model_inputs_match(const ModelSignature& signature, NamedTensors inputs) {
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const TensorSpec& s : signature.inputs) known = known || s.name == name;
    KILN_REQUIRE(known, invalid_argument, "unknown input '", name, "' (the model's inputs are ",
                 names_of(signature.inputs), ")");
  }
  MatchedInputs matched;
  for (const TensorSpec& spec : signature.inputs) {
    Tensor* found = nullptr;
    for (auto& [name, t] : inputs)
      if (name == spec.name) found = &t;
    KILN_REQUIRE(found, invalid_argument, "missing input '", spec.name, "' (the model's inputs are ",
                 names_of(signature.inputs), ")");
    const Tensor& t = *found;
    KILN_REQUIRE(t.dtype() == spec.dtype, invalid_argument, "input '", spec.name, "' has datatype ",
                 v2_datatype_name(t.dtype()), ", the model expects ", v2_datatype_name(spec.dtype));
    const std::vector<int64_t> expected = model_shape_public(signature, spec);
    bool fits = t.rank() == static_cast<int64_t>(expected.size());
    for (size_t d = 0; fits && d < expected.size(); ++d) fits = expected[d] < 0 || expected[d] == t.shape()[d];
    KILN_REQUIRE(fits, shape_mismatch, "input '", spec.name, "' has shape ", shape_to_string(t.shape()),
                 ", the model expects ", shape_to_string(expected), signature.batch > 0 ? " (-1: any number of samples)" : "");
    const int64_t samples = signature.batch > 0 ? t.dim(0) : 1;
    KILN_REQUIRE(samples >= 1, shape_mismatch, "input '", spec.name, "' has no samples (shape ", shape_to_string(t.shape()), ")");
    KILN_REQUIRE(matched.samples == 0 || matched.samples == samples, shape_mismatch, "input '", spec.name, "' has ",
                 samples, " samples but '", signature.inputs[0].name, "' has ", matched.samples,
                 " (every input needs the same first dim)");
    matched.samples = samples;
    matched.tensors.push_back(t);
  }
  if (matched.samples == 0) matched.samples = 1;  // a model without inputs
  return matched;
}

Result<std::vector<size_t>> model_outputs_select(const ModelSignature& signature, const std::vector<std::string>& names) {
  std::vector<size_t> picked;
  if (names.empty()) {
    for (size_t i = 0; i < signature.outputs.size(); ++i) picked.push_back(i);
    return picked;
  }
  for (const std::string& name : names) {
    size_t i = 0;
    while (i < signature.outputs.size() && signature.outputs[i].name != name) ++i;
    KILN_REQUIRE(i < signature.outputs.size(), invalid_argument, "unknown output '", name, "' (the model's outputs are ",
                 names_of(signature.outputs), ")");
    picked.push_back(i);
  }
  return picked;
}

}  // namespace kiln::serve
