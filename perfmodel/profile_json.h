// Target profiles as JSON, so a site can run `kiln bench-target` on its cluster nodes (a Slurm
// job, say) and upload the result: {"format": "kiln-target-profile", "version": 1, "targets":
// [{fingerprint, source, skipped, measurements}]}. Import checks the whole file before writing
// anything and writes it in one transaction: a refused or failing import leaves the store as it was.
#pragma once

#include <string>
#include <string_view>

#include "kernels/core/status.h"
#include "perfmodel/store.h"

namespace kiln::perf {

inline constexpr const char* kProfileFormat = "kiln-target-profile";
inline constexpr int kProfileVersion = 1;

struct ProfileCounts {
  int64_t targets = 0;
  int64_t measurements = 0;
};

// Writes every target of the store (or only `target_id` when not empty) to `path`.
Result<ProfileCounts> profile_export(BenchmarkStore& store, const std::string& path, const std::string& target_id = "");

// Imports the profile at `path` into the store; targets become source "imported" unless already
// measured here, and a measurement replaces the stored one with the same identity.
Result<ProfileCounts> profile_import(BenchmarkStore& store, const std::string& path);
// The same from the file's bytes (an upload); `path` names them in errors.
Result<ProfileCounts> profile_import_text(BenchmarkStore& store, std::string_view text, const std::string& path);

}  // namespace kiln::perf
