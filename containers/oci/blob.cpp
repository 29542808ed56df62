#include "containers/oci/blob.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cctype>
#include <filesystem>
#include <optional>
#include <atomic>
#include <memory>

#include <unistd.h>

#include <zlib.h>

#include "containers/oci/digest.h"

namespace kiln::oci {
namespace {

namespace fs = std::filesystem;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// A blob being written: bytes go to a temporary file and the hash; commit() renames it to its
// digest.
class BlobFile {
 public:
  // Temporary names are unique per writer, so layers may be written concurrently.
  explicit BlobFile(std::string blobs_dir) : dir_(std::move(blobs_dir)) {
    static std::atomic<int> counter{0};
    tmp_ = dir_ + "/.incoming-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }
  ~BlobFile() {
    if (file_) {
      file_.reset();
      std::remove(tmp_.c_str());
    }
  }

  Status open() {
    file_.reset(std::fopen(tmp_.c_str(), "wb"));
    KILN_REQUIRE(file_, io, "cannot create '", tmp_, "': ", std::strerror(errno));
    return Status::ok();
  }
  Status write(const void* data, size_t n) {
    if (n == 0) return Status::ok();
    hash_.update({static_cast<const uint8_t*>(data), n});
    size_ += n;
    KILN_REQUIRE(std::fwrite(data, 1, n, file_.get()) == n, io, "cannot write '", tmp_, "': ", std::strerror(errno));
    return Status::ok();
  }
  Result<Descriptor> commit(std::string media_type) {
    const bool flushed = std::fflush(file_.get()) == 0;
    file_.reset();
    const std::string digest = hash_.digest();
    const std::string path = dir_ + "/" + std::string(digest_hex(digest));
    std::error_code ec;
    if (flushed) fs::rename(tmp_, path, ec);
    if (!flushed || ec) {
      std::remove(tmp_.c_str());
      return make_error(ErrorCode::io, "cannot write blob '", path, "': ", flushed ? ec.message() : "flush failed");
    }
    return Descriptor{std::move(media_type), digest, size_, {}};
  }

 private:
  std::string dir_;
  std::string tmp_;
  std::unique_ptr<FILE, FileCloser> file_;
  Sha256 hash_;
  uint64_t size_ = 0;
};

}  // namespace

std::string compression_name(int gzip_level) {
  if (gzip_level == 0) return "none";
  return std::string("gzip (zlib ") + zlibVersion() + ", level " + std::to_string(gzip_level) + ")";
}

Result<Descriptor> blob_write(const std::string& blobs_dir, const std::string& media_type, const std::string& bytes) {
  BlobFile blob(blobs_dir);
  KILN_TRY(blob.open());
  KILN_TRY(blob.write(bytes.data(), bytes.size()));
  return blob.commit(media_type);
}

namespace {

struct TarDigest {
  std::string diff_id;
  uint64_t size = 0;
};

Result<TarDigest> tar_digest(std::vector<TarEntry> entries, int64_t mtime) {
  Sha256 diff;
  KILN_ASSIGN(size, tar_write(std::move(entries), mtime, [&](std::span<const uint8_t> bytes) {
    diff.update(bytes);
    return Status::ok();
  }));
  return TarDigest{diff.digest(), size};
}

// Copies a cached blob into the layout, hashing it on the way; nullopt when absent or corrupt.
std::optional<Descriptor> cache_fetch(const fs::path& cached, const std::string& blobs_dir, const std::string& media_type) {
  std::unique_ptr<FILE, FileCloser> in(std::fopen(cached.c_str(), "rb"));
  if (!in) return std::nullopt;
  BlobFile blob(blobs_dir);
  if (!blob.open()) return std::nullopt;
  std::vector<char> buffer(1 << 20);
  while (size_t n = std::fread(buffer.data(), 1, buffer.size(), in.get()))
    if (!blob.write(buffer.data(), n)) return std::nullopt;
  auto descriptor = blob.commit(media_type);
  if (!descriptor) return std::nullopt;
  // The cache file is named after the blob's digest: a mismatch means it was damaged.
  if (cached.filename().string() != std::string(digest_hex(descriptor->digest))) return std::nullopt;
  return *descriptor;
}

// Best effort: a copy under a temporary name, renamed into place.
void cache_store(const std::string& blob_path, const fs::path& cached) {
  std::error_code ec;
  fs::create_directories(cached.parent_path(), ec);
  const fs::path tmp = cached.string() + ".incoming-" + std::to_string(::getpid());
  if (!ec) fs::copy_file(blob_path, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, cached, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

Result<LayerBlob> layer_write(const std::string& blobs_dir, std::vector<TarEntry> entries, int64_t mtime, int gzip_level,
                              const std::string& cache_dir) {
  KILN_REQUIRE(gzip_level >= 0 && gzip_level <= 9, invalid_argument, "gzip level ", gzip_level, " is not in 0..9");
  // The cache key: the uncompressed content and exactly how it is compressed.
  fs::path cache_key_dir;
  if (!cache_dir.empty() && gzip_level > 0) {
    KILN_ASSIGN(tar, tar_digest(entries, mtime));
    std::string how = compression_name(gzip_level);
    for (char& c : how)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.') c = '-';
    cache_key_dir = fs::path(cache_dir) / "layers" / (std::string(digest_hex(tar.diff_id)) + "-" + how);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache_key_dir, ec)) {
      if (e.path().filename().string().find('.') != std::string::npos) continue;  // in-flight copies
      if (auto d = cache_fetch(e.path(), blobs_dir, kMediaTypeLayerTarGzip)) {
        d->annotations["kiln.compression"] = compression_name(gzip_level);
        return LayerBlob{std::move(*d), tar.diff_id, tar.size};
      }
    }
  }
  BlobFile blob(blobs_dir);
  KILN_TRY(blob.open());
  Sha256 diff;

  z_stream zs{};
  const bool gzip = gzip_level > 0;
  // windowBits 15 + 16: a gzip wrapper; with no deflateSetHeader zlib writes mtime 0 and no name.
  if (gzip && deflateInit2(&zs, gzip_level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return make_error(ErrorCode::internal, "zlib: deflateInit2 failed");
  struct DeflateEnd {
    z_stream* zs;
    bool active;
    ~DeflateEnd() {
      if (active) deflateEnd(zs);
    }
  } deflate_end{&zs, gzip};
  std::vector<unsigned char> out(1 << 18);

  auto pump = [&](const uint8_t* data, size_t n, int flush) -> Status {
    zs.next_in = const_cast<Bytef*>(data);
    zs.avail_in = static_cast<uInt>(n);
    int rc = Z_OK;
    do {
      zs.next_out = out.data();
      zs.avail_out = static_cast<uInt>(out.size());
      rc = deflate(&zs, flush);
      KILN_REQUIRE(rc != Z_STREAM_ERROR, internal, "zlib: deflate failed");
      KILN_TRY(blob.write(out.data(), out.size() - zs.avail_out));
    } while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    return Status::ok();
  };

  ByteSink sink = [&](std::span<const uint8_t> bytes) -> Status {
    diff.update(bytes);
    if (!gzip) return blob.write(bytes.data(), bytes.size());
    // deflate takes at most 4 GiB per call (uInt)
    for (size_t off = 0; off < bytes.size(); off += (1u << 30))
      KILN_TRY(pump(bytes.data() + off, std::min<size_t>(bytes.size() - off, 1u << 30), Z_NO_FLUSH));
    return Status::ok();
  };
  KILN_ASSIGN(tar_size, tar_write(std::move(entries), mtime, sink));
  if (gzip) KILN_TRY(pump(nullptr, 0, Z_FINISH));
  KILN_ASSIGN(descriptor, blob.commit(gzip ? kMediaTypeLayerTarGzip : kMediaTypeLayerTar));
  descriptor.annotations["kiln.compression"] = compression_name(gzip_level);
  if (!cache_key_dir.empty())
    cache_store(blobs_dir + "/" + std::string(digest_hex(descriptor.digest)), cache_key_dir / std::string(digest_hex(descriptor.digest)));
  return LayerBlob{std::move(descriptor), diff.digest(), tar_size};
}

}  // namespace kiln::oci
