// Tests for NumPy .npy/.npz I/O: round trips, files written by NumPy (tests/data/npy, made by
// generate.py there), header parsing variants and every error path.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "kernels/io/npy.h"
#include "kernels/io/npz.h"

using namespace kiln;

namespace {

const std::string kData = std::string(KILN_TEST_DATA_DIR) + "/npy/";

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("kiln_npy_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A .npy image with the given header text (used as is: no padding or newline added) and data.
std::vector<uint8_t> make_npy(const std::string& header, const std::vector<uint8_t>& data = {}, int major = 1,
                              int minor = 0) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), static_cast<uint8_t>(minor)};
  const auto len = static_cast<uint32_t>(header.size());
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(static_cast<uint8_t>(len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

Result<Tensor> parse(const std::vector<uint8_t>& bytes, const std::string& what = "x.npy") {
  return npy_read_bytes(std::span<const uint8_t>(bytes.data(), bytes.size()), what);
}

// The header text of a .npy image (version 1.0 only).
std::string header_text(const std::vector<uint8_t>& bytes) {
  const size_t len = bytes[8] | (static_cast<size_t>(bytes[9]) << 8);
  return std::string(bytes.begin() + 10, bytes.begin() + 10 + static_cast<std::ptrdiff_t>(len));
}

// Element i of a test tensor of dtype dt, as a double (exactly representable in every dtype).
double pattern(DType dt, int64_t i) {
  switch (dt) {
    case DType::boolean: return (i % 3) == 1 ? 1 : 0;
    case DType::u8: return static_cast<double>((i * 37) % 256);
    case DType::i8: return static_cast<double>((i * 37) % 256 - 128);
    case DType::i32: return static_cast<double>(i * 100003 - 7);
    case DType::i64: return static_cast<double>(i * 1000000007LL - 3);
    default: return static_cast<double>(i) * 0.25 - 3.5;
  }
}

Tensor make_tensor(DType dt, const Shape& shape) {
  Tensor t = Tensor::zeros(dt, shape);
  visit_dtype(dt, [&]<typename T>() {
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = pattern(dt, i);
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        t.data<T>()[i] = T(static_cast<float>(v));
      else if constexpr (std::is_same_v<T, bool>)
        t.data<T>()[i] = v != 0;
      else
        t.data<T>()[i] = static_cast<T>(v);
    }
  });
  return t;
}

void check_pattern(const Tensor& t, DType dt) {
  for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(t.value_as_double(i) == pattern(dt, i));
}

template <typename T>
void check_values(const Tensor& t, const Shape& shape, const std::vector<T>& expected) {
  REQUIRE(t.dtype() == dtype_of<T>::value);
  REQUIRE(t.shape() == shape);
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) REQUIRE(t.data<T>()[i] == expected[i]);
}

void require_error(const Result<Tensor>& r, ErrorCode code, const std::string& fragment) {
  REQUIRE_FALSE(r.is_ok());
  INFO(r.error().message);
  REQUIRE(r.error().code == code);
  REQUIRE_THAT(r.error().message, Catch::Contains(fragment));
  REQUIRE(r.error().message.find('\n') == std::string::npos);
}

const std::string kF32Header3 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";

}  // namespace

