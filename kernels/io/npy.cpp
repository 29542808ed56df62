// NumPy .npy reader and writer.
//
// Format (numpy.lib.format): "\x93NUMPY", major, minor, header length (uint16 LE for 1.0,
// uint32 LE for 2.0/3.0), then an ASCII (3.0: UTF-8) Python dict literal with the keys 'descr',
// 'fortran_order' and 'shape', padded with spaces and ending in '\n', then the raw C-order data.
//
// Reading streams: the header is parsed and every size is checked (overflow-safe, against
// kMaxDataBytes) before anything is allocated, then the data is read straight into the tensor
// (float64 is converted to float32 in chunks). The same streaming reader serves files, byte
// spans and .npz entries (npy_detail.h shares it, and the writer's pieces, with npz.cpp).
#include "kernels/io/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>

#include "kernels/io/npy_detail.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little, "kiln's .npy I/O assumes a little-endian host");

namespace {

using npy_detail::kMaxDataBytes;
using npy_detail::kMaxHeaderBytes;
using npy_detail::ReadFn;

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kMaxRank = 64;

// ---------------------------------------------------------------------------------------------
// A tiny parser for the Python literals that appear in .npy headers.

struct PyValue {
  enum class Kind { str, boolean, integer, none, tuple, list, dict } kind = Kind::none;
  std::string text;           // str: contents; integer: the literal as written
  bool flag = false;          // boolean value; integer: did not fit in int64
  int64_t number = 0;         // integer value
  std::vector<PyValue> items; // tuple/list elements; dict: key, value, key, value, ...
};

class LiteralParser {
 public:
  explicit LiteralParser(std::string_view s) : s_(s) {}

  // Parses the whole header: one value followed by whitespace only.
  Result<PyValue> parse_all() {
    PyValue v;
    KILN_TRY(value(v, 0));
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected text after the dict");
    return v;
  }

 private:
  Status fail(const std::string& problem) const {
    return make_error(ErrorCode::parse, "bad header: ", problem, " at offset ", pos_, " of '",
                      printable(s_), "'");
  }

  static std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 200)) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '\n') out += "\\n";
      else if (u < 0x20 || u >= 0x7f) out += '?';
      else out += c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    if (s.size() > 200) out += "...";
    return out;
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

  Status value(PyValue& out, int depth) {
    if (depth > 16) return fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) return fail("unexpected end of header");
    const char c = s_[pos_];
    if (c == '\'' || c == '"') return string(out);
    if (c == '(') return sequence(out, PyValue::Kind::tuple, ')', depth);
    if (c == '[') return sequence(out, PyValue::Kind::list, ']', depth);
    if (c == '{') return sequence(out, PyValue::Kind::dict, '}', depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return integer(out);
    for (std::string_view word : {"True", "False", "None"}) {
      if (s_.substr(pos_, word.size()) == word) {
        const size_t end = pos_ + word.size();
        if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) break;
        out.kind = word == "None" ? PyValue::Kind::none : PyValue::Kind::boolean;
        out.flag = word == "True";
        pos_ = end;
        return Status::ok();
      }
    }
    return fail(std::string("unexpected character '") + printable(std::string_view(&c, 1)) + "'");
  }

  Status string(PyValue& out) {
    const char quote = s_[pos_++];
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\' || s_[pos_] == '\n') return fail("escape or newline inside a string");
      ++pos_;
    }
    if (pos_ >= s_.size()) return fail("unterminated string");
    out.kind = PyValue::Kind::str;
    out.text = std::string(s_.substr(start, pos_ - start));
    ++pos_;
    return Status::ok();
  }

  Status integer(PyValue& out) {
    const size_t start = pos_;
    bool negative = false;
    if (at('-') || at('+')) negative = s_[pos_++] == '-';
    skip_ws();
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail("expected digits");
    uint64_t magnitude = 0;
    bool overflow = false;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(s_[pos_++] - '0');
      if (magnitude > (uint64_t{INT64_MAX} - digit) / 10) overflow = true;
      else magnitude = magnitude * 10 + digit;
    }
    if (at('L') || at('l')) ++pos_;  // Python 2 long suffix, seen in old files
    out.kind = PyValue::Kind::integer;
    out.text = std::string(s_.substr(start, pos_ - start));
    out.flag = overflow;
    out.number = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return Status::ok();
  }

  // "(a, b)", "(a,)", "()", "[a, b,]", "{k: v, k: v, }".
  Status sequence(PyValue& out, PyValue::Kind kind, char close, int depth) {
    ++pos_;
    out.kind = kind;
    size_t count = 0;
    bool trailing_comma = false;
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size()) return fail("unexpected end of header");
      if (at(close)) {
        ++pos_;
        break;
      }
      if (count > 0 && !trailing_comma) return fail(std::string("expected ',' or '") + close + "'");
      PyValue item;
      KILN_TRY(value(item, depth + 1));
      out.items.push_back(std::move(item));
      if (kind == PyValue::Kind::dict) {
        skip_ws();
        if (!at(':')) return fail("expected ':' after a dict key");
        ++pos_;
        PyValue v;
        KILN_TRY(value(v, depth + 1));
        out.items.push_back(std::move(v));
      }
      ++count;
      skip_ws();
      trailing_comma = at(',');
      if (trailing_comma) ++pos_;
    }
    // "(5)" is just 5 in Python; NumPy would reject such a shape too.
    if (kind == PyValue::Kind::tuple && count == 1 && !trailing_comma) out = PyValue(out.items[0]);
    return Status::ok();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Header semantics.

