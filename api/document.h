// Reads a YAML or JSON document into a JSON tree, within the hard limits of api/limits.h.
// YAML is read with the YAML 1.2 core schema (true/false, null, ints, floats; everything else,
// and every quoted scalar, is a string); keys must be scalars and unique; aliases are expanded.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/error.h"

namespace kiln::api {

enum class DocumentFormat { automatic, json, yaml };

struct Document {
  nlohmann::ordered_json root;
  std::string source;              // file name or label, used in every error
  std::map<std::string, int> lines;  // JSON pointer → 1-based line (YAML only)

  int line_of(const std::string& pointer) const;
};

// `automatic` reads JSON when the first non-blank character is '{' and the text parses as
// JSON, and YAML otherwise.
Result<Document> document_parse(std::string_view text, std::string_view source,
                                 DocumentFormat format = DocumentFormat::automatic);
// Reads a file (at most limits::kMaxDocumentBytes); the format follows the extension
// (.json, .yaml, .yml), else `automatic`.
Result<Document> document_read(const std::string& path, DocumentFormat format = DocumentFormat::automatic);

// Appends "/token" with JSON-pointer escaping (~ → ~0, / → ~1).
void pointer_append(std::string& pointer, std::string_view token);

}  // namespace kiln::api