TEST_CASE("npy round trip: every dtype, ranks 0..4", "[npy]") {
  const DType dt = GENERATE(DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64,
                            DType::boolean);
  const Shape shape = GENERATE(Shape{}, Shape{13}, Shape{7, 3}, Shape{2, 3, 5}, Shape{2, 1, 3, 2}, Shape{0},
                               Shape{4, 0, 2});
  CAPTURE(dtype_name(dt), shape_to_string(shape));
  const Tensor t = make_tensor(dt, shape);
  const DType back = dt == DType::bf16 ? DType::f32 : dt;  // bfloat16 is written as float32

  const std::vector<uint8_t> bytes = npy_write_bytes(t);
  REQUIRE(std::memcmp(bytes.data(), "\x93NUMPY\x01\x00", 8) == 0);
  const std::string header = header_text(bytes);
  REQUIRE((10 + header.size()) % 64 == 0);
  REQUIRE(header.back() == '\n');
  REQUIRE(bytes.size() == 10 + header.size() + static_cast<size_t>(t.numel()) * dtype_size(back));

  auto r = parse(bytes);
  REQUIRE(r.is_ok());
  REQUIRE(r->dtype() == back);
  REQUIRE(r->shape() == shape);
  check_pattern(*r, dt);

  TempDir dir;
  const std::string path = dir.file("t.npy");
  REQUIRE(npy_write_file(path, t).is_ok());
  REQUIRE(read_all(path) == bytes);
  auto f = npy_read_file(path);
  REQUIRE(f.is_ok());
  REQUIRE(f->dtype() == back);
  REQUIRE(f->shape() == shape);
  check_pattern(*f, dt);
}

TEST_CASE("npy writer formats the header like NumPy", "[npy]") {
  auto header_of = [](DType dt, Shape shape) { return header_text(npy_write_bytes(Tensor::zeros(dt, shape))); };
  auto starts = [](const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; };
  CHECK(starts(header_of(DType::f32, {3}), kF32Header3 + " "));
  CHECK(starts(header_of(DType::f32, {}), "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"));
  CHECK(starts(header_of(DType::i64, {1, 3, 224, 224}),
               "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 3, 224, 224), }"));
  CHECK(starts(header_of(DType::f16, {2}), "{'descr': '<f2'"));
  CHECK(starts(header_of(DType::bf16, {2}), "{'descr': '<f4'"));
  CHECK(starts(header_of(DType::i8, {2}), "{'descr': '|i1'"));
  CHECK(starts(header_of(DType::u8, {2}), "{'descr': '|u1'"));
  CHECK(starts(header_of(DType::i32, {2}), "{'descr': '<i4'"));
  CHECK(starts(header_of(DType::boolean, {2}), "{'descr': '|b1'"));
  // The data starts at the first multiple of 64 (NumPy 1.24 pads further, to leave room to grow).
  const std::vector<uint8_t> bytes = npy_write_bytes(Tensor::zeros(DType::f32, {3}));
  REQUIRE(bytes.size() == 128 + 12);  // a 58-character dict does not fit in 64 bytes
}

TEST_CASE("npy writer: bfloat16 values are widened exactly", "[npy]") {
  const std::vector<BFloat16> v = {BFloat16(1.5f), BFloat16(-0.0078125f), BFloat16(3.0e38f)};
  auto r = parse(npy_write_bytes(Tensor::from_values<BFloat16>({3}, v)));
  REQUIRE(r.is_ok());
  for (int i = 0; i < 3; ++i) REQUIRE(r->data<float>()[i] == static_cast<float>(v[static_cast<size_t>(i)]));
}