// How the data is laid out in the file.
enum class FileType { f32, f16, f64, i8, u8, i32, i64, b1 };

struct Header {
  FileType file_type = FileType::f32;
  DType dtype = DType::f32;  // the tensor kiln returns
  size_t item_size = 4;      // bytes per element in the file
  std::string descr;
  Shape shape;
  uint64_t data_bytes = 0;   // bytes of data in the file
};

std::string describe_shape(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::ostringstream os;
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "x" : "") << shape[i];
  return os.str();
}

std::string_view file_type_name(FileType t) {
  switch (t) {
    case FileType::f32: return "float32";
    case FileType::f16: return "float16";
    case FileType::f64: return "float64";
    case FileType::i8: return "int8";
    case FileType::u8: return "uint8";
    case FileType::i32: return "int32";
    case FileType::i64: return "int64";
    case FileType::b1: return "bool";
  }
  return "?";
}

// "1x3x28x28 float32 (9408 bytes)"
std::string describe_data(const Header& h) {
  std::ostringstream os;
  os << describe_shape(h.shape) << ' ' << file_type_name(h.file_type) << " (" << h.data_bytes << " bytes)";
  return os.str();
}

Status parse_descr(const std::string& descr, Header& h) {
  constexpr std::string_view kSupported =
      "kiln reads float32, float16, float64 (as float32), int8, uint8, int32, int64 and bool";
  std::string_view d = descr;
  char order = '=';
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '=' || d[0] == '|')) {
    order = d[0];
    d.remove_prefix(1);
  }
  struct Known {
    std::string_view code;
    FileType file_type;
    DType dtype;
    size_t size;
  };
  static constexpr Known kKnown[] = {
      {"f4", FileType::f32, DType::f32, 4}, {"f2", FileType::f16, DType::f16, 2},
      {"f8", FileType::f64, DType::f32, 8}, {"i1", FileType::i8, DType::i8, 1},
      {"u1", FileType::u8, DType::u8, 1},   {"i4", FileType::i32, DType::i32, 4},
      {"i8", FileType::i64, DType::i64, 8}, {"b1", FileType::b1, DType::boolean, 1},
      {"b", FileType::i8, DType::i8, 1},    {"B", FileType::u8, DType::u8, 1},
      {"?", FileType::b1, DType::boolean, 1},
  };
  for (const Known& k : kKnown) {
    if (d != k.code) continue;
    KILN_REQUIRE(order != '>' || k.size == 1, unsupported, "big-endian dtype '", descr,
                 "' is not supported; save a.astype('<", d, "') instead");
    h.file_type = k.file_type;
    h.dtype = k.dtype;
    h.item_size = k.size;
    return Status::ok();
  }
  const char kind = d.empty() ? '\0' : d[0];
  std::string what = "dtype";
  if (kind == 'O') what = "object dtype";
  else if (kind == 'S' || kind == 'U' || kind == 'a') what = "string dtype";
  else if (kind == 'V') what = "void/structured dtype";
  else if (kind == 'c') what = "complex dtype";
  else if (kind == 'M' || kind == 'm') what = "datetime dtype";
  return make_error(ErrorCode::unsupported, what, " '", descr, "' is not supported; ", kSupported);
}

