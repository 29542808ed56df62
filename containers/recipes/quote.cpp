// Quoting for the recipes' four languages (YAML, POSIX shell, Dockerfile, comments): values from
// the target description and the model name may hold any character.
#include <array>
#include <cstdio>

#include "containers/recipes/recipes.h"

namespace kiln::recipes {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_control(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

bool ascii_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Words a YAML 1.1 reader (yaml-cpp, PyYAML, Go's yaml.v2) takes as booleans or null.
constexpr std::array<const char*, 11> kYamlKeywords = {"y", "n", "yes", "no", "true", "false",
                                                       "on", "off", "null", "nan", "inf"};

}  // namespace

std::string yaml_scalar(std::string_view text) {
  bool plain = !text.empty() && (is_alpha(text[0]) || text[0] == '/');
  for (char c : text)
    plain = plain && (is_alpha(c) || is_digit(c) || c == '.' || c == '_' || c == '/' || c == '-');
  for (const char* word : kYamlKeywords) plain = plain && !ascii_iequals(text, word);
  if (plain) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (is_control(c)) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += hex;
        } else {
          out += c;  // UTF-8 passes through: YAML is Unicode
        }
    }
  }
  return out + "\"";
}

std::string shell_quote(std::string_view text) {
  bool bare = !text.empty();
  for (char c : text) {
    bare = bare && (is_alpha(c) || is_digit(c) || c == '_' || c == '.' || c == '/' || c == ':' || c == '=' ||
                    c == '@' || c == '%' || c == '+' || c == ',' || c == '-');
  }
  if (bare) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";  // close, an escaped quote, reopen
    else out += c;
  }
  return out + "'";
}

std::string dockerfile_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\\' || c == '"' || c == '$') out += '\\';
    out += is_control(c) ? ' ' : c;
  }
  return out + "\"";
}

std::string comment_text(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (is_control(c)) c = ' ';
  return out;
}

}  // namespace kiln::recipes
