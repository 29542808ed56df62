// The perfmodel's on-disk caches (fitted predictors, model costs): where they live and how a
// file is written so that concurrent readers never see half of it.
#pragma once

#include <string>

#include "kernels/core/status.h"

namespace kiln::perf {

// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
std::string kiln_cache_dir();

// Writes `text` to a temporary file beside `path` and renames it over `path` (folders created).
Status cache_file_write(const std::string& path, const std::string& text);

// The whole file, or an error when it cannot be read.
Result<std::string> cache_file_read(const std::string& path);

}  // namespace kiln::perf