Result<Header> interpret_header(std::string_view text) {
  KILN_ASSIGN(dict, LiteralParser(text).parse_all());
  KILN_REQUIRE(dict.kind == PyValue::Kind::dict, parse, "bad header: not a dict literal");
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const PyValue& key = dict.items[i];
    KILN_REQUIRE(key.kind == PyValue::Kind::str, parse, "bad header: dict keys must be strings");
    const PyValue** slot = key.text == "descr"           ? &descr
                           : key.text == "fortran_order" ? &fortran
                           : key.text == "shape"         ? &shape
                                                         : nullptr;
    KILN_REQUIRE(slot != nullptr, parse, "bad header: unexpected key '", key.text,
                 "' (expected 'descr', 'fortran_order' and 'shape')");
    KILN_REQUIRE(*slot == nullptr, parse, "bad header: key '", key.text, "' appears twice");
    *slot = &dict.items[i + 1];
  }
  KILN_REQUIRE(descr, parse, "bad header: no 'descr' key");
  KILN_REQUIRE(fortran, parse, "bad header: no 'fortran_order' key");
  KILN_REQUIRE(shape, parse, "bad header: no 'shape' key");

  Header h;
  if (descr->kind == PyValue::Kind::list)
    return make_error(ErrorCode::unsupported, "structured (record) dtypes are not supported");
  KILN_REQUIRE(descr->kind == PyValue::Kind::str, parse, "bad header: 'descr' is not a string");
  h.descr = descr->text;
  KILN_TRY(parse_descr(descr->text, h));

  KILN_REQUIRE(fortran->kind == PyValue::Kind::boolean, parse, "bad header: 'fortran_order' is not True or False");

  KILN_REQUIRE(shape->kind == PyValue::Kind::tuple, parse, "bad header: 'shape' is not a tuple");
  KILN_REQUIRE(shape->items.size() <= kMaxRank, limit_exceeded, "shape has rank ", shape->items.size(),
               ", more than ", kMaxRank);
  uint64_t numel = 1;  // product of the non-zero dims, which must fit too (it bounds every stride)
  bool too_big = false;
  bool empty = false;
  size_t non_unit_dims = 0;
  for (size_t i = 0; i < shape->items.size(); ++i) {
    const PyValue& dim = shape->items[i];
    KILN_REQUIRE(dim.kind == PyValue::Kind::integer, parse, "bad header: dimension ", i, " of 'shape' is not an integer");
    KILN_REQUIRE(!dim.flag, limit_exceeded, "dimension ", i, " of the shape (", dim.text, ") is absurdly large");
    KILN_REQUIRE(dim.number >= 0, parse, "bad header: dimension ", i, " of the shape is negative (", dim.number, ")");
    KILN_REQUIRE(static_cast<uint64_t>(dim.number) <= kMaxDataBytes, limit_exceeded, "dimension ", i,
                 " of the shape (", dim.number, ") is absurdly large");
    const auto d = static_cast<uint64_t>(dim.number);
    h.shape.push_back(dim.number);
    if (d != 1) ++non_unit_dims;
    // Saturating product: numel only matters up to kMaxDataBytes.
    if (d == 0) empty = true;
    else if (numel > kMaxDataBytes / d) too_big = true;
    else numel *= d;
  }
  if (too_big || numel > kMaxDataBytes / h.item_size) {
    return make_error(ErrorCode::limit_exceeded, "header says ", describe_shape(h.shape), ' ',
                      file_type_name(h.file_type), ", more than the ", kMaxDataBytes,
                      "-byte (16 GiB) limit on one array");
  }
  if (empty) numel = 0;
  h.data_bytes = numel * h.item_size;
  // Column-major data is only a problem when at least two dimensions exceed 1.
  KILN_REQUIRE(!fortran->flag || non_unit_dims <= 1 || numel == 0, unsupported,
               "fortran_order True (column-major) arrays are not supported; save np.ascontiguousarray(a)");
  return h;
}

// ---------------------------------------------------------------------------------------------
// Reading.

