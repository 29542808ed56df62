// Reproducible tar streams (libarchive, pax restricted = ustar unless a name needs more):
// entries sorted by path, missing parent folders added, every mtime the same fixed value,
// uid/gid 0 with empty user/group names, no atime/ctime, regular files and folders only.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/status.h"

namespace kiln::oci {

struct TarEntry {
  std::string path;         // relative, '/'-separated, no leading '/': "kiln/bin/kiln-runtime"
  bool directory = false;
  uint32_t mode = 0644;     // permission bits (0755 for executables and folders)
  std::string source;       // a file to copy (symlinks are followed) ...
  std::string bytes;        // ... or the contents themselves when `source` is empty

  static TarEntry file(std::string path, std::string source, uint32_t mode = 0644);
  static TarEntry data(std::string path, std::string bytes, uint32_t mode = 0644);
  static TarEntry folder(std::string path, uint32_t mode = 0755);
};

// Receives the stream in order; an error stops the writer.
using ByteSink = std::function<Status(std::span<const uint8_t>)>;

// Writes the archive; returns the bytes written. Errors name the entry.
Result<uint64_t> tar_write(std::vector<TarEntry> entries, int64_t mtime, const ByteSink& sink);

// tar_write into a file, atomically: written as PATH.incoming and renamed when complete.
Result<uint64_t> tar_write_file(std::vector<TarEntry> entries, int64_t mtime, const std::string& path);

// SOURCE_DATE_EPOCH when set (an integer), else 0 (1970-01-01T00:00:00Z).
Result<int64_t> source_date_epoch();

// "2024-05-01T12:00:00Z"
std::string rfc3339_utc(int64_t seconds);

}  // namespace kiln::oci
