#include "containers/oci/tar.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <set>

#include <archive.h>
#include <archive_entry.h>

namespace kiln::oci {
namespace {

struct SinkState {
  const ByteSink* sink;
  Status status;
};

la_ssize_t on_write(struct archive* a, void* client, const void* buffer, size_t length) {
  auto* state = static_cast<SinkState*>(client);
  Status s = (*state->sink)({static_cast<const uint8_t*>(buffer), length});
  if (!s) {
    state->status = s;
    archive_set_error(a, EIO, "%s", s.message().c_str());
    return -1;
  }
  return static_cast<la_ssize_t>(length);
}

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};
struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// Sorted, deduplicated entries with every parent folder present.
Result<std::vector<TarEntry>> normalize(std::vector<TarEntry> entries) {
  std::set<std::string> seen;
  std::vector<TarEntry> all;
  for (TarEntry& e : entries) {
    while (!e.path.empty() && e.path.back() == '/') e.path.pop_back();
    KILN_REQUIRE(!e.path.empty() && e.path.front() != '/' && e.path.find("..") == std::string::npos, invalid_argument,
                 "tar entry path '", e.path, "' must be relative and must not contain '..'");
    KILN_REQUIRE(seen.insert(e.path).second, invalid_argument, "tar entry '", e.path, "' appears twice");
  }
  for (const TarEntry& e : entries) {
    for (auto slash = e.path.find('/'); slash != std::string::npos; slash = e.path.find('/', slash + 1)) {
      const std::string parent = e.path.substr(0, slash);
      if (seen.insert(parent).second) all.push_back(TarEntry::folder(parent));
    }
  }
  for (TarEntry& e : entries) all.push_back(std::move(e));
  std::sort(all.begin(), all.end(), [](const TarEntry& a, const TarEntry& b) { return a.path < b.path; });
  return all;
}

Status write_entry(struct archive* a, const TarEntry& e, int64_t mtime) {
  std::unique_ptr<struct archive_entry, EntryDeleter> entry(archive_entry_new());
  std::unique_ptr<FILE, FileCloser> file;
  int64_t size = 0;
  if (e.directory) {
    archive_entry_set_pathname(entry.get(), (e.path + "/").c_str());
    archive_entry_set_filetype(entry.get(), AE_IFDIR);
  } else {
    archive_entry_set_pathname(entry.get(), e.path.c_str());
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    if (e.source.empty()) {
      size = static_cast<int64_t>(e.bytes.size());
    } else {
      std::error_code ec;
      const auto bytes = std::filesystem::file_size(e.source, ec);  // follows symlinks
      KILN_REQUIRE(!ec, io, "cannot read '", e.source, "' for '", e.path, "': ", ec.message());
      size = static_cast<int64_t>(bytes);
      file.reset(std::fopen(e.source.c_str(), "rb"));
      KILN_REQUIRE(file, io, "cannot open '", e.source, "' for '", e.path, "': ", std::strerror(errno));
    }
  }
  archive_entry_set_size(entry.get(), size);
  archive_entry_set_perm(entry.get(), e.mode);
  archive_entry_set_mtime(entry.get(), mtime, 0);
  archive_entry_set_uid(entry.get(), 0);
  archive_entry_set_gid(entry.get(), 0);
  KILN_REQUIRE(archive_write_header(a, entry.get()) == ARCHIVE_OK, io, "tar: cannot write the header of '", e.path,
               "': ", archive_error_string(a));
  if (e.directory) return Status::ok();
  if (!file) {
    if (!e.bytes.empty())
      KILN_REQUIRE(archive_write_data(a, e.bytes.data(), e.bytes.size()) == static_cast<la_ssize_t>(e.bytes.size()), io,
                   "tar: cannot write '", e.path, "': ", archive_error_string(a));
    return Status::ok();
  }
  std::vector<char> buffer(1 << 20);
  int64_t copied = 0;
  while (size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get())) {
    KILN_REQUIRE(archive_write_data(a, buffer.data(), n) == static_cast<la_ssize_t>(n), io, "tar: cannot write '",
                 e.path, "': ", archive_error_string(a));
    copied += static_cast<int64_t>(n);
  }
  KILN_REQUIRE(copied == size, io, "'", e.source, "' changed size while being archived");
  return Status::ok();
}

}  // namespace

TarEntry TarEntry::file(std::string path, std::string source, uint32_t mode) {
  TarEntry e;
  e.path = std::move(path);
  e.source = std::move(source);
  e.mode = mode;
  return e;
}

TarEntry TarEntry::data(std::string path, std::string bytes, uint32_t mode) {
  TarEntry e;
  e.path = std::move(path);
  e.bytes = std::move(bytes);
  e.mode = mode;
  return e;
}

TarEntry TarEntry::folder(std::string path, uint32_t mode) {
  TarEntry e;
  e.path = std::move(path);
  e.directory = true;
  e.mode = mode;
  return e;
}

Result<uint64_t> tar_write(std::vector<TarEntry> entries, int64_t mtime, const ByteSink& sink) {
  KILN_ASSIGN(sorted, normalize(std::move(entries)));
  // Declared before the archive: freeing it on an early return flushes through on_write into
  // `state` (clang's ASan caught the use after scope when they were declared after).
  uint64_t written = 0;
  ByteSink counting = [&](std::span<const uint8_t> bytes) {
    written += bytes.size();
    return sink(bytes);
  };
  SinkState state{&counting, Status::ok()};
  std::unique_ptr<struct archive, ArchiveDeleter> a(archive_write_new());
  KILN_REQUIRE(a, internal, "libarchive: out of memory");
  archive_write_set_format_pax_restricted(a.get());
  archive_write_add_filter_none(a.get());
  archive_write_set_bytes_per_block(a.get(), 512);  // no padding to 10 KiB records
  if (archive_write_open(a.get(), &state, nullptr, on_write, nullptr) != ARCHIVE_OK)
    return make_error(ErrorCode::io, "tar: ", archive_error_string(a.get()));
  for (const TarEntry& e : sorted) {
    Status s = write_entry(a.get(), e, mtime);
    if (!state.status) return state.status;
    KILN_TRY(s);
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    if (!state.status) return state.status;
    return make_error(ErrorCode::io, "tar: ", archive_error_string(a.get()));
  }
  return written;
}

Result<int64_t> source_date_epoch() {
  const char* text = std::getenv("SOURCE_DATE_EPOCH");
  if (!text || !*text) return int64_t{0};
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  KILN_REQUIRE(errno == 0 && end && *end == '\0' && v >= 0 && v < 253402300800LL, invalid_argument,
               "SOURCE_DATE_EPOCH='", text, "' must be seconds since 1970 (a non-negative integer)");
  return static_cast<int64_t>(v);
}

std::string rfc3339_utc(int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<uint64_t> tar_write_file(std::vector<TarEntry> entries, int64_t mtime, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".incoming";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), std::fclose);
  KILN_REQUIRE(f, io, "cannot create '", tmp, "': ", std::strerror(errno));
  ByteSink sink = [&](std::span<const uint8_t> bytes) -> Status {
    KILN_REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f.get()) == bytes.size(), io, "cannot write '", tmp, "'");
    return Status::ok();
  };
  auto written = tar_write(std::move(entries), mtime, sink);
  const bool closed = std::fclose(f.release()) == 0;
  std::error_code ec;
  if (written && closed) fs::rename(tmp, path, ec);
  if (!written || !closed || ec) {
    fs::remove(tmp, ec);
    if (!written) return written.status();
    return make_error(ErrorCode::io, "cannot write '", path, "'");
  }
  return *written;
}

}  // namespace kiln::oci
