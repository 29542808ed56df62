#include "kernels/plan_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/core/limits.h"
#include "kernels/device/mixed_precision.h"
#include "kernels/device/plan_runner.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
constexpr uint64_t kAlign = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t metadata_offset;
  uint64_t metadata_bytes;
  uint64_t weights_offset;
  uint64_t weights_bytes;
  uint32_t metadata_crc;
  uint32_t weights_crc;
  uint32_t padding;
  uint32_t header_crc;  // over the bytes before it
};
static_assert(sizeof(Header) == 64);

uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

uint32_t crc(const void* data, uint64_t n) {
  return static_cast<uint32_t>(crc32_z(0L, static_cast<const Bytef*>(data), static_cast<z_size_t>(n)));
}

// The same CRC-32 over large weights, in chunks on up to 4 threads joined with crc32_combine:
// the check is most of a ResNet-50 load (100 MB, ~40 ms on one core).
uint32_t crc_parallel(const void* data, uint64_t n) {
  constexpr uint64_t kChunk = 16ull << 20;
  const uint64_t chunks = std::min<uint64_t>(4, std::max<uint64_t>(1, std::thread::hardware_concurrency()));
  if (n < 2 * kChunk || chunks < 2) return crc(data, n);
  const auto* bytes = static_cast<const uint8_t*>(data);
  const uint64_t part = n / chunks;
  std::vector<uint32_t> parts(chunks);
  std::vector<std::thread> workers;
  for (uint64_t i = 1; i < chunks; ++i)
    workers.emplace_back([&, i] { parts[i] = crc(bytes + i * part, i + 1 == chunks ? n - i * part : part); });
  parts[0] = crc(bytes, part);
  for (std::thread& t : workers) t.join();
  uLong total = parts[0];
  for (uint64_t i = 1; i < chunks; ++i)
    total = crc32_combine(total, parts[i], static_cast<z_off_t>(i + 1 == chunks ? n - i * part : part));
  return static_cast<uint32_t>(total);
}

// Appends a tensor's bytes to the weights blob and returns its JSON reference.
json add_tensor(std::string& blob, const Tensor& t) {
  const uint64_t offset = align_up(blob.size());
  blob.resize(offset, '\0');
  blob.append(static_cast<const char*>(t.raw()), t.nbytes());
  return {{"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"offset", offset}, {"bytes", t.nbytes()}};
}

json attrs_to_json(const Attrs& attrs, std::string& blob) {
  json j = json::object();
  for (const auto& entry : attrs.all()) {
    const std::string& name = entry.first;  // not a structured binding: lambdas capture it (clang 14)
    const auto& value = entry.second;
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, int64_t>) j[name] = {{"i", v}};
          else if constexpr (std::is_same_v<V, float>) j[name] = {{"f", v}};
          else if constexpr (std::is_same_v<V, std::string>) j[name] = {{"s", v}};
          else if constexpr (std::is_same_v<V, std::vector<int64_t>>) j[name] = {{"ints", v}};
          else if constexpr (std::is_same_v<V, std::vector<float>>) j[name] = {{"floats", v}};
          else if constexpr (std::is_same_v<V, std::vector<std::string>>) j[name] = {{"strings", v}};
          else j[name] = {{"tensor", add_tensor(blob, v)}};
        },
        value);
  }
  return j;
}

json type_to_json(const ValueType& t) {
  json shape = json::array();
  for (const Dim& d : t.shape) shape.push_back(d.known() ? json(d.value) : json(d.symbol.empty() ? "?" : d.symbol));
  return {{"dtype", dtype_name(t.dtype)}, {"rank_known", t.rank_known}, {"shape", shape}};
}

// ---- reading ----

// The deepest nesting of arrays and objects in JSON text (brackets inside strings do not count);
// checked before parsing so that no document makes the parser or the destructor recurse deeply.
int json_depth(const uint8_t* p, const uint8_t* end) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (; p < end; ++p) {
    if (in_string) {
      if (*p == '\\' && p + 1 < end) ++p;
      else if (*p == '"') in_string = false;
    } else if (*p == '"') {
      in_string = true;
    } else if (*p == '[' || *p == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (*p == ']' || *p == '}') {
      --depth;
    }
  }
  return deepest;
}

struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) munmap(data, size);
  }
};