uint32_t load_le(const uint8_t* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

Status truncated(const Header& h, uint64_t available, const std::string& what) {
  return make_error(ErrorCode::parse, what, ": truncated: header says ", describe_data(h), " but only ", available,
                    " bytes follow");
}

// Reads exactly `n` bytes or reports how many there were.
Result<size_t> read_fully(const ReadFn& read, void* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    KILN_ASSIGN(got, read(static_cast<uint8_t*>(dst) + done, n - done));
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace

Result<Tensor> npy_detail::read_stream(const ReadFn& read, uint64_t total, const std::string& what) {
  // Preamble: magic, version, header length.
  uint8_t pre[12] = {};
  const size_t want = static_cast<size_t>(std::min<uint64_t>(total, sizeof pre));
  KILN_ASSIGN(got_pre, read_fully(read, pre, want));
  KILN_REQUIRE(got_pre > 0, parse, what, ": not a .npy file (it is empty)");
  KILN_REQUIRE(got_pre >= kMagicLen && std::memcmp(pre, kMagic, kMagicLen) == 0, parse, what,
               ": not a .npy file (no \\x93NUMPY magic at the start)");
  KILN_REQUIRE(got_pre >= 8, parse, what, ": truncated: the file ends inside the .npy preamble (", got_pre,
               " bytes)");
  const uint8_t major = pre[6], minor = pre[7];
  KILN_REQUIRE((major == 1 || major == 2 || major == 3) && minor == 0, unsupported, what,
               ": unsupported .npy format version ", int{major}, ".", int{minor}, " (kiln reads 1.0, 2.0 and 3.0)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = 8 + len_bytes;
  KILN_REQUIRE(got_pre >= prefix, parse, what, ": truncated: the file ends inside the .npy preamble (",
               got_pre, " bytes)");
  const uint64_t header_len = load_le(pre + 8, len_bytes);
  KILN_REQUIRE(header_len <= total - prefix, parse, what, ": header length ", header_len,
               " runs past the end of the data (", total - prefix, " bytes follow the preamble)");
  KILN_REQUIRE(header_len <= kMaxHeaderBytes, limit_exceeded, what, ": header length ", header_len,
               " is over the ", kMaxHeaderBytes, "-byte limit");

  // Header text; the preamble buffer may already hold its first bytes (version 1.0).
  std::string text(static_cast<size_t>(header_len), '\0');
  const size_t already = std::min<size_t>(got_pre - prefix, text.size());
  std::memcpy(text.data(), pre + prefix, already);
  KILN_ASSIGN(got_text, read_fully(read, text.data() + already, text.size() - already));
  KILN_REQUIRE(got_text == text.size() - already, parse, what, ": truncated inside the header");
  auto header = interpret_header(text);
  if (!header) return header.status().with_context(what + ": ");
  const Header& h = *header;

  // A header that parses is longer than the 2 bytes the preamble buffer may have read beyond a
  // version 1.0 preamble, so the data starts exactly at the next byte of the stream.
  KILN_REQUIRE(got_pre - prefix == already, internal, what, ": header shorter than the preamble read-ahead");
  const uint64_t available = total - (prefix + header_len);
  if (available < h.data_bytes) return truncated(h, available, what);

  Tensor t = Tensor::zeros(h.dtype, h.shape);
  const size_t n = static_cast<size_t>(h.data_bytes);
  if (h.file_type != FileType::f64) {
    auto* dst = static_cast<uint8_t*>(t.raw());
    KILN_ASSIGN(got, read_fully(read, dst, n));
    if (got != n) return truncated(h, got, what);
    if (h.file_type == FileType::b1)
      for (size_t i = 0; i < n; ++i) dst[i] = dst[i] != 0 ? 1 : 0;  // C++ bool must be exactly 0 or 1
  } else {
    // float64 -> float32 in chunks, so that no float64 copy of the whole array is held.
    float* out = t.data<float>();
    const size_t count = n / 8;
    std::vector<uint8_t> chunk(std::min<size_t>(n, size_t{1} << 16));
    size_t done = 0;
    while (done < count) {
      const size_t items = std::min(count - done, chunk.size() / 8);
      KILN_ASSIGN(got, read_fully(read, chunk.data(), items * 8));
      if (got != items * 8) return truncated(h, done * 8 + got, what);
      for (size_t i = 0; i < items; ++i) {
        double v;
        std::memcpy(&v, chunk.data() + i * 8, 8);
        out[done + i] = static_cast<float>(v);
      }
      done += items;
    }
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Writing.

namespace {

struct WriteLayout {
  std::string descr;
  size_t item_size;
};

WriteLayout write_layout(DType dt) {
  switch (dt) {
    case DType::f32: return {"<f4", 4};
    case DType::f16: return {"<f2", 2};
    case DType::bf16: return {"<f4", 4};  // NumPy has no bfloat16
    case DType::i8: return {"|i1", 1};
    case DType::u8: return {"|u1", 1};
    case DType::i32: return {"<i4", 4};
    case DType::i64: return {"<i8", 8};
    case DType::boolean: return {"|b1", 1};
  }
  return {"<f4", 4};
}

}  // namespace

// Preamble + header, padded with spaces so that the data starts at a multiple of 64.
std::vector<uint8_t> npy_detail::header_bytes(const Tensor& tensor) {
  std::ostringstream dict;
  dict << "{'descr': '" << write_layout(tensor.dtype()).descr << "', 'fortran_order': False, 'shape': (";
  for (int64_t i = 0; i < tensor.rank(); ++i) dict << (i ? ", " : "") << tensor.dim(i);
  if (tensor.rank() == 1) dict << ',';
  dict << "), }";
  std::string text = dict.str();
  size_t prefix = 10;
  if (text.size() + 1 + prefix > 65535 + 10) prefix = 12;  // version 2.0: 4-byte header length
  const size_t unpadded = prefix + text.size() + 1;
  text.append((64 - unpadded % 64) % 64, ' ');
  text += '\n';
  std::vector<uint8_t> out(prefix + text.size());
  std::memcpy(out.data(), kMagic, kMagicLen);
  out[6] = prefix == 10 ? 1 : 2;
  out[7] = 0;
  const auto len = static_cast<uint32_t>(text.size());
  for (size_t i = 0; i < prefix - 8; ++i) out[8 + i] = static_cast<uint8_t>(len >> (8 * i));
  std::memcpy(out.data() + prefix, text.data(), text.size());
  return out;
}

size_t npy_detail::data_bytes(const Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * write_layout(tensor.dtype()).item_size;
}

// Appends the data as written to the file (bfloat16 widened; undefined tensors as zeros).
void npy_detail::append_data(const Tensor& tensor, std::vector<uint8_t>& out) {
  const size_t start = out.size();
  out.resize(start + data_bytes(tensor), 0);
  if (tensor.raw() == nullptr || tensor.numel() == 0) return;
  if (tensor.dtype() == DType::bf16) {
    const BFloat16* src = tensor.data<BFloat16>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      const float f = static_cast<float>(src[i]);
      std::memcpy(out.data() + start + static_cast<size_t>(i) * 4, &f, 4);
    }
  } else {
    std::memcpy(out.data() + start, tensor.raw(), tensor.nbytes());
  }
}

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

std::string errno_text(int err) { return std::generic_category().message(err); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API.

Result<Tensor> npy_read_bytes(std::span<const uint8_t> bytes, const std::string& what) {
  size_t pos = 0;
  const ReadFn read = [&](void* dst, size_t n) -> Result<size_t> {
    const size_t k = std::min(n, bytes.size() - pos);
    if (k) std::memcpy(dst, bytes.data() + pos, k);
    pos += k;
    return k;
  };
  return npy_detail::read_stream(read, bytes.size(), what);
}

Result<Tensor> npy_read_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  KILN_REQUIRE(!ec && std::filesystem::exists(status), io, path, ": cannot open: ",
               ec ? ec.message() : "no such file");
  KILN_REQUIRE(std::filesystem::is_regular_file(status), io, path, ": cannot open: not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  KILN_REQUIRE(!ec, io, path, ": cannot read the file size: ", ec.message());
  FilePtr f(std::fopen(path.c_str(), "rb"));
  KILN_REQUIRE(f != nullptr, io, path, ": cannot open: ", errno_text(errno));
  const ReadFn read = [&](void* dst, size_t n) -> Result<size_t> {
    const size_t got = std::fread(dst, 1, n, f.get());
    KILN_REQUIRE(got == n || !std::ferror(f.get()), io, path, ": read error: ", errno_text(errno));
    return got;
  };
  return npy_detail::read_stream(read, size, path);
}

std::vector<uint8_t> npy_write_bytes(const Tensor& tensor) {
  std::vector<uint8_t> out = npy_detail::header_bytes(tensor);
  npy_detail::append_data(tensor, out);
  return out;
}

Status npy_write_file(const std::string& path, const Tensor& tensor) {
  KILN_REQUIRE(tensor.defined(), invalid_argument, path, ": cannot write an undefined tensor");
  KILN_REQUIRE(npy_detail::data_bytes(tensor) <= kMaxDataBytes, limit_exceeded, path, ": ", tensor.describe(),
               " is over the ", kMaxDataBytes, "-byte limit on one array");
  FilePtr f(std::fopen(path.c_str(), "wb"));
  KILN_REQUIRE(f != nullptr, io, path, ": cannot open for writing: ", errno_text(errno));
  const std::vector<uint8_t> header = npy_detail::header_bytes(tensor);
  bool ok = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  if (ok && tensor.numel() > 0) {
    if (tensor.dtype() == DType::bf16) {
      std::vector<uint8_t> converted;
      npy_detail::append_data(tensor, converted);
      ok = std::fwrite(converted.data(), 1, converted.size(), f.get()) == converted.size();
    } else {
      ok = std::fwrite(tensor.raw(), 1, tensor.nbytes(), f.get()) == tensor.nbytes();
    }
  }
  KILN_REQUIRE(ok, io, path, ": write failed: ", errno_text(errno));
  std::FILE* raw = f.release();
  KILN_REQUIRE(std::fclose(raw) == 0, io, path, ": write failed: ", errno_text(errno));
  return Status::ok();
}

}  // namespace kiln
