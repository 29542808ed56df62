// IDX reading: handcrafted files, raw and gzip, and every malformed form giving a typed error.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/core/limits.h"
#include "kernels/io/idx.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

Bytes idx_header(uint8_t type, std::vector<uint32_t> dims) {
  Bytes b{0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_be32(b, d);
  return b;
}

// A gzip stream (zlib's deflate with a gzip wrapper) of `raw`.
Bytes gzip(const Bytes& raw) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&z, raw.size()) + 32);
  z.next_in = const_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Error read_error(const Bytes& b) {
  auto r = idx_read_bytes(b, "test.idx");
  REQUIRE_FALSE(r);
  return r.error();
}

fs::path write_temp(const std::string& name, const Bytes& b) {
  const fs::path p = fs::temp_directory_path() / ("kiln-idx-test-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return p;
}

}  // namespace

TEST_CASE("IDX uint8 images read raw and gzipped", "[idx]") {
  Bytes b = idx_header(0x08, {2, 2, 3});
  for (uint8_t v = 0; v < 12; ++v) b.push_back(static_cast<uint8_t>(v * 20));
  for (const Bytes& file : {b, gzip(b)}) {
    auto t = idx_read_bytes(file, "images");
    REQUIRE(t);
    REQUIRE(t->dtype() == DType::u8);
    REQUIRE(t->shape() == Shape{2, 2, 3});
    REQUIRE(t->data<uint8_t>()[0] == 0);
    REQUIRE(t->data<uint8_t>()[11] == 220);
  }
  // Two concatenated gzip members are one stream, as gzip(1) reads them.
  Bytes head(b.begin(), b.begin() + 10), tail(b.begin() + 10, b.end());
  Bytes two = gzip(head);
  const Bytes second = gzip(tail);
  two.insert(two.end(), second.begin(), second.end());
  auto t = idx_read_bytes(two, "two members");
  REQUIRE(t);
  REQUIRE(t->data<uint8_t>()[11] == 220);
}

TEST_CASE("IDX wider types are big-endian and convert to kiln dtypes", "[idx]") {
  Bytes i32 = idx_header(0x0C, {2});
  put_be32(i32, 0x01020304);
  put_be32(i32, 0xFFFFFFFF);
  auto a = idx_read_bytes(i32, "i32");
  REQUIRE(a);
  REQUIRE(a->dtype() == DType::i32);
  REQUIRE(a->data<int32_t>()[0] == 0x01020304);
  REQUIRE(a->data<int32_t>()[1] == -1);

  Bytes i16 = idx_header(0x0B, {2});
  for (uint8_t v : {0xFF, 0xFE, 0x01, 0x00}) i16.push_back(v);  // -2, 256
  auto s = idx_read_bytes(i16, "i16");
  REQUIRE(s);
  REQUIRE(s->dtype() == DType::i32);
  REQUIRE(s->data<int32_t>()[0] == -2);
  REQUIRE(s->data<int32_t>()[1] == 256);

  Bytes f32 = idx_header(0x0D, {1});
  put_be32(f32, 0x3FC00000);  // 1.5f
  auto f = idx_read_bytes(f32, "f32");
  REQUIRE(f);
  REQUIRE(f->data<float>()[0] == 1.5f);

  Bytes f64 = idx_header(0x0E, {1});
  put_be32(f64, 0xC0040000);  // -2.5
  put_be32(f64, 0);
  auto d = idx_read_bytes(f64, "f64");
  REQUIRE(d);
  REQUIRE(d->dtype() == DType::f32);
  REQUIRE(d->data<float>()[0] == -2.5f);
}

TEST_CASE("IDX images normalize like the training script and labels become int64", "[idx]") {
  Bytes b = idx_header(0x08, {1, 1, 3});
  for (uint8_t v : {0, 128, 255}) b.push_back(v);
  const fs::path images = write_temp("images.gz", gzip(b));
  auto x = idx_read_images(images.string(), {255.0f, 0.2860f, 0.3530f});
  REQUIRE(x);
  REQUIRE(x->dtype() == DType::f32);
  REQUIRE(x->data<float>()[0] == (0.0f / 255.0f - 0.2860f) / 0.3530f);
  REQUIRE(x->data<float>()[1] == (128.0f / 255.0f - 0.2860f) / 0.3530f);
  auto plain = idx_read_images(images.string());
  REQUIRE(plain);
  REQUIRE(plain->data<float>()[2] == 1.0f);

  Bytes l = idx_header(0x08, {3});
  for (uint8_t v : {9, 0, 7}) l.push_back(v);
  const fs::path labels = write_temp("labels", l);
  auto y = idx_read_labels(labels.string());
  REQUIRE(y);
  REQUIRE(y->dtype() == DType::i64);
  REQUIRE(y->data<int64_t>()[0] == 9);
  REQUIRE(y->data<int64_t>()[2] == 7);

  // Images as labels, labels as images: refused with the file named.
  auto wrong = idx_read_labels(images.string());
  REQUIRE_FALSE(wrong);
  REQUIRE_THAT(wrong.error().message, Catch::Contains(images.string()) && Catch::Contains("one dim"));
  REQUIRE_FALSE(idx_images_to_float(*y, {}, "labels"));
  fs::remove(images);
  fs::remove(labels);
}