TEST_CASE("npy reads files written by NumPy", "[npy]") {
  auto load = [](const std::string& name) {
    auto r = npy_read_file(kData + name);
    INFO(name << ": " << (r ? std::string("ok") : r.error().message));
    REQUIRE(r.is_ok());
    return *r;
  };
  check_values<float>(load("f32_2x3.npy"), {2, 3}, {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});
  {
    const Tensor t = load("f16_5.npy");
    REQUIRE(t.dtype() == DType::f16);
    REQUIRE(t.shape() == Shape{5});
    const std::vector<double> expected = {0.5, -1.0, 2.0, 65504.0, -0.0};
    for (int64_t i = 0; i < 5; ++i) REQUIRE(t.value_as_double(i) == expected[static_cast<size_t>(i)]);
    REQUIRE(std::signbit(static_cast<float>(t.data<Half>()[4])));
  }
  check_values<float>(load("f64_2x2.npy"), {2, 2}, {1.5f, -2.25f, 1e10f, static_cast<float>(1.0 / 3.0)});
  check_values<int8_t>(load("i8_4.npy"), {4}, {-128, -1, 0, 127});
  check_values<uint8_t>(load("u8_3.npy"), {3}, {0, 7, 255});
  check_values<int32_t>(load("i32_2x2.npy"), {2, 2}, {INT32_MIN, -1, 0, INT32_MAX});
  check_values<int64_t>(load("i64_3.npy"), {3}, {INT64_MIN, 5, int64_t{1} << 62});
  check_values<bool>(load("bool_2x3.npy"), {2, 3}, {true, false, true, false, false, true});
  check_values<float>(load("scalar_f32.npy"), {}, {3.25f});
  check_values<float>(load("empty_0x3.npy"), {0, 3}, {});
  check_values<int64_t>(load("i64_1x1x1x2x1.npy"), {1, 1, 1, 2, 1}, {7, -7});
  check_values<float>(load("f32_v2.npy"), {2, 2}, {0, 1, 2, 3});
  check_values<float>(load("f32_v3.npy"), {2, 2}, {0, 1, 2, 3});
}

TEST_CASE("npy header parsing accepts what Python would", "[npy]") {
  const std::vector<uint8_t> data = bytes_of<float>({1, 2, 3, 4, 5, 6});
  struct Case {
    std::string header;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}\n", {2, 3}},
      {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (6,)}", {6}},
      {"{ 'descr' :'<f4' ,'fortran_order':False,'shape':(2,3,),}    \n", {2, 3}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n", {2, 3}},
      {"{'descr': '=f4', 'fortran_order': False, 'shape': (1, 2, 1, 3), }", {1, 2, 1, 3}},
      {"{'descr': '|f4', 'fortran_order': False, 'shape': (6,), }", {6}},
      {"{'descr': 'f4', 'fortran_order': False, 'shape': (6,), }", {6}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", {}},
      {"\t{'descr': '<f4',\n 'fortran_order': False,\r\n 'shape': ( 3 , 2 ) }\n\n", {3, 2}},
      // Column-major order is the same layout when at most one dimension exceeds 1.
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (6,), }", {6}},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (1, 6, 1), }", {1, 6, 1}},
  };
  for (const Case& c : cases) {
    for (int major : {1, 2, 3}) {
      CAPTURE(c.header, major);
      auto r = parse(make_npy(c.header, data, major));
      INFO((r ? std::string("ok") : r.error().message));
      REQUIRE(r.is_ok());
      REQUIRE(r->dtype() == DType::f32);
      REQUIRE(r->shape() == c.shape);
      for (int64_t i = 0; i < r->numel(); ++i) REQUIRE(r->data<float>()[i] == static_cast<float>(i + 1));
    }
  }
}

TEST_CASE("npy byte-order marks for one-byte types and bool normalization", "[npy]") {
  for (const std::string order : {"|", "<", "=", ">", ""}) {
    CAPTURE(order);
    auto i8 = parse(make_npy("{'descr': '" + order + "i1', 'fortran_order': False, 'shape': (2,), }", {0xff, 5}));
    REQUIRE(i8.is_ok());
    check_values<int8_t>(*i8, {2}, {-1, 5});
    auto u8 = parse(make_npy("{'descr': '" + order + "u1', 'fortran_order': False, 'shape': (2,), }", {0xff, 5}));
    REQUIRE(u8.is_ok());
    check_values<uint8_t>(*u8, {2}, {255, 5});
    auto b = parse(make_npy("{'descr': '" + order + "b1', 'fortran_order': False, 'shape': (3,), }", {0, 1, 2}));
    REQUIRE(b.is_ok());
    REQUIRE(b->dtype() == DType::boolean);
    // A stray byte value of 2 must still come out as a proper C++ true.
    for (int i = 0; i < 3; ++i) REQUIRE(reinterpret_cast<const uint8_t*>(b->raw())[i] == (i == 0 ? 0 : 1));
  }
  auto q = parse(make_npy("{'descr': '?', 'fortran_order': False, 'shape': (1,), }", {1}));
  REQUIRE(q.is_ok());
  REQUIRE(q->dtype() == DType::boolean);
}

