#include "compilers/onnx/tensor_proto.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "kernels/core/limits.h"

namespace kiln::onnx_detail {
namespace {

const char* onnx_type_name(int32_t elem_type) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT: return "FLOAT";
    case onnx::TensorProto::UINT8: return "UINT8";
    case onnx::TensorProto::INT8: return "INT8";
    case onnx::TensorProto::UINT16: return "UINT16";
    case onnx::TensorProto::INT16: return "INT16";
    case onnx::TensorProto::INT32: return "INT32";
    case onnx::TensorProto::INT64: return "INT64";
    case onnx::TensorProto::STRING: return "STRING";
    case onnx::TensorProto::BOOL: return "BOOL";
    case onnx::TensorProto::FLOAT16: return "FLOAT16";
    case onnx::TensorProto::DOUBLE: return "DOUBLE";
    case onnx::TensorProto::UINT32: return "UINT32";
    case onnx::TensorProto::UINT64: return "UINT64";
    case onnx::TensorProto::COMPLEX64: return "COMPLEX64";
    case onnx::TensorProto::COMPLEX128: return "COMPLEX128";
    case onnx::TensorProto::BFLOAT16: return "BFLOAT16";
    default: return "UNDEFINED";
  }
}

struct MappedFile {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~MappedFile() {
    if (data != MAP_FAILED) munmap(data, size);
  }
};

Result<std::shared_ptr<MappedFile>> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_REQUIRE(fd >= 0, io, "cannot open external data file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::io, "external data '", path, "' is not a regular file");
  }
  auto mapped = std::make_shared<MappedFile>();
  mapped->size = static_cast<size_t>(st.st_size);
  if (mapped->size > 0) mapped->data = ::mmap(nullptr, mapped->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  KILN_REQUIRE(mapped->size == 0 || mapped->data != MAP_FAILED, io, "cannot map external data file '", path, "'");
  return mapped;
}

Result<Tensor> external_tensor(const onnx::TensorProto& proto, DType dtype, Shape shape, const std::string& dir) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      else if (entry.key() == "offset") offset = std::stoll(entry.value());
      else if (entry.key() == "length") length = std::stoll(entry.value());
    } catch (const std::exception&) {
      return make_error(ErrorCode::parse, "tensor '", proto.name(), "': external data ", entry.key(), " '",
                        entry.value(), "' is not a number");
    }
  }
  KILN_REQUIRE(!location.empty(), parse, "tensor '", proto.name(), "' has external data without a location");
  const std::filesystem::path rel(location);
  bool escapes = rel.is_absolute();
  for (const auto& part : rel) escapes = escapes || part == "..";
  KILN_REQUIRE(!escapes, invalid_argument, "tensor '", proto.name(), "': external data location '", location,
               "' must be a relative path inside the model's folder");
  const std::string path = (std::filesystem::path(dir.empty() ? "." : dir) / rel).string();
  auto mapped = map_file(path);
  if (!mapped) return mapped.status();
  const int64_t nbytes = shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype));
  KILN_REQUIRE(offset >= 0 && (length < 0 || length == nbytes), parse, "tensor '", proto.name(), "': external data length ",
               length, " does not match its shape ", shape_to_string(shape), " (", nbytes, " bytes)");
  KILN_REQUIRE(static_cast<uint64_t>(offset) + static_cast<uint64_t>(nbytes) <= (*mapped)->size, parse, "tensor '",
               proto.name(), "': external data needs bytes ", offset, "..", offset + nbytes, " of '", path,
               "', which has only ", (*mapped)->size);
  const auto* base = static_cast<const uint8_t*>((*mapped)->data);
  std::shared_ptr<const void> keep = *mapped;
  return Tensor::borrow(dtype, std::move(shape), base ? base + offset : nullptr, keep);
}

template <typename Dst, typename Field, typename Convert>
Status copy_typed(const Field& field, Tensor& t, const std::string& name, Convert convert) {
  KILN_REQUIRE(field.size() == t.numel(), parse, "tensor '", name, "' has ", field.size(), " values for shape ",
               shape_to_string(t.shape()));
  Dst* dst = static_cast<Dst*>(t.raw());
  for (int i = 0; i < field.size(); ++i) dst[i] = convert(field.Get(i));
  return Status::ok();
}

}  // namespace