TEST_CASE("IDX errors: truncated, garbage and over-limit files", "[idx]") {
  Bytes good = idx_header(0x08, {4});
  for (uint8_t v = 0; v < 4; ++v) good.push_back(v);

  SECTION("empty and short files") {
    REQUIRE(read_error({}).code == ErrorCode::parse);
    REQUIRE(read_error({0, 0, 8}).code == ErrorCode::parse);
    REQUIRE_THAT(read_error({0, 0, 8, 2, 0, 0, 0, 1}).message, Catch::Contains("truncated in its header"));
  }
  SECTION("bad magic and type") {
    const Error e = read_error({'P', 'K', 3, 4, 0, 0, 0, 0});
    REQUIRE(e.code == ErrorCode::parse);
    REQUIRE_THAT(e.message, Catch::Contains("test.idx") && Catch::Contains("not an IDX file"));
    REQUIRE_THAT(read_error(idx_header(0x0A, {1})).message, Catch::Contains("unknown IDX type code 0xa"));
    REQUIRE_THAT(read_error({0, 0, 8, 0}).message, Catch::Contains("0 dims"));
  }
  SECTION("raw data shorter or longer than declared") {
    Bytes shorter(good.begin(), good.end() - 1);
    const Error e = read_error(shorter);
    REQUIRE(e.code == ErrorCode::parse);
    REQUIRE_THAT(e.message, Catch::Contains("truncated") && Catch::Contains("4 bytes of data") && Catch::Contains("holds 3"));
    Bytes longer = good;
    longer.push_back(0);
    REQUIRE_THAT(read_error(longer).message, Catch::Contains("1 bytes of trailing data"));
  }
  SECTION("gzip: truncated, corrupt, trailing garbage, too little or too much data") {
    const Bytes gz = gzip(good);
    REQUIRE_THAT(read_error(Bytes(gz.begin(), gz.end() - 6)).message, Catch::Contains("truncated"));
    Bytes corrupt = gz;
    for (size_t i = 10; i < corrupt.size(); ++i) corrupt[i] = 0xFF;
    REQUIRE_THAT(read_error(corrupt).message, Catch::Contains("corrupt gzip data"));
    Bytes garbage = gz;
    garbage.push_back('x');
    REQUIRE_THAT(read_error(garbage).message, Catch::Contains("trailing garbage"));
    Bytes shorter(good.begin(), good.end() - 1);
    REQUIRE_THAT(read_error(gzip(shorter)).message, Catch::Contains("truncated") && Catch::Contains("ends after 3"));
    Bytes longer = good;
    longer.push_back(0);
    REQUIRE_THAT(read_error(gzip(longer)).message, Catch::Contains("trailing data"));
  }
  SECTION("declared sizes beyond the limits or the file are refused before allocating") {
    // 2^32-1 cubed elements: over kMaxTensorElements.
    Error e = read_error(idx_header(0x08, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}));
    REQUIRE(e.code == ErrorCode::limit_exceeded);
    REQUIRE_THAT(e.message, Catch::Contains("limit"));
    // 2^36 float64 elements read as float32 would be 256 GiB: over the per-array byte limit.
    e = read_error(idx_header(0x0E, {1u << 18, 1u << 18}));
    REQUIRE(e.code == ErrorCode::limit_exceeded);
    // 65 dims: over kMaxRank.
    Bytes deep{0, 0, 8, 65};
    REQUIRE(read_error(deep).code == ErrorCode::limit_exceeded);
    // 1 GiB declared in a raw file of a few bytes, and in a gzip file that cannot inflate to it.
    e = read_error(idx_header(0x08, {1u << 30}));
    REQUIRE(e.code == ErrorCode::parse);
    REQUIRE_THAT(e.message, Catch::Contains("truncated"));
    e = read_error(gzip(idx_header(0x08, {1u << 30})));
    REQUIRE_THAT(e.message, Catch::Contains("compressed bytes can hold"));
  }
  SECTION("files: missing") {
    auto r = idx_read_file("/nonexistent/t10k-images-idx3-ubyte.gz");
    REQUIRE_FALSE(r);
    REQUIRE(r.error().code == ErrorCode::io);
    REQUIRE_THAT(r.error().message, Catch::Contains("/nonexistent/t10k-images-idx3-ubyte.gz"));
  }
}
