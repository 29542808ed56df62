// NumPy .npz archives via libzip. Reading accepts stored and deflated entries (np.savez,
// np.savez_compressed); writing stores entries uncompressed like np.savez.
#include "kernels/io/npz.h"

#include <zip.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <memory>
#include <set>
#include <string_view>

#include "kernels/io/npy_detail.h"

namespace kiln {
namespace {

constexpr std::string_view kSuffix = ".npy";

std::string zip_error_text(int code) {
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string text = zip_error_strerror(&err);
  zip_error_fini(&err);
  return text;
}

struct ArchiveCloser {
  void operator()(zip_t* za) const {
    if (za) zip_discard(za);
  }
};
using ArchivePtr = std::unique_ptr<zip_t, ArchiveCloser>;

struct EntryCloser {
  void operator()(zip_file_t* f) const {
    if (f) zip_fclose(f);
  }
};
using EntryPtr = std::unique_ptr<zip_file_t, EntryCloser>;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Result<Tensor> read_entry(zip_t* za, zip_uint64_t index, const zip_stat_t& st, const std::string& what) {
  KILN_REQUIRE(st.valid & ZIP_STAT_SIZE, parse, what, ": the archive does not record the entry's size");
  // The whole entry (preamble + header + data) may not be larger than the biggest valid .npy.
  constexpr uint64_t kMaxEntry = npy_detail::kMaxDataBytes + npy_detail::kMaxHeaderBytes + 12;
  KILN_REQUIRE(st.size <= kMaxEntry, limit_exceeded, what, ": uncompressed size ", st.size, " bytes is over the ",
               npy_detail::kMaxDataBytes, "-byte limit on one array");
  EntryPtr file(zip_fopen_index(za, index, 0));
  KILN_REQUIRE(file != nullptr, io, what, ": cannot open: ", zip_strerror(za));
  uint64_t remaining = st.size;
  const npy_detail::ReadFn read = [&](void* dst, size_t n) -> Result<size_t> {
    const auto want = static_cast<zip_uint64_t>(std::min<uint64_t>(n, remaining));
    if (want == 0) return size_t{0};
    const zip_int64_t got = zip_fread(file.get(), dst, want);
    KILN_REQUIRE(got >= 0, io, what, ": read error: ", zip_file_strerror(file.get()));
    remaining -= static_cast<uint64_t>(got);
    return static_cast<size_t>(got);
  };
  KILN_ASSIGN(tensor, npy_detail::read_stream(read, st.size, what));
  // Read to the end so that libzip checks the CRC, and make sure the entry holds no more data
  // than its recorded size.
  uint8_t sink[4096];
  while (remaining > 0) {
    KILN_ASSIGN(got, read(sink, sizeof sink));
    if (got == 0) break;
  }
  const zip_int64_t extra = zip_fread(file.get(), sink, 1);
  KILN_REQUIRE(extra >= 0, parse, what, ": corrupt entry: ", zip_file_strerror(file.get()));
  KILN_REQUIRE(extra == 0, parse, what, ": corrupt entry: more data than its recorded size of ", st.size, " bytes");
  return tensor;
}

}  // namespace

Result<NamedTensors> npz_read_file(const std::string& path) {
  int code = 0;
  ArchivePtr za(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (!za) {
    const ErrorCode ec = code == ZIP_ER_NOZIP || code == ZIP_ER_INCONS ? ErrorCode::parse : ErrorCode::io;
    return make_error(ec, path, ": cannot open as a .npz archive: ", zip_error_text(code));
  }
  const zip_int64_t count = zip_get_num_entries(za.get(), 0);
  KILN_REQUIRE(count >= 0, parse, path, ": cannot list the archive's entries: ", zip_strerror(za.get()));
  NamedTensors out;
  std::set<std::string> seen;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    zip_stat_init(&st);
    KILN_REQUIRE(zip_stat_index(za.get(), index, 0, &st) == 0 && (st.valid & ZIP_STAT_NAME) && st.name, parse,
                 path, ": cannot read entry ", i, ": ", zip_strerror(za.get()));
    const std::string entry = st.name;
    if (!entry.empty() && entry.back() == '/') continue;  // a directory, holds no data
    const std::string what = path + ": entry '" + entry + "'";
    KILN_REQUIRE(ends_with(entry, kSuffix), parse, what,
                 ": not a .npy entry (a .npz holds only <name>.npy entries)");
    std::string name = entry.substr(0, entry.size() - kSuffix.size());
    KILN_REQUIRE(seen.insert(name).second, parse, what, ": the archive holds two entries with this name");
    KILN_ASSIGN(tensor, read_entry(za.get(), index, st, what));
    out.emplace_back(std::move(name), std::move(tensor));
  }
  return out;
}

Status npz_write_file(const std::string& path, const NamedTensors& tensors) {
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    KILN_REQUIRE(seen.insert(name).second, invalid_argument, path, ": two tensors are named '", name, "'");
    KILN_REQUIRE(tensor.defined(), invalid_argument, path, ": tensor '", name, "' is undefined");
    KILN_REQUIRE(npy_detail::data_bytes(tensor) <= npy_detail::kMaxDataBytes, limit_exceeded, path, ": tensor '",
                 name, "' (", tensor.describe(), ") is over the ", npy_detail::kMaxDataBytes,
                 "-byte limit on one array");
  }

