#include "containers/registry/reference.h"

#include <regex>

namespace kiln::registry {
namespace {

constexpr const char* kForm = " (expected REGISTRY/REPOSITORY[:TAG], e.g. localhost:5000/kiln/model:v1)";

bool is_registry_host(std::string_view part) {
  return part == "localhost" || part.find('.') != std::string_view::npos || part.find(':') != std::string_view::npos;
}

}  // namespace

std::string ImageReference::to_string() const {
  std::string s = registry + "/" + repository;
  if (!digest.empty()) return s + "@" + digest;
  return s + ":" + tag;
}

Result<ImageReference> reference_parse(std::string_view text) {
  static const std::regex host_re(R"(^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)(:[0-9]{1,5})?$)");
  static const std::regex component_re(R"(^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$)");
  static const std::regex tag_re(R"(^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$)");
  static const std::regex digest_re(R"(^sha256:[0-9a-f]{64}$)");

  std::string s(text);
  KILN_REQUIRE(!s.empty(), invalid_argument, "empty image reference", kForm);
  ImageReference ref;
  if (auto at = s.find('@'); at != std::string::npos) {
    ref.digest = s.substr(at + 1);
    s.resize(at);
    KILN_REQUIRE(std::regex_match(ref.digest, digest_re), invalid_argument, "image reference '", text,
                 "': digest '", ref.digest, "' is not sha256:<64 lowercase hex digits>");
  }
  const auto slash = s.find('/');
  KILN_REQUIRE(slash != std::string::npos && is_registry_host(std::string_view(s).substr(0, slash)), invalid_argument,
               "image reference '", text, "' names no registry", kForm);
  ref.registry = s.substr(0, slash);
  KILN_REQUIRE(std::regex_match(ref.registry, host_re), invalid_argument, "image reference '", text, "': '",
               ref.registry, "' is not a registry host[:port]", kForm);
  std::string rest = s.substr(slash + 1);
  // A ':' after the last '/' starts the tag.
  if (auto colon = rest.rfind(':'); colon != std::string::npos && rest.find('/', colon) == std::string::npos) {
    ref.tag = rest.substr(colon + 1);
    rest.resize(colon);
    KILN_REQUIRE(std::regex_match(ref.tag, tag_re), invalid_argument, "image reference '", text, "': tag '", ref.tag,
                 "' is not valid (letters, digits, '_', '.', '-'; at most 128, not starting with '.' or '-')");
  }
  KILN_REQUIRE(!rest.empty(), invalid_argument, "image reference '", text, "' names no repository", kForm);
  KILN_REQUIRE(rest.size() <= 255, invalid_argument, "image reference '", text, "': repository longer than 255 characters");
  size_t begin = 0;
  while (true) {
    const auto end = rest.find('/', begin);
    const std::string component = rest.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    KILN_REQUIRE(std::regex_match(component, component_re), invalid_argument, "image reference '", text,
                 "': repository component '", component,
                 "' is not valid (lowercase letters and digits, separated by '.', '_', '__' or '-')");
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  ref.repository = rest;
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

}  // namespace kiln::registry
