// IDX reader: one pull-stream over the bytes (copied, or inflated with zlib when they start with
// gzip's magic), the header checked against every limit, then the data read in chunks straight
// into the tensor and converted from big-endian.
#include "kernels/io/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "kernels/core/limits.h"

namespace kiln {
namespace {

// Deflate cannot expand better than about 1032:1 (258-byte matches coded in 2 bits), so a gzip
// file of S bytes holds at most 1032 * S bytes: larger declared data means a truncated file, and
// is refused before anything of that size is allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr size_t kChunkBytes = size_t{1} << 16;

struct IdxType {
  uint8_t code;
  const char* name;
  size_t file_size;  // bytes per element in the file
  DType dtype;       // how kiln holds it
};
constexpr IdxType kTypes[] = {
    {0x08, "uint8", 1, DType::u8},   {0x09, "int8", 1, DType::i8},     {0x0B, "int16", 2, DType::i32},
    {0x0C, "int32", 4, DType::i32},  {0x0D, "float32", 4, DType::f32}, {0x0E, "float64", 8, DType::f32},
};

bool is_gzip(std::span<const uint8_t> bytes, size_t pos) {
  return bytes.size() - pos >= 2 && bytes[pos] == 0x1f && bytes[pos + 1] == 0x8b;
}

// The file's contents, raw or inflated, read front to back.
class ByteStream {
 public:
  ByteStream(std::span<const uint8_t> bytes, const std::string& what)
      : bytes_(bytes), what_(what), gzip_(is_gzip(bytes, 0)) {}
  ~ByteStream() {
    if (z_open_) inflateEnd(&z_);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  bool gzip() const { return gzip_; }

  // Fills dst with up to n bytes; fewer only where the data ends.
  Result<size_t> read(uint8_t* dst, size_t n) {
    if (!gzip_) {
      const size_t got = std::min(n, bytes_.size() - pos_);
      if (got > 0) std::memcpy(dst, bytes_.data() + pos_, got);
      pos_ += got;
      return got;
    }
    if (!z_open_) {
      KILN_REQUIRE(inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK, internal, "zlib could not start inflating '", what_, "'");
      z_open_ = true;
    }
    size_t got = 0;
    while (got < n && !ended_) {
      const size_t in_avail = std::min<size_t>(bytes_.size() - pos_, UINT_MAX);
      z_.next_in = const_cast<Bytef*>(bytes_.data() + pos_);  // zlib's API is not const-correct
      z_.avail_in = static_cast<uInt>(in_avail);
      z_.next_out = dst + got;
      z_.avail_out = static_cast<uInt>(std::min<size_t>(n - got, UINT_MAX));
      const uInt out_before = z_.avail_out;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      pos_ += in_avail - z_.avail_in;
      got += out_before - z_.avail_out;
      if (rc == Z_STREAM_END) {
        if (pos_ == bytes_.size()) {
          ended_ = true;
        } else {
          // Concatenated gzip members (as `cat a.gz b.gz` makes) are one stream; anything else
          // after the data is corruption.
          KILN_REQUIRE(is_gzip(bytes_, pos_), parse, "'", what_, "' has ", bytes_.size() - pos_,
                       " bytes of trailing garbage after its gzip data");
          KILN_REQUIRE(inflateReset(&z_) == Z_OK, internal, "zlib could not restart inflating '", what_, "'");
        }
        continue;
      }
      KILN_REQUIRE(rc == Z_OK || rc == Z_BUF_ERROR, parse, "'", what_, "' has corrupt gzip data (zlib: ",
                   z_.msg ? std::string(z_.msg) : "error " + std::to_string(rc), ")");
      KILN_REQUIRE(!(z_.avail_out > 0 && pos_ == bytes_.size()), parse, "'", what_,
                   "' is truncated: its gzip data ends before the end of the compressed stream");
    }
    return got;
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& what_;
  bool gzip_;
  size_t pos_ = 0;
  z_stream z_{};
  bool z_open_ = false;
  bool ended_ = false;
};

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Converts `count` big-endian elements of `type` at src into dst (the tensor's dtype).
void convert_chunk(const IdxType& type, const uint8_t* src, size_t count, void* dst) {
  switch (type.code) {
    case 0x08:
    case 0x09: std::memcpy(dst, src, count); break;
    case 0x0B: {
      auto* out = static_cast<int32_t*>(dst);
      for (size_t i = 0; i < count; ++i)
        out[i] = static_cast<int16_t>(static_cast<uint16_t>((src[2 * i] << 8) | src[2 * i + 1]));
      break;
    }
    case 0x0C:
    case 0x0D: {
      auto* out = static_cast<uint32_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = load_be32(src + 4 * i);
      break;
    }
    case 0x0E: {
      auto* out = static_cast<float*>(dst);
      for (size_t i = 0; i < count; ++i) {
        const uint64_t bits = (uint64_t{load_be32(src + 8 * i)} << 32) | load_be32(src + 8 * i + 4);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        out[i] = static_cast<float>(d);
      }
      break;
    }
    default: break;
  }
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

Result<Tensor> idx_read_bytes(std::span<const uint8_t> bytes, const std::string& what) {
  ByteStream stream(bytes, what);
  uint8_t magic[4];
  KILN_ASSIGN(magic_got, stream.read(magic, sizeof magic));
  KILN_REQUIRE(magic_got == sizeof magic, parse, "'", what, "' is not an IDX file: it holds only ", magic_got,
               " bytes", stream.gzip() ? " after decompression" : "", " (an IDX header takes at least 8)");
  char magic_hex[16];
  std::snprintf(magic_hex, sizeof magic_hex, "0x%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
  KILN_REQUIRE(magic[0] == 0 && magic[1] == 0, parse, "'", what, "' is not an IDX file (magic ", magic_hex,
               "; IDX files start with 0x0000 then a type code and the number of dims)");
  const IdxType* type = nullptr;
  for (const IdxType& t : kTypes)
    if (t.code == magic[2]) type = &t;
  KILN_REQUIRE(type != nullptr, parse, "'", what, "' has an unknown IDX type code 0x", std::hex, int{magic[2]},
               std::dec, " (magic ", magic_hex, "; known: 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, ",
               "0x0d float32, 0x0e float64)");
  const int64_t rank = magic[3];
  KILN_REQUIRE(rank >= 1, parse, "'", what, "' declares 0 dims (magic ", magic_hex, ")");
  KILN_REQUIRE(rank <= limits::kMaxRank, limit_exceeded, "'", what, "' declares ", rank,
               " dims, more than the limit of ", limits::kMaxRank);

  std::vector<uint8_t> dim_bytes(static_cast<size_t>(4 * rank));
  KILN_ASSIGN(dims_got, stream.read(dim_bytes.data(), dim_bytes.size()));
  KILN_REQUIRE(dims_got == dim_bytes.size(), parse, "'", what, "' is truncated in its header: ", rank,
               " dims need ", dim_bytes.size(), " bytes, found ", dims_got);
  Shape shape;
  int64_t numel = 1;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = load_be32(dim_bytes.data() + 4 * i);
    shape.push_back(d);
    // Each dim fits in 32 bits, so the product stays below 2^72 only if checked as it grows.
    KILN_REQUIRE(d == 0 || numel <= limits::kMaxTensorElements / d, limit_exceeded, "'", what,
                 "' declares shape ", shape_to_string(shape), "..., more than the limit of ", limits::kMaxTensorElements,
                 " elements");
    numel *= d;
  }
  const uint64_t file_bytes = static_cast<uint64_t>(numel) * type->file_size;
  const uint64_t tensor_bytes = static_cast<uint64_t>(numel) * dtype_size(type->dtype);
  KILN_REQUIRE(tensor_bytes <= static_cast<uint64_t>(limits::kMaxValueBytes), limit_exceeded, "'", what,
               "' declares ", type->name, shape_to_string(shape), " (", tensor_bytes, " bytes), more than the limit of ",
               limits::kMaxValueBytes, " bytes per array");
  const uint64_t header_bytes = 4 + dim_bytes.size();
  if (stream.gzip()) {
    KILN_REQUIRE(header_bytes + file_bytes <= kMaxDeflateRatio * bytes.size(), parse, "'", what, "' declares ",
                 type->name, shape_to_string(shape), " (", file_bytes, " bytes of data), more than its ", bytes.size(),
                 " compressed bytes can hold: the file is truncated or its header is corrupt");
  } else {
    const uint64_t have = bytes.size() - header_bytes;
    KILN_REQUIRE(have >= file_bytes, parse, "'", what, "' is truncated: it declares ", type->name, shape_to_string(shape),
                 " (", file_bytes, " bytes of data) but holds ", have);
    KILN_REQUIRE(have == file_bytes, parse, "'", what, "' has ", have - file_bytes,
                 " bytes of trailing data after its declared ", type->name, shape_to_string(shape));
  }

  Tensor tensor = Tensor::zeros(type->dtype, shape);
  auto* dst = static_cast<uint8_t*>(tensor.raw());
  const size_t dst_elem = dtype_size(type->dtype);
  const size_t chunk_elems = kChunkBytes / type->file_size;
  std::vector<uint8_t> chunk(chunk_elems * type->file_size);
  for (int64_t done = 0; done < numel;) {
    const size_t count = static_cast<size_t>(std::min<int64_t>(numel - done, static_cast<int64_t>(chunk_elems)));
    KILN_ASSIGN(got, stream.read(chunk.data(), count * type->file_size));
    KILN_REQUIRE(got == count * type->file_size, parse, "'", what, "' is truncated: it declares ", type->name,
                 shape_to_string(shape), " (", file_bytes, " bytes of data) but its data ends after ",
                 static_cast<uint64_t>(done) * type->file_size + got);
    convert_chunk(*type, chunk.data(), count, dst + static_cast<size_t>(done) * dst_elem);
    done += static_cast<int64_t>(count);
  }
  if (stream.gzip()) {
    uint8_t extra[1];
    KILN_ASSIGN(extra_got, stream.read(extra, sizeof extra));
    KILN_REQUIRE(extra_got == 0, parse, "'", what, "' has trailing data after its declared ", type->name,
                 shape_to_string(shape));
  }
  return tensor;
}

Result<Tensor> idx_read_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  KILN_REQUIRE(!ec, io, "cannot read IDX file '", path, "': ", ec.message());
  KILN_REQUIRE(size <= static_cast<uint64_t>(limits::kMaxValueBytes), limit_exceeded, "IDX file '", path, "' is ",
               size, " bytes, more than the limit of ", limits::kMaxValueBytes);
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  KILN_REQUIRE(f != nullptr, io, "cannot open IDX file '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f.get());
  KILN_REQUIRE(got == bytes.size(), io, "cannot read IDX file '", path, "': read ", got, " of ", size, " bytes");
  return idx_read_bytes(bytes, path);
}

Result<Tensor> idx_images_to_float(const Tensor& images, const IdxNormalize& normalize, const std::string& what) {
  KILN_REQUIRE(images.dtype() == DType::u8, invalid_argument, "'", what, "' holds ", images.describe(),
               ": images must be uint8 (IDX type 0x08)");
  KILN_REQUIRE(normalize.divisor != 0.0f && normalize.std != 0.0f, invalid_argument,
               "image normalization needs a non-zero divisor and std");
  Tensor out = Tensor::zeros(DType::f32, images.shape());
  const uint8_t* src = images.data<uint8_t>();
  float* dst = out.data<float>();
  // A table per pixel value: same float32 operations as the training script, 256 times only.
  float table[256];
  for (int p = 0; p < 256; ++p) table[p] = (static_cast<float>(p) / normalize.divisor - normalize.mean) / normalize.std;
  for (int64_t i = 0; i < images.numel(); ++i) dst[i] = table[src[i]];
  return out;
}

Result<Tensor> idx_labels_to_int64(const Tensor& labels, const std::string& what) {
  KILN_REQUIRE(labels.rank() == 1, invalid_argument, "'", what, "' holds ", labels.describe(),
               ": labels must have one dim (one class per sample)");
  KILN_REQUIRE(!dtype_is_float(labels.dtype()) && labels.dtype() != DType::boolean, invalid_argument, "'", what,
               "' holds ", labels.describe(), ": labels must be integers");
  Tensor out = Tensor::zeros(DType::i64, labels.shape());
  for (int64_t i = 0; i < labels.numel(); ++i) out.data<int64_t>()[i] = labels.value_as_int(i);
  return out;
}

Result<Tensor> idx_read_images(const std::string& path, const IdxNormalize& normalize) {
  KILN_ASSIGN(raw, idx_read_file(path));
  return idx_images_to_float(raw, normalize, path);
}

Result<Tensor> idx_read_labels(const std::string& path) {
  KILN_ASSIGN(raw, idx_read_file(path));
  return idx_labels_to_int64(raw, path);
}

}  // namespace kiln