  if (tensors.empty()) {
    // libzip writes no file for an archive without entries; np.savez writes the 22-byte
    // end-of-central-directory record alone, so do the same.
    const uint8_t empty_zip[22] = {'P', 'K', 5, 6};
    std::FILE* f = std::fopen(path.c_str(), "wb");
    KILN_REQUIRE(f != nullptr, io, path, ": cannot create: ", std::strerror(errno));
    const bool ok = std::fwrite(empty_zip, 1, sizeof empty_zip, f) == sizeof empty_zip;
    KILN_REQUIRE(std::fclose(f) == 0 && ok, io, path, ": write failed: ", std::strerror(errno));
    return Status::ok();
  }

  int code = 0;
  ArchivePtr za(zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  KILN_REQUIRE(za != nullptr, io, path, ": cannot create: ", zip_error_text(code));

  // libzip reads the sources only in zip_close, so everything they point at lives until then:
  // the headers and bfloat16 conversions here, the tensors' own buffers in `tensors`.
  std::vector<std::vector<uint8_t>> owned;
  std::vector<std::vector<zip_buffer_fragment_t>> fragments;
  owned.reserve(tensors.size() * 2);
  fragments.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    std::vector<zip_buffer_fragment_t>& frags = fragments.emplace_back();
    owned.push_back(npy_detail::header_bytes(tensor));
    frags.push_back({owned.back().data(), owned.back().size()});
    if (tensor.numel() > 0) {
      if (tensor.dtype() == DType::bf16) {
        std::vector<uint8_t>& wide = owned.emplace_back();
        npy_detail::append_data(tensor, wide);
        frags.push_back({wide.data(), wide.size()});
      } else {
        // zip_buffer_fragment_t wants a non-const pointer; libzip only reads it (freep = 0).
        frags.push_back({static_cast<zip_uint8_t*>(const_cast<void*>(tensor.raw())), tensor.nbytes()});
      }
    }
    const std::string entry = name + std::string(kSuffix);
    zip_source_t* src = zip_source_buffer_fragment(za.get(), frags.data(), frags.size(), 0);
    KILN_REQUIRE(src != nullptr, io, path, ": entry '", entry, "': ", zip_strerror(za.get()));
    const zip_int64_t index = zip_file_add(za.get(), entry.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(src);
      return make_error(ErrorCode::io, path, ": entry '", entry, "': ", zip_strerror(za.get()));
    }
    KILN_REQUIRE(zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) == 0, io,
                 path, ": entry '", entry, "': ", zip_strerror(za.get()));
    // A fixed DOS time (1980-01-01 00:00), not the clock, so the same tensors give the same
    // bytes (images carry .npz self-test vectors and must be reproducible).
    KILN_REQUIRE(zip_file_set_dostime(za.get(), static_cast<zip_uint64_t>(index), 0, (1 << 5) | 1, 0) == 0, io,
                 path, ": entry '", entry, "': ", zip_strerror(za.get()));
  }
  if (zip_close(za.get()) != 0) return make_error(ErrorCode::io, path, ": write failed: ", zip_strerror(za.get()));
  za.release();  // zip_close freed it
  return Status::ok();
}

}  // namespace kiln
