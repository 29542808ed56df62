#include "service/runtime/serve/v2_protocol.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "kernels/core/limits.h"

namespace kiln::serve {
namespace {

using json = nlohmann::json;

struct DatatypeName {
  DType dtype;
  std::string_view name;
};
constexpr std::array<DatatypeName, 8> kDatatypes{{{DType::f32, "FP32"},
                                                  {DType::f16, "FP16"},
                                                  {DType::bf16, "BF16"},
                                                  {DType::i8, "INT8"},
                                                  {DType::u8, "UINT8"},
                                                  {DType::i32, "INT32"},
                                                  {DType::i64, "INT64"},
                                                  {DType::boolean, "BOOL"}}};

// Strings as JSON; invalid UTF-8 (never produced by the parser, possible in a plan's names) is
// replaced instead of throwing.
std::string quoted(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A value for an error message: scalars as JSON, containers by kind only (printing a hostile,
// deeply nested value would recurse once per level).
std::string brief(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Counts the leaves of a nested `data` array (numbers or booleans), refusing nesting deeper than
// the rank allows and counts beyond the limits before anything is allocated.
Status data_count(const json& v, int depth, int max_depth, int64_t& count, const std::string& where) {
  if (!v.is_array()) {
    ++count;
    return Status::ok();
  }
  KILN_REQUIRE(depth < max_depth, invalid_argument, where, "'data' is nested deeper than the shape's rank");
  for (const json& e : v) {
    KILN_TRY(data_count(e, depth + 1, max_depth, count, where));
    KILN_REQUIRE(count <= limits::kMaxTensorElements, limit_exceeded, where, "'data' has more than ",
                 limits::kMaxTensorElements, " elements");
  }
  return Status::ok();
}

template <typename T>
Status element_read(const json& v, T& dst) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return make_error(ErrorCode::invalid_argument, "expects true/false, got ", brief(v));
    dst = v.get<bool>();
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    if (!v.is_number()) return make_error(ErrorCode::invalid_argument, "expects numbers, got ", brief(v));
    const double d = v.get<double>();
    // Beyond FLT_MAX + half an ulp the value would round to infinity (and the cast is undefined).
    if (!(std::abs(d) < 0x1.ffffffp127))
      return make_error(ErrorCode::invalid_argument, "value ", brief(v), " is out of range");
    const float f = static_cast<float>(d);
    if constexpr (std::is_same_v<T, float>) dst = f;
    else dst = T(f);
  } else {
    if (!v.is_number_integer()) return make_error(ErrorCode::invalid_argument, "expects integers, got ", brief(v));
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        return make_error(ErrorCode::invalid_argument, "value ", u, " is out of range");
      dst = static_cast<T>(u);
    } else {
      const int64_t i = v.get<int64_t>();
      if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) || i > static_cast<int64_t>(std::numeric_limits<T>::max()))
        return make_error(ErrorCode::invalid_argument, "value ", i, " is out of range");
      dst = static_cast<T>(i);
    }
  }
  return Status::ok();
}

// Writes the leaves of `v` in row-major order into dst[next...].
template <typename T>
Status data_fill(const json& v, T* dst, int64_t& next) {
  if (v.is_array()) {
    for (const json& e : v) KILN_TRY(data_fill(e, dst, next));
    return Status::ok();
  }
  return element_read(v, dst[next++]);
}

Result<std::pair<std::string, Tensor>> tensor_parse(const json& in, size_t index) {
  std::string where = "inputs[" + std::to_string(index) + "]: ";
  KILN_REQUIRE(in.is_object(), invalid_argument, where, "expected an object {name, shape, datatype, data}");
  const auto name = in.find("name");
  KILN_REQUIRE(name != in.end() && name->is_string(), invalid_argument, where, "'name' is missing or not a string");
  where = "input '" + name->get<std::string>() + "': ";
  const auto dt = in.find("datatype");
  KILN_REQUIRE(dt != in.end() && dt->is_string(), invalid_argument, where, "'datatype' is missing or not a string");
  const std::optional<DType> dtype = v2_datatype_from_name(dt->get<std::string>());
  KILN_REQUIRE(dtype, invalid_argument, where, "unknown datatype '", dt->get<std::string>(),
               "' (expected FP32, FP16, BF16, INT8, UINT8, INT32, INT64 or BOOL)");
  const auto shape_it = in.find("shape");
  KILN_REQUIRE(shape_it != in.end() && shape_it->is_array(), invalid_argument, where, "'shape' is missing or not an array");
  KILN_REQUIRE(static_cast<int64_t>(shape_it->size()) <= limits::kMaxRank, limit_exceeded, where, "'shape' has rank ",
               shape_it->size(), ", more than the limit ", limits::kMaxRank);
  Shape shape;
  int64_t numel = 1;
  for (const json& d : *shape_it) {
    KILN_REQUIRE(d.is_number_integer() && d.get<int64_t>() >= 0, invalid_argument, where,
                 "'shape' must hold non-negative integers, got ", brief(d));
    const int64_t dim = d.get<int64_t>();
    KILN_REQUIRE(dim <= limits::kMaxTensorElements && (dim == 0 || numel <= limits::kMaxTensorElements / dim), limit_exceeded,
                 where, "'shape' has more than ", limits::kMaxTensorElements, " elements");
    numel *= dim;
    shape.push_back(dim);
  }
  const auto data = in.find("data");
  KILN_REQUIRE(data != in.end(), invalid_argument, where,
               "'data' is missing (the binary tensor data extension is not supported)");
  KILN_REQUIRE(data->is_array(), invalid_argument, where, "'data' must be an array");
  int64_t count = 0;
  for (const json& e : *data) KILN_TRY(data_count(e, 1, std::max<int>(1, static_cast<int>(shape.size())), count, where));
  KILN_REQUIRE(count == numel, shape_mismatch, where, "'data' has ", count, " elements but shape ",
               shape_to_string(shape), " needs ", numel);
  Tensor t = Tensor::zeros(*dtype, shape);
  Status filled = visit_dtype(*dtype, [&]<typename T>() -> Status {
    int64_t next = 0;
    return data_fill<T>(*data, t.data<T>(), next);
  });
  if (!filled) return filled.with_context(where + "datatype " + std::string(v2_datatype_name(*dtype)) + " ");
  return std::pair<std::string, Tensor>{name->get<std::string>(), std::move(t)};
}