TEST_CASE("npy float64 is converted to float32", "[npy]") {
  // Larger than one conversion chunk (64 KiB), with an odd element count.
  const size_t n = 20001;
  std::vector<double> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<double>(i) * 0.5 - 7.25;
  auto r = parse(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (20001,), }", bytes_of(values)));
  REQUIRE(r.is_ok());
  REQUIRE(r->dtype() == DType::f32);
  REQUIRE(r->shape() == Shape{20001});
  for (size_t i = 0; i < n; ++i) REQUIRE(r->data<float>()[i] == static_cast<float>(values[i]));

  // Out of float32 range becomes infinity, as in NumPy's astype(np.float32).
  auto wide = parse(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                             bytes_of<double>({1e300, -1e300, std::nan("")})));
  REQUIRE(wide.is_ok());
  REQUIRE(std::isinf(wide->data<float>()[0]));
  REQUIRE(wide->data<float>()[0] > 0);
  REQUIRE(std::isinf(wide->data<float>()[1]));
  REQUIRE(wide->data<float>()[1] < 0);
  REQUIRE(std::isnan(wide->data<float>()[2]));

  auto truncated = parse(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (20001,), }",
                                  std::vector<uint8_t>(160000)));
  require_error(truncated, ErrorCode::parse, "x.npy: truncated: header says 20001 float64 (160008 bytes) but only 160000 bytes follow");
}

