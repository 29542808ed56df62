// Image references for push: "REGISTRY/REPO:TAG" or "REGISTRY/REPO@sha256:…". The registry
// part is required (kiln never guesses Docker Hub): the first path component names it when it
// has a '.' or ':' or is "localhost", as in Docker's reference grammar.
#pragma once

#include <string>
#include <string_view>

#include "kernels/core/status.h"

namespace kiln::registry {

struct ImageReference {
  std::string registry;    // "127.0.0.1:5000", "ghcr.io" (what the URL's host part becomes)
  std::string repository;  // "team/model"
  std::string tag;         // "v1"; "latest" when neither tag nor digest is given
  std::string digest;      // "sha256:<hex>" when given by digest; then tag is empty

  std::string to_string() const;  // "registry/repository:tag" (or "@digest")
};

// Parses and validates `text` (repository components: lowercase [a-z0-9] runs joined by '.',
// '_', '__' or dashes; tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}); the error says which part is
// wrong and shows the expected form.
Result<ImageReference> reference_parse(std::string_view text);

}  // namespace kiln::registry
