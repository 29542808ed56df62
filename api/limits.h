// Hard limits on description and target documents (YAML or JSON from users and HTTP clients).
// api/ depends on nothing else of kiln's, so these live here rather than in kernels/core/limits.h;
// they are far above any real document (the examples are < 2 KB, nesting ≤ 5) and each error
// that hits one states it.
#pragma once

#include <cstddef>

namespace kiln::api::limits {

// Bytes of one document, checked before anything is parsed.
inline constexpr size_t kMaxDocumentBytes = size_t{1} << 20;
// Nesting of objects and arrays, checked on the raw text before a parser sees it (yaml-cpp
// recurses per level) and again, exactly, while the parsed tree is converted.
inline constexpr int kMaxNestingDepth = 64;
// Bytes of one string (key or value).
inline constexpr size_t kMaxStringBytes = size_t{1} << 16;
// Items of one array and members of one object.
inline constexpr size_t kMaxCollectionItems = 4096;
// Values in the whole document after YAML aliases are expanded (a "billion laughs" document
// of nested aliases is small as text and exponential as a tree).
inline constexpr size_t kMaxDocumentValues = size_t{1} << 16;
// Errors reported for one document; the rest are counted, not listed.
inline constexpr size_t kMaxReportedErrors = 32;

}  // namespace kiln::api::limits