TEST_CASE("npy errors: bad bytes", "[npy]") {
  const std::vector<uint8_t> f32x3 = bytes_of<float>({1, 2, 3});

  SECTION("empty and garbage magic") {
    require_error(parse({}), ErrorCode::parse, "x.npy: not a .npy file (it is empty)");
    require_error(parse({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}), ErrorCode::parse, "x.npy: not a .npy file");
    std::vector<uint8_t> bad = make_npy(kF32Header3, f32x3);
    bad[1] = 'n';
    require_error(parse(bad), ErrorCode::parse, "not a .npy file");
  }
  SECTION("truncated preamble") {
    const std::vector<uint8_t> full = make_npy(kF32Header3, f32x3);
    for (size_t n : {3, 6, 7, 9}) {
      CAPTURE(n);
      const auto r = parse(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
      require_error(r, ErrorCode::parse, "x.npy: ");
    }
    const std::vector<uint8_t> v2 = make_npy(kF32Header3, f32x3, 2);
    require_error(parse(std::vector<uint8_t>(v2.begin(), v2.begin() + 11)), ErrorCode::parse, "preamble");
  }
  SECTION("unknown version") {
    require_error(parse(make_npy(kF32Header3, f32x3, 4)), ErrorCode::unsupported, "version 4.0");
    require_error(parse(make_npy(kF32Header3, f32x3, 1, 1)), ErrorCode::unsupported, "version 1.1");
  }
  SECTION("header length beyond the file") {
    std::vector<uint8_t> bad = make_npy(kF32Header3, f32x3);
    bad[8] = 0xff;
    bad[9] = 0x7f;
    require_error(parse(bad), ErrorCode::parse, "x.npy: header length 32767 runs past the end");
    std::vector<uint8_t> v2 = make_npy(kF32Header3, f32x3, 2);
    v2[11] = 0xff;
    require_error(parse(v2), ErrorCode::parse, "runs past the end");
  }
  SECTION("malformed dict literals") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", "unexpected end of header"},
        {"{", "unexpected end of header"},
        {"['descr', '<f4']", "not a dict"},
        {"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
        {"{'descr': '<f4', 'shape': (3,)}", "no 'fortran_order' key"},
        {"{'fortran_order': False, 'shape': (3,)}", "no 'descr' key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", "unexpected key 'extra'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", "'descr' appears twice"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", "expected ',' or '}'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (3,)}", "expected ':' after a dict key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", "unexpected end"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", "expected ','"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} trailing", "unexpected text after the dict"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", "'fortran_order' is not True or False"},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (3,)}", "unexpected character"},
        {"{'descr': 4, 'fortran_order': False, 'shape': (3,)}", "'descr' is not a string"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", "'shape' is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", "'shape' is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 3}", "'shape' is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ('3',)}", "dimension 0 of 'shape' is not an integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,,)}", "unexpected character ','"},
        {"{'descr': '<\\x66', 'fortran_order': False, 'shape': (3,)}", "escape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, -3)}", "dimension 1 of the shape is negative (-3)"},
        {std::string(40, '(') + std::string(40, ')'), "nesting too deep"},
    };
    for (const auto& [header, fragment] : cases) {
      CAPTURE(header);
      require_error(parse(make_npy(header, f32x3)), ErrorCode::parse, fragment);
    }
  }
  SECTION("unsupported dtypes and layouts") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"'>f4'", "big-endian dtype '>f4' is not supported"},
        {"'>f8'", "big-endian dtype '>f8' is not supported; save a.astype('<f8') instead"},
        {"'>i8'", "big-endian"},
        {"'|O'", "object dtype '|O' is not supported"},
        {"'<U5'", "string dtype '<U5' is not supported"},
        {"'|S3'", "string dtype"},
        {"'<c8'", "complex dtype"},
        {"'<M8[s]'", "datetime dtype"},
        {"'|V8'", "void/structured dtype"},
        {"'<i2'", "dtype '<i2' is not supported; kiln reads float32, float16, float64"},
        {"'<u4'", "dtype '<u4' is not supported"},
        {"'<f16'", "dtype '<f16' is not supported"},
        {"[('a', '<f4'), ('b', '<i4', (2,))]", "structured (record) dtypes are not supported"},
    };
    for (const auto& [descr, fragment] : cases) {
      CAPTURE(descr);
      require_error(parse(make_npy("{'descr': " + descr + ", 'fortran_order': False, 'shape': (3,), }", f32x3)),
                    ErrorCode::unsupported, "x.npy: " + fragment);
    }
    require_error(parse(make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }",
                                 bytes_of<float>({1, 2, 3, 4, 5, 6}))),
                  ErrorCode::unsupported, "x.npy: fortran_order True (column-major) arrays are not supported");
  }
  SECTION("sizes are checked before anything is allocated") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"(99999999999999999999,)", "dimension 0 of the shape (99999999999999999999) is absurdly large"},
        {"(1, 17179869185)", "dimension 1 of the shape (17179869185) is absurdly large"},
        {"(1048576, 1048576, 1048576)", "header says 1048576x1048576x1048576 float32, more than the 17179869184-byte"},
        {"(4294967296, 4294967296, 4294967296, 4294967296)", "header says 4294967296x4294967296x4294967296x4294967296 float32, more than"},
        {"(4294967297,)", "header says 4294967297 float32, more than"},
        {"(65536, 65536, 2)", "header says 65536x65536x2 float32, more than"},
    };
    for (const auto& [shape, fragment] : cases) {
      CAPTURE(shape);
      require_error(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", f32x3)),
                    ErrorCode::limit_exceeded, "x.npy: " + fragment);
    }
    // Exactly at the limit is allowed by the size check (and then found truncated).
    require_error(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296,), }", f32x3)),
                  ErrorCode::parse, "truncated: header says 4294967296 float32 (17179869184 bytes) but only 12");
    // A zero dimension makes the product 0 but absurd dimensions are still refused.
    require_error(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 99999999999999), }")),
                  ErrorCode::limit_exceeded, "absurdly large");
    std::string rank65 = "(";
    for (int i = 0; i < 65; ++i) rank65 += "1,";
    rank65 += ")";
    require_error(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + rank65 + "}", f32x3)),
                  ErrorCode::limit_exceeded, "rank 65");
    std::vector<uint8_t> huge_header = make_npy(std::string(2 << 20, ' '), {}, 2);
    require_error(parse(huge_header), ErrorCode::limit_exceeded, "header length 2097152 is over the");
  }
  SECTION("truncated data") {
    const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 28, 28), }";
    require_error(parse(make_npy(header, std::vector<uint8_t>(100))), ErrorCode::parse,
                  "x.npy: truncated: header says 1x3x28x28 float32 (9408 bytes) but only 100 bytes follow");
    require_error(parse(make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", {1, 2, 3})),
                  ErrorCode::parse, "header says scalar int64 (8 bytes) but only 3 bytes follow");
    // Bytes after the data are ignored, as NumPy does.
    std::vector<uint8_t> extra = f32x3;
    extra.push_back(0xaa);
    REQUIRE(parse(make_npy(kF32Header3, extra)).is_ok());
  }
  SECTION("the source is named") {
    require_error(parse(make_npy(kF32Header3, {}), "entry 'x' of inputs.npz"), ErrorCode::parse,
                  "entry 'x' of inputs.npz: truncated");
  }
}

