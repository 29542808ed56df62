// What an image carries, for its SBOM: the Debian package owning each bundled library (asked
// of dpkg at build time; recorded as unknown where dpkg is absent or no package owns the file)
// and an SPDX 2.3 JSON document listing kiln and those packages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/core/status.h"

namespace kiln {

struct DebianPackage {
  std::string name;          // "libzip4"; empty when unknown
  std::string architecture;  // "amd64"
  std::string version;       // "1.9.2-1"
};

// Owner of each path (dpkg -S, trying the /usr-merged twin and the resolved path too); a path
// no package owns maps to an empty DebianPackage. Never fails: without dpkg all are unknown.
std::map<std::string, DebianPackage> debian_packages_owning(const std::vector<std::string>& paths);

struct SbomFile {
  std::string path;  // inside the image
  DebianPackage package;
};

struct SbomRequest {
  std::string image_name;
  std::string kiln_version;
  int64_t created = 0;
  std::vector<SbomFile> files;
};

// SPDX 2.3 JSON, sorted and compact; the same request gives the same bytes.
std::string sbom_spdx_json(const SbomRequest& request);

}  // namespace kiln