Result<DType> dtype_from_onnx(int32_t elem_type, const std::string& what) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::UINT8: return DType::u8;
    case onnx::TensorProto::INT8: return DType::i8;
    case onnx::TensorProto::INT32: return DType::i32;
    case onnx::TensorProto::INT64: return DType::i64;
    case onnx::TensorProto::BOOL: return DType::boolean;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    default:
      return make_error(ErrorCode::unsupported, what, " has element type ", onnx_type_name(elem_type),
                        ", which kiln does not support");
  }
}

Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& external_dir,
                                 const std::shared_ptr<const void>& keep_alive) {
  const std::string what = "tensor '" + proto.name() + "'";
  auto dtype = dtype_from_onnx(proto.data_type(), what);
  if (!dtype) return dtype.status();
  KILN_REQUIRE(!proto.has_segment(), unsupported, what, " is segmented, which kiln does not support");
  KILN_REQUIRE(proto.dims_size() <= limits::kMaxRank, limit_exceeded, what, " has rank ", proto.dims_size(),
               ", more than the limit of ", limits::kMaxRank);
  // Checked on the declared dims alone, before any data is looked at or allocated.
  Shape shape(proto.dims().begin(), proto.dims().end());
  int64_t numel = 1;
  for (int64_t d : shape) {
    KILN_REQUIRE(d >= 0, parse, what, " has a negative dimension ", d);
    KILN_REQUIRE(d <= limits::kMaxTensorElements && (d == 0 || numel <= limits::kMaxTensorElements / d),
                 limit_exceeded, what, " ", shape_to_string(shape), " has more than the limit of ",
                 limits::kMaxTensorElements, " elements (2^40)");
    numel *= d;
  }
  const size_t elem = dtype_size(*dtype);
  KILN_REQUIRE(numel <= limits::kMaxTensorBytes / static_cast<int64_t>(elem), limit_exceeded, what, " ",
               shape_to_string(shape), " needs ", numel, " x ", elem, " bytes, more than the limit of ",
               limits::kMaxTensorBytes, " bytes (64 GiB) on one tensor");
  const size_t nbytes = static_cast<size_t>(numel) * elem;

  if (proto.data_location() == onnx::TensorProto::EXTERNAL)
    return external_tensor(proto, *dtype, std::move(shape), external_dir);

  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    KILN_REQUIRE(raw.size() == nbytes, parse, what, " has ", raw.size(), " bytes of data for shape ",
                 shape_to_string(shape), " (", nbytes, " expected)");
    if (keep_alive) return Tensor::borrow(*dtype, std::move(shape), raw.data(), keep_alive);
    Tensor t = Tensor::zeros(*dtype, std::move(shape));
    if (nbytes) std::memcpy(t.raw(), raw.data(), nbytes);
    return t;
  }

  int values = 0;
  switch (*dtype) {
    case DType::f32: values = proto.float_data_size(); break;
    case DType::i64: values = proto.int64_data_size(); break;
    default: values = proto.int32_data_size(); break;
  }
  KILN_REQUIRE(values == numel, parse, what, " has ", values, " values for shape ", shape_to_string(shape));
  Tensor t = Tensor::zeros(*dtype, std::move(shape));
  Status status;
  switch (*dtype) {
    case DType::f32: status = copy_typed<float>(proto.float_data(), t, proto.name(), [](float v) { return v; }); break;
    case DType::i64: status = copy_typed<int64_t>(proto.int64_data(), t, proto.name(), [](int64_t v) { return v; }); break;
    case DType::i32: status = copy_typed<int32_t>(proto.int32_data(), t, proto.name(), [](int32_t v) { return v; }); break;
    case DType::i8: status = copy_typed<int8_t>(proto.int32_data(), t, proto.name(), [](int32_t v) { return static_cast<int8_t>(v); }); break;
    case DType::u8: status = copy_typed<uint8_t>(proto.int32_data(), t, proto.name(), [](int32_t v) { return static_cast<uint8_t>(v); }); break;
    case DType::boolean: status = copy_typed<bool>(proto.int32_data(), t, proto.name(), [](int32_t v) { return v != 0; }); break;
    case DType::f16:
    case DType::bf16:
      status = copy_typed<uint16_t>(proto.int32_data(), t, proto.name(), [](int32_t v) { return static_cast<uint16_t>(v); });
      break;
  }
  if (!status) return status;
  return t;
}

Result<ValueType> value_type_from_proto(const onnx::ValueInfoProto& info) {
  const std::string what = "value '" + info.name() + "'";
  KILN_REQUIRE(info.type().has_tensor_type(), unsupported, what,
               " is not a tensor (sequence, map and optional values are not supported)");
  const auto& tt = info.type().tensor_type();
  auto dtype = dtype_from_onnx(tt.elem_type(), what);
  if (!dtype) return dtype.status();
  if (!tt.has_shape()) return ValueType::unranked(*dtype);
  KILN_REQUIRE(tt.shape().dim_size() <= limits::kMaxRank, limit_exceeded, what, " has rank ",
               tt.shape().dim_size(), ", more than the limit of ", limits::kMaxRank);
  SymShape shape;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      KILN_REQUIRE(d.dim_value() >= 0, parse, what, " has a negative dimension ", d.dim_value());
      KILN_REQUIRE(d.dim_value() <= limits::kMaxTensorElements, limit_exceeded, what, " has dimension ",
                   d.dim_value(), ", more than the limit of ", limits::kMaxTensorElements, " (2^40)");
      shape.push_back(Dim(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      shape.push_back(Dim::named(d.dim_param()));
    } else {
      shape.push_back(Dim::unknown());
    }
  }
  return ValueType::of(*dtype, std::move(shape));
}

int32_t dtype_to_onnx(DType dtype) {
  switch (dtype) {
    case DType::f32: return onnx::TensorProto::FLOAT;
    case DType::f16: return onnx::TensorProto::FLOAT16;
    case DType::bf16: return onnx::TensorProto::BFLOAT16;
    case DType::i8: return onnx::TensorProto::INT8;
    case DType::u8: return onnx::TensorProto::UINT8;
    case DType::i32: return onnx::TensorProto::INT32;
    case DType::i64: return onnx::TensorProto::INT64;
    case DType::boolean: return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto& proto) {
  proto.set_name(name);
  proto.set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.shape()) proto.add_dims(d);
  // kiln's bool is one byte holding 0 or 1, as ONNX's raw bool data; x86 and ARM are little-endian.
  if (t.nbytes() != 0) proto.set_raw_data(t.raw(), t.nbytes());
}

void value_type_to_proto(const ValueType& type, const std::string& name, onnx::ValueInfoProto& info) {
  info.set_name(name);
  auto* tt = info.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dtype_to_onnx(type.dtype));
  if (!type.rank_known) return;
  auto* shape = tt->mutable_shape();
  for (const Dim& d : type.shape) {
    auto* dim = shape->add_dim();
    if (d.known()) dim->set_dim_value(d.value);
    else if (!d.symbol.empty()) dim->set_dim_param(d.symbol);
  }
}

}  // namespace kiln::onnx_detail