TEST_CASE("npy errors: files", "[npy]") {
  TempDir dir;
  require_error(npy_read_file(dir.file("missing.npy")), ErrorCode::io, dir.file("missing.npy") + ": cannot open");
  require_error(npy_read_file(dir.path.string()), ErrorCode::io, "not a regular file");

  const std::string path = dir.file("short.npy");
  std::vector<uint8_t> bytes = npy_write_bytes(make_tensor(DType::f32, {1, 3, 28, 28}));
  REQUIRE(bytes.size() == 128 + 9408);
  bytes.erase(bytes.begin() + 128 + 100, bytes.end());
  write_all(path, bytes);
  require_error(npy_read_file(path), ErrorCode::parse,
                path + ": truncated: header says 1x3x28x28 float32 (9408 bytes) but only 100 bytes follow");
  require_error(npy_read_file(kData + "bigendian_f4.npy"), ErrorCode::unsupported, "bigendian_f4.npy: big-endian");
  require_error(npy_read_file(kData + "fortran_2x3.npy"), ErrorCode::unsupported, "fortran_2x3.npy: fortran_order");
  require_error(npy_read_file(kData + "savez.npz"), ErrorCode::parse, "savez.npz: not a .npy file");

  const Status s = npy_write_file(dir.file("no/such/dir/x.npy"), make_tensor(DType::f32, {2}));
  REQUIRE_FALSE(s.is_ok());
  REQUIRE(s.code() == ErrorCode::io);
  REQUIRE_THAT(s.message(), Catch::Contains("no/such/dir/x.npy: cannot open for writing"));
  const Status undefined = npy_write_file(dir.file("u.npy"), Tensor());
  REQUIRE_FALSE(undefined.is_ok());
  REQUIRE(undefined.code() == ErrorCode::invalid_argument);
}

TEST_CASE("npz reads archives written by NumPy", "[npy]") {
  SECTION("np.savez (stored)") {
    auto r = npz_read_file(kData + "savez.npz");
    INFO((r ? std::string("ok") : r.error().message));
    REQUIRE(r.is_ok());
    REQUIRE(r->size() == 2);
    REQUIRE((*r)[0].first == "x");
    check_values<float>((*r)[0].second, {2, 3}, {0, 1, 2, 3, 4, 5});
    REQUIRE((*r)[1].first == "ids");
    check_values<int64_t>((*r)[1].second, {3}, {1, 2, 3});
  }
  SECTION("np.savez_compressed (deflated), float64 and bool") {
    auto r = npz_read_file(kData + "savez_compressed.npz");
    INFO((r ? std::string("ok") : r.error().message));
    REQUIRE(r.is_ok());
    REQUIRE(r->size() == 3);
    REQUIRE((*r)[0].first == "probs");
    check_values<float>((*r)[0].second, {3}, {0.25f, 0.5f, 0.125f});
    REQUIRE((*r)[1].first == "mask");
    check_values<bool>((*r)[1].second, {4}, {true, false, true, true});
    REQUIRE((*r)[2].first == "zeros");
    check_values<float>((*r)[2].second, {200}, std::vector<float>(200, 0.0f));
  }
}