template <typename T>
void number_append(std::string& out, T v) {
  std::array<char, 64> buf{};
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const float f = static_cast<float>(v);
    if (!std::isfinite(f)) {
      out += "null";
      return;
    }
    if (f == 0 && std::signbit(f)) {  // "-0" would read back as the integer 0
      out += "-0.0";
      return;
    }
    const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), f);
    out.append(buf.data(), r.ptr);
  } else {
    const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), static_cast<int64_t>(v));
    out.append(buf.data(), r.ptr);
  }
}

void tensor_append(std::string& out, std::string_view name, const Tensor& t) {
  out += "{\"name\":";
  out += quoted(name);
  out += ",\"shape\":[";
  for (int64_t i = 0; i < t.rank(); ++i) {
    if (i) out += ',';
    out += std::to_string(t.dim(i));
  }
  out += "],\"datatype\":\"";
  out += v2_datatype_name(t.dtype());
  out += "\",\"data\":[";
  visit_dtype(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (i) out += ',';
      number_append(out, p[i]);
    }
  });
  out += "]}";
}

void tensors_append(std::string& out, const NamedTensors& tensors) {
  out += '[';
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i) out += ',';
    tensor_append(out, tensors[i].first, tensors[i].second);
  }
  out += ']';
}

json metadata_json(const std::vector<V2TensorMetadata>& tensors) {
  json list = json::array();
  for (const V2TensorMetadata& t : tensors)
    list.push_back({{"name", t.name}, {"datatype", std::string(v2_datatype_name(t.dtype))}, {"shape", t.shape}});
  return list;
}

}  // namespace

std::string_view v2_datatype_name(DType dtype) {
  for (const DatatypeName& d : kDatatypes)
    if (d.dtype == dtype) return d.name;
  return "FP32";  // unreachable: kDatatypes covers every DType
}

std::optional<DType> v2_datatype_from_name(std::string_view name) {
  for (const DatatypeName& d : kDatatypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

Result<V2InferRequest> v2_infer_request_parse(std::string_view body) {
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::parse, "malformed JSON in the request body: ", e.what());
  }
  KILN_REQUIRE(doc.is_object(), invalid_argument, "the request body must be a JSON object with 'inputs'");
  V2InferRequest request;
  if (const auto id = doc.find("id"); id != doc.end()) {
    KILN_REQUIRE(id->is_string(), invalid_argument, "'id' must be a string");
    request.id = id->get<std::string>();
  }
  const auto inputs = doc.find("inputs");
  KILN_REQUIRE(inputs != doc.end() && inputs->is_array(), invalid_argument, "'inputs' is missing or not an array");
  std::set<std::string> seen;
  for (size_t i = 0; i < inputs->size(); ++i) {
    KILN_ASSIGN(named, tensor_parse((*inputs)[i], i));
    KILN_REQUIRE(seen.insert(named.first).second, invalid_argument, "input '", named.first, "' is given twice");
    request.inputs.push_back(std::move(named));
  }
  if (const auto outputs = doc.find("outputs"); outputs != doc.end()) {
    KILN_REQUIRE(outputs->is_array(), invalid_argument, "'outputs' must be an array of {\"name\": ...}");
    for (const json& o : *outputs) {
      KILN_REQUIRE(o.is_object() && o.contains("name") && o["name"].is_string(), invalid_argument,
                   "'outputs' entries must be objects with a string 'name', got ", brief(o));
      request.outputs.push_back(o["name"].get<std::string>());
    }
  }
  return request;
}

std::string v2_infer_request_write(std::string_view id, const NamedTensors& inputs) {
  std::string out = "{";
  if (!id.empty()) out += "\"id\":" + quoted(id) + ",";
  out += "\"inputs\":";
  tensors_append(out, inputs);
  out += '}';
  return out;
}

std::string v2_infer_response_write(std::string_view model, std::string_view id, const NamedTensors& outputs) {
  std::string out = "{\"model_name\":" + quoted(model) + ",\"model_version\":\"1\",";
  if (!id.empty()) out += "\"id\":" + quoted(id) + ",";
  out += "\"outputs\":";
  tensors_append(out, outputs);
  out += '}';
  return out;
}

std::string v2_model_metadata_write(std::string_view model, const std::vector<V2TensorMetadata>& inputs,
                                    const std::vector<V2TensorMetadata>& outputs) {
  const json doc = {{"name", std::string(model)},
                    {"versions", {"1"}},
                    {"platform", "kiln"},
                    {"inputs", metadata_json(inputs)},
                    {"outputs", metadata_json(outputs)}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string v2_error_write(std::string_view message) {
  return "{\"error\":" + quoted(message) + "}";
}

}  // namespace kiln::serve