// Numbers are read through these rather than json::get<int>() and the like, which cast a float or
// an out-of-range integer with undefined behaviour (1e300 as int) or silently wrap it.
Result<int64_t> json_int(const json& j, int64_t lo, int64_t hi, const char* what) {
  KILN_REQUIRE(j.is_number_integer(), parse, what, " must be an integer, not ", j.type_name());
  const bool in_range = j.is_number_unsigned() ? j.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                               : j.get<int64_t>() >= lo && j.get<int64_t>() <= hi;
  KILN_REQUIRE(in_range, parse, what, " ", j.dump(), " is outside [", lo, ", ", hi, "]");
  return j.get<int64_t>();
}

Result<float> json_float(const json& j, const char* what) {
  KILN_REQUIRE(j.is_number(), parse, what, " must be a number, not ", j.type_name());
  const double v = j.get<double>();
  KILN_REQUIRE(!(std::fabs(v) > std::numeric_limits<float>::max()), parse, what, " ", j.dump(),
               " is outside the range of float32");
  return static_cast<float>(v);
}

template <typename T, typename ReadOne>
Result<std::vector<T>> json_array(const json& j, const char* what, ReadOne read_one) {
  KILN_REQUIRE(j.is_array(), parse, what, " must be an array, not ", j.type_name());
  std::vector<T> out;
  out.reserve(j.size());
  for (const json& x : j) {
    KILN_ASSIGN(v, read_one(x));
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::vector<int64_t>> json_ints(const json& j, int64_t lo, int64_t hi, const char* what) {
  return json_array<int64_t>(j, what, [&](const json& x) { return json_int(x, lo, hi, what); });
}

class Reader {
 public:
  Reader(const uint8_t* weights, uint64_t weights_bytes, std::shared_ptr<const void> keep)
      : weights_(weights), weights_bytes_(weights_bytes), keep_(std::move(keep)) {}

  Result<DType> dtype(const json& j) const {
    KILN_REQUIRE(j.is_string(), parse, "dtype must be a string");
    auto dt = dtype_from_name(j.get<std::string>());
    KILN_REQUIRE(dt.has_value(), parse, "unknown dtype '", j.get<std::string>(), "'");
    return *dt;
  }

  Result<Tensor> tensor(const json& j) const {
    KILN_ASSIGN(dt, dtype(j.at("dtype")));
    KILN_REQUIRE(j.at("shape").is_array() && j.at("shape").size() <= static_cast<size_t>(limits::kMaxRank), parse,
                 "tensor shape must be an array of at most ", limits::kMaxRank, " dims");
    KILN_ASSIGN(shape, json_ints(j.at("shape"), 0, limits::kMaxTensorElements, "tensor dim"));
    int64_t numel = 1;
    for (int64_t d : shape) {
      KILN_REQUIRE(d >= 0 && d <= limits::kMaxTensorElements && (d == 0 || numel <= limits::kMaxTensorElements / d),
                   parse, "tensor shape ", shape_to_string(shape), " is invalid (negative, or more than ",
                   limits::kMaxTensorElements, " elements)");
      numel *= d;
    }
    KILN_ASSIGN(offset_value, json_int(j.at("offset"), 0, std::numeric_limits<int64_t>::max(), "tensor offset"));
    KILN_ASSIGN(bytes_value, json_int(j.at("bytes"), 0, limits::kMaxTensorBytes, "tensor bytes"));
    const auto offset = static_cast<uint64_t>(offset_value);
    const auto bytes = static_cast<uint64_t>(bytes_value);
    KILN_REQUIRE(bytes == static_cast<uint64_t>(numel) * dtype_size(dt), parse, "tensor of shape ",
                 shape_to_string(shape), " claims ", bytes, " bytes");
    KILN_REQUIRE(offset <= weights_bytes_ && bytes <= weights_bytes_ - offset, parse, "tensor at offset ", offset,
                 " (", bytes, " bytes) lies outside the weights section (", weights_bytes_, " bytes)");
    return Tensor::borrow(dt, shape, weights_ + offset, keep_);
  }

  Result<Attrs> attrs(const json& j) const {
    Attrs attrs;
    KILN_REQUIRE(j.is_object(), parse, "attributes must be an object");
    for (const auto& [name, v] : j.items()) {
      KILN_REQUIRE(v.is_object() && v.size() == 1, parse, "attribute '", name, "' is malformed");
      const std::string kind = v.begin().key();
      const json& x = v.begin().value();
      constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      if (kind == "i") {
        KILN_ASSIGN(v, json_int(x, lo, hi, "int attribute"));
        attrs.set(name, v);
      } else if (kind == "f") {
        KILN_ASSIGN(v, json_float(x, "float attribute"));
        attrs.set(name, v);
      } else if (kind == "s") {
        attrs.set(name, x.get<std::string>());
      } else if (kind == "ints") {
        KILN_ASSIGN(v, json_ints(x, lo, hi, "ints attribute"));
        attrs.set(name, std::move(v));
      } else if (kind == "floats") {
        auto v = json_array<float>(x, "floats attribute", [](const json& f) { return json_float(f, "floats attribute"); });
        if (!v) return v.status();
        attrs.set(name, std::move(*v));
      } else if (kind == "strings") {
        attrs.set(name, x.get<std::vector<std::string>>());
      } else if (kind == "tensor") {
        KILN_ASSIGN(t, tensor(x));
        attrs.set(name, t);
      } else {
        return make_error(ErrorCode::parse, "attribute '", name, "' has unknown kind '", kind, "'");
      }
    }
    return attrs;
  }

  Result<ValueType> type(const json& j) const {
    KILN_ASSIGN(dt, dtype(j.at("dtype")));
    ValueType t = ValueType::unranked(dt);
    t.rank_known = j.at("rank_known").get<bool>();
    KILN_REQUIRE(j.at("shape").size() <= static_cast<size_t>(limits::kMaxRank), parse, "a shape has ",
                 j.at("shape").size(), " dims, more than the limit of ", limits::kMaxRank);
    for (const json& d : j.at("shape")) {
      if (d.is_number_integer()) {
        KILN_ASSIGN(v, json_int(d, 0, limits::kMaxTensorElements, "dim"));
        t.shape.push_back(Dim(v));
      } else {
        const std::string s = d.get<std::string>();
        t.shape.push_back(s == "?" ? Dim::unknown() : Dim::named(s));
      }
    }
    return t;
  }

 private:
  const uint8_t* weights_;
  uint64_t weights_bytes_;
  std::shared_ptr<const void> keep_;
};

Result<int> slot_index(const json& j, int num_slots, bool allow_absent) {
  KILN_ASSIGN(s, json_int(j, -1, num_slots - 1, "slot"));
  KILN_REQUIRE((allow_absent && s == -1) || (s >= 0 && s < num_slots), parse, "slot ", s, " is out of range (",
               num_slots, " slots)");
  return static_cast<int>(s);
}

Result<Plan> plan_from_json(const json& m, const Reader& reader) {
  Plan plan;
  KILN_ASSIGN(num_slots, json_int(m.at("num_slots"), 0, limits::kMaxGraphValues, "slot count"));
  plan.num_slots = static_cast<int>(num_slots);
  KILN_REQUIRE(m.at("steps").size() <= static_cast<size_t>(limits::kMaxGraphNodes), limit_exceeded, "the plan has ",
               m.at("steps").size(), " steps, more than the limit of ", limits::kMaxGraphNodes);
  for (const json& t : m.at("slot_types")) {
    KILN_ASSIGN(type, reader.type(t));
    plan.slot_types.push_back(std::move(type));
  }
  KILN_REQUIRE(static_cast<int>(plan.slot_types.size()) == plan.num_slots, parse, "slot types do not match the slot count");
  for (const json& c : m.at("constants")) {
    KILN_ASSIGN(slot, slot_index(c.at("slot"), plan.num_slots, false));
    KILN_ASSIGN(t, reader.tensor(c.at("tensor")));
    plan.constants.emplace_back(slot, std::move(t));
  }
  for (const json& in : m.at("inputs")) {
    KILN_ASSIGN(slot, slot_index(in.at("slot"), plan.num_slots, false));
    KILN_ASSIGN(type, reader.type(in.at("type")));
    plan.inputs.push_back({slot, in.at("name").get<std::string>(), std::move(type)});
  }
  for (const json& out : m.at("outputs")) {
    KILN_ASSIGN(slot, slot_index(out.at("slot"), plan.num_slots, false));
    plan.outputs.emplace_back(slot, out.at("name").get<std::string>());
  }
  for (const json& s : m.at("steps")) {
    PlanStep step;
    const std::string op = s.at("op").get<std::string>();
    auto kind = op_from_name(op);
    KILN_REQUIRE(kind.has_value(), parse, "unknown op '", op, "'");
    step.op = *kind;
    step.name = s.at("name").get<std::string>();
    KILN_ASSIGN(attrs, reader.attrs(s.at("attrs")));
    step.attrs = std::move(attrs);
    for (const json& i : s.at("inputs")) {
      KILN_ASSIGN(slot, slot_index(i, plan.num_slots, true));
      step.inputs.push_back(slot);
    }
    for (const json& o : s.at("outputs")) {
      KILN_ASSIGN(slot, slot_index(o, plan.num_slots, true));
      step.outputs.push_back(slot);
    }
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

}  // namespace

Status plan_write_file(const std::string& path, const Plan& plan, const PlanFileInfo& info) {
  std::string blob;
  json m;
  m["producer"] = info.producer;
  m["source"] = info.source;
  m["passes"] = info.passes;
  m["notes"] = info.notes;
  m["device"] = info.device;
  m["cuda_precision"] = info.cuda_precision;
  if (!info.cuda_keep_fp32.empty()) m["cuda_keep_fp32"] = info.cuda_keep_fp32;
  m["num_slots"] = plan.num_slots;
  m["slot_types"] = json::array();
  for (const ValueType& t : plan.slot_types) m["slot_types"].push_back(type_to_json(t));
  m["constants"] = json::array();
  for (const auto& [slot, t] : plan.constants) m["constants"].push_back({{"slot", slot}, {"tensor", add_tensor(blob, t)}});
  m["inputs"] = json::array();
  for (const PlanInput& in : plan.inputs) m["inputs"].push_back({{"slot", in.slot}, {"name", in.name}, {"type", type_to_json(in.type)}});
  m["outputs"] = json::array();
  for (const auto& [slot, name] : plan.outputs) m["outputs"].push_back({{"slot", slot}, {"name", name}});
  m["steps"] = json::array();
  for (const PlanStep& s : plan.steps)
    m["steps"].push_back({{"op", op_name(s.op)}, {"name", s.name}, {"attrs", attrs_to_json(s.attrs, blob)},
                          {"inputs", s.inputs}, {"outputs", s.outputs}});
  const std::string metadata = m.dump();

  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kPlanFileVersion;
  h.metadata_offset = sizeof(Header);
  h.metadata_bytes = metadata.size();
  h.weights_offset = align_up(h.metadata_offset + h.metadata_bytes);
  h.weights_bytes = blob.size();
  h.metadata_crc = crc(metadata.data(), metadata.size());
  h.weights_crc = crc(blob.data(), blob.size());
  h.header_crc = crc(&h, offsetof(Header, header_crc));

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    KILN_REQUIRE(out.good(), io, "cannot write '", tmp, "'");
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(metadata.data(), static_cast<std::streamsize>(metadata.size()));
    const std::string pad(h.weights_offset - h.metadata_offset - h.metadata_bytes, '\0');
    out.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    KILN_REQUIRE(out.good(), io, "error writing '", tmp, "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // never leave a half-written artifact under the real name
  KILN_REQUIRE(!ec, io, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
  return Status::ok();
}

Result<LoadedPlan> plan_read_file(const std::string& path, bool verify_weights) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_REQUIRE(fd >= 0, io, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  auto mapping = std::make_shared<Mapping>();
  mapping->size = regular ? static_cast<size_t>(st.st_size) : 0;
  if (mapping->size >= sizeof(Header)) mapping->data = ::mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  KILN_REQUIRE(regular, io, "'", path, "' is not a regular file");
  KILN_REQUIRE(mapping->size >= sizeof(Header), parse, path, ": not a .kiln file (", mapping->size, " bytes, too short)");
  KILN_REQUIRE(mapping->data != MAP_FAILED, io, "cannot map '", path, "'");
  const auto* base = static_cast<const uint8_t*>(mapping->data);

  Header h;
  std::memcpy(&h, base, sizeof h);
  KILN_REQUIRE(std::memcmp(h.magic, kMagic, sizeof kMagic) == 0, parse, path, ": not a .kiln file (bad magic)");
// The version comes first: another version may lay its header out differently.
  KILN_REQUIRE(h.version == kPlanFileVersion, unsupported, path, ": .kiln format version ", h.version,
               " is not supported by this kiln (it reads version ", kPlanFileVersion, "); recompile the model");
  KILN_REQUIRE(h.header_crc == crc(&h, offsetof(Header, header_crc)), parse, path, ": corrupt header (checksum mismatch)");
  const uint64_t size = mapping->size;
  KILN_REQUIRE(h.metadata_offset <= size && h.metadata_bytes <= size - h.metadata_offset && h.weights_offset <= size &&
                   h.weights_bytes <= size - h.weights_offset,
               parse, path, ": truncated (the header describes ", h.weights_offset + h.weights_bytes,
               " bytes, the file has ", size, ")");
  // Nothing may hide in the alignment gap between metadata and weights: it is not checksummed.
  for (uint64_t i = h.metadata_offset + h.metadata_bytes; i < h.weights_offset; ++i)
    KILN_REQUIRE(base[i] == 0, parse, path, ": corrupt padding at byte ", i);
  KILN_REQUIRE(h.metadata_crc == crc(base + h.metadata_offset, h.metadata_bytes), parse, path,
               ": corrupt metadata (checksum mismatch)");
  if (verify_weights)
    KILN_REQUIRE(h.weights_crc == crc_parallel(base + h.weights_offset, h.weights_bytes), parse, path,
                 ": corrupt weights (checksum mismatch)");

  KILN_REQUIRE(h.metadata_bytes <= limits::kMaxPlanMetadataBytes, limit_exceeded, path, ": metadata is ",
               h.metadata_bytes, " bytes, more than the limit of ", limits::kMaxPlanMetadataBytes);
  const int depth = json_depth(base + h.metadata_offset, base + h.metadata_offset + h.metadata_bytes);
  KILN_REQUIRE(depth <= limits::kMaxNestingDepth, limit_exceeded, path, ": metadata nests ", depth,
               " levels deep, more than the limit of ", limits::kMaxNestingDepth);

  LoadedPlan loaded;
  loaded.file_bytes = size;
  try {
    const json m = json::parse(base + h.metadata_offset, base + h.metadata_offset + h.metadata_bytes);
    std::shared_ptr<const void> keep = mapping;
    Reader reader(base + h.weights_offset, h.weights_bytes, keep);
    auto plan = plan_from_json(m, reader);
    if (!plan) return plan.status().with_context(path + ": ");
    loaded.plan = std::move(*plan);
    loaded.info = {m.at("producer").get<std::string>(), m.at("source").get<std::string>(),
                   m.at("passes").get<std::string>(), m.at("notes").get<std::string>(),
                   m.value("device", std::string()), m.value("cuda_precision", std::string())};
    const std::string& device = loaded.info.device;
    const std::string& precision = loaded.info.cuda_precision;
    KILN_REQUIRE(device.empty() || device_kind_from_name(device), parse, path, ": metadata 'device' is '", device,
                 "', expected cpu or cuda");
    KILN_REQUIRE(precision.empty() || (device == "cuda" && device_precision_from_name(precision)),
                 parse, path, ": metadata 'cuda_precision' is '", precision, "' for device '", device,
                 "', expected fp32, tf32, fp16 or bf16 on cuda");
    if (m.contains("cuda_keep_fp32")) {
      const json& keep = m.at("cuda_keep_fp32");
      KILN_REQUIRE(keep.is_array() && std::all_of(keep.begin(), keep.end(), [](const json& k) { return k.is_string(); }), parse,
                   path, ": metadata 'cuda_keep_fp32' is not a list of node names");
      KILN_REQUIRE(keep.empty() || (!precision.empty() && precision != "fp32"), parse, path,
                   ": metadata 'cuda_keep_fp32' keeps nodes in fp32 in a plan whose GPU precision is '", precision,
                   "' (expected tf32, fp16 or bf16)");
      loaded.info.cuda_keep_fp32 = keep.get<std::vector<std::string>>();
      // Each name is a step: the engine would refuse the plan later, naming the node; say it at load.
      DeviceEngineOptions check;
      check.precision = *device_precision_from_name(precision.empty() ? "bf16" : precision);
      check.keep_fp32 = loaded.info.cuda_keep_fp32;
      if (Result<MixedPrecision> mixed = mixed_precision(loaded.plan, check); !mixed)
        return make_error(ErrorCode::parse, path, ": metadata 'cuda_keep_fp32': ", mixed.error().message);
    }
  } catch (const json::exception& e) {
    return make_error(ErrorCode::parse, path, ": malformed metadata: ", e.what());
  }
  return loaded;
}

}  // namespace kiln