TEST_CASE("npz round trip", "[npy]") {
  TempDir dir;
  const std::string path = dir.file("out.npz");
  NamedTensors in;
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::i8,
                          DType::u8,  DType::i32, DType::i64,  DType::boolean};
  const Shape shapes[] = {{}, {13}, {7, 3}, {2, 3, 5}, {2, 1, 3, 2}, {0, 4}, {5}, {1}};
  for (size_t i = 0; i < 8; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    name += '_';
    name += dtype_name(dtypes[i]);
    in.emplace_back(std::move(name), make_tensor(dtypes[i], shapes[i]));
  }
  in.emplace_back("input:0/odd name", make_tensor(DType::f32, {3}));
  REQUIRE(npz_write_file(path, in).is_ok());

  // Entries are stored uncompressed, so each entry's .npy image appears verbatim in the archive.
  const std::vector<uint8_t> archive = read_all(path);
  for (const auto& [name, t] : in) {
    const std::vector<uint8_t> image = npy_write_bytes(t);
    REQUIRE(std::search(archive.begin(), archive.end(), image.begin(), image.end()) != archive.end());
  }

  auto r = npz_read_file(path);
  INFO((r ? std::string("ok") : r.error().message));
  REQUIRE(r.is_ok());
  REQUIRE(r->size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    CAPTURE(in[i].first);
    REQUIRE((*r)[i].first == in[i].first);
    const Tensor& got = (*r)[i].second;
    const DType dt = in[i].second.dtype();
    REQUIRE(got.dtype() == (dt == DType::bf16 ? DType::f32 : dt));
    REQUIRE(got.shape() == in[i].second.shape());
    check_pattern(got, dt);
  }

  // Rewriting the same path replaces the archive.
  REQUIRE(npz_write_file(path, {{"only", make_tensor(DType::i32, {2})}}).is_ok());
  auto again = npz_read_file(path);
  REQUIRE(again.is_ok());
  REQUIRE(again->size() == 1);
  // An archive without entries is still a valid (empty) zip, as np.savez writes it.
  REQUIRE(npz_write_file(dir.file("empty.npz"), {}).is_ok());
  auto empty = npz_read_file(dir.file("empty.npz"));
  INFO((empty ? std::string("ok") : empty.error().message));
  REQUIRE(empty.is_ok());
  REQUIRE(empty->empty());
}

TEST_CASE("npz errors", "[npy]") {
  TempDir dir;
  auto require_npz_error = [](const Result<NamedTensors>& r, ErrorCode code, const std::string& fragment) {
    REQUIRE_FALSE(r.is_ok());
    INFO(r.error().message);
    REQUIRE(r.error().code == code);
    REQUIRE_THAT(r.error().message, Catch::Contains(fragment));
    REQUIRE(r.error().message.find('\n') == std::string::npos);
  };
  require_npz_error(npz_read_file(dir.file("missing.npz")), ErrorCode::io, dir.file("missing.npz") + ": cannot open");
  require_npz_error(npz_read_file(kData + "f32_2x3.npy"), ErrorCode::parse, "f32_2x3.npy: cannot open as a .npz");
  require_npz_error(npz_read_file(kData + "bad_entry.npz"), ErrorCode::parse,
                    "bad_entry.npz: entry 'readme.txt': not a .npy entry");
  require_npz_error(npz_read_file(kData + "truncated_entry.npz"), ErrorCode::parse,
                    "truncated_entry.npz: entry 'a.npy': truncated: header says 10 float32 (40 bytes) but only 8 bytes follow");

  SECTION("corrupted data fails the CRC check") {
    const std::string path = dir.file("crc.npz");
    REQUIRE(npz_write_file(path, {{"a", make_tensor(DType::f32, {16})}}).is_ok());
    std::vector<uint8_t> archive = read_all(path);
    const std::vector<uint8_t> image = npy_write_bytes(make_tensor(DType::f32, {16}));
    const auto at = std::search(archive.begin(), archive.end(), image.begin(), image.end());
    REQUIRE(at != archive.end());
    at[static_cast<std::ptrdiff_t>(image.size()) - 1] ^= 0x40;  // last data byte
    write_all(path, archive);
    require_npz_error(npz_read_file(path), ErrorCode::parse, "crc.npz: entry 'a.npy': corrupt entry");
  }
  SECTION("bad .npy inside an entry") {
    const std::string path = dir.file("bigendian.npz");
    // An archive holding NumPy's big-endian fixture: stored entries make this easy to build by
    // writing a tensor and patching its descr in place ('<f4' -> '>f4').
    REQUIRE(npz_write_file(path, {{"b", make_tensor(DType::f32, {3})}}).is_ok());
    std::vector<uint8_t> archive = read_all(path);
    const std::string descr = "'<f4'";
    const auto at = std::search(archive.begin(), archive.end(), descr.begin(), descr.end());
    REQUIRE(at != archive.end());
    at[1] = '>';
    write_all(path, archive);
    // The CRC no longer matches either, but the header is refused first.
    require_npz_error(npz_read_file(path), ErrorCode::unsupported, "bigendian.npz: entry 'b.npy': big-endian");
  }
  SECTION("writing") {
    const Status dup = npz_write_file(dir.file("dup.npz"), {{"a", make_tensor(DType::f32, {1})},
                                                            {"a", make_tensor(DType::f32, {1})}});
    REQUIRE_FALSE(dup.is_ok());
    REQUIRE(dup.code() == ErrorCode::invalid_argument);
    REQUIRE_THAT(dup.message(), Catch::Contains("dup.npz: two tensors are named 'a'"));
    REQUIRE_FALSE(std::filesystem::exists(dir.file("dup.npz")));
    const Status undefined = npz_write_file(dir.file("u.npz"), {{"u", Tensor()}});
    REQUIRE(undefined.code() == ErrorCode::invalid_argument);
    const Status nodir = npz_write_file(dir.file("no/such/dir/x.npz"), {{"a", make_tensor(DType::f32, {1})}});
    REQUIRE_FALSE(nodir.is_ok());
    REQUIRE(nodir.code() == ErrorCode::io);
    REQUIRE_THAT(nodir.message(), Catch::Contains("no/such/dir/x.npz"));
  }
}

// Hidden (run explicitly with "[.npy-export]"): writes kiln files to $KILN_NPY_EXPORT_DIR so that
// a developer can check that NumPy loads them; not part of the normal run, needs no Python.
TEST_CASE("npy export for a manual NumPy check", "[.npy-export]") {
  const char* dir = std::getenv("KILN_NPY_EXPORT_DIR");
  if (!dir) return;
  NamedTensors all;
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::i8,
                          DType::u8,  DType::i32, DType::i64,  DType::boolean};
  for (DType dt : dtypes) {
    const std::string name(dtype_name(dt));
    REQUIRE(npy_write_file(std::string(dir) + "/" + name + ".npy", make_tensor(dt, {2, 3, 5})).is_ok());
    REQUIRE(npy_write_file(std::string(dir) + "/" + name + "_scalar.npy", make_tensor(dt, {})).is_ok());
    all.emplace_back(name, make_tensor(dt, {7}));
  }
  REQUIRE(npz_write_file(std::string(dir) + "/all.npz", all).is_ok());
}
