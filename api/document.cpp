#include "api/document.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <vector>

#include "api/limits.h"

namespace kiln::api {
namespace {

using ojson = nlohmann::ordered_json;

Error limit_error(std::string_view source, int line, std::string message) {
  return Error{ErrorCode::limit_exceeded, std::string(source), "", line, 0, std::move(message)};
}

std::string depth_message() {
  return "nesting deeper than " + std::to_string(limits::kMaxNestingDepth) + " levels (limit " +
         std::to_string(limits::kMaxNestingDepth) + ")";
}

// Exact nesting depth of JSON text (strings skipped); the 1-based line where it first exceeds
// the limit, or 0.
int json_depth_exceeded_line(std::string_view text) {
  int depth = 0, line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limits::kMaxNestingDepth) return line;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return 0;
}

// An upper estimate of the nesting depth of YAML text, from indentation, block indicators
// ("- ", "? ") and flow brackets, skipping quoted scalars, comments and block scalars the way a
// YAML scanner does. yaml-cpp recurses once per level, so this runs before it: 100000 '[' are
// refused in microseconds instead of exhausting the stack. Returns the 1-based line where the
// estimate first exceeds the limit, or 0.
int yaml_depth_exceeded_line(std::string_view text) {
  const int limit = limits::kMaxNestingDepth;
  enum class Quote { none, single, dbl };
  Quote quote = Quote::none;
  std::vector<size_t> indents;
  int flow = 0, base = 0, line_no = 0;
  bool in_block_scalar = false;
  size_t block_scalar_parent = 0, block_scalar_indent = 0;
  bool block_scalar_indent_known = false;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    const bool blank = indent == line.size();

    if (in_block_scalar) {
      if (blank) continue;
      if (!block_scalar_indent_known) {
        if (indent > block_scalar_parent) {
          block_scalar_indent = indent;
          block_scalar_indent_known = true;
          continue;
        }
      } else if (indent >= block_scalar_indent) {
        continue;
      }
      in_block_scalar = false;
    }

    size_t i = 0;
    bool at_start = false;  // at the start of a scalar: a quote here opens a quoted scalar
    if (quote == Quote::none && flow == 0) {
      if (blank || line[indent] == '#') continue;
      while (!indents.empty() && indents.back() >= indent) indents.pop_back();
      indents.push_back(indent);
      base = static_cast<int>(indents.size());
      i = indent;
      while (i < line.size() && (line[i] == '-' || line[i] == '?' || line[i] == ':') &&
             (i + 1 == line.size() || line[i + 1] == ' ')) {
        ++base;
        ++i;
        while (i < line.size() && line[i] == ' ') ++i;
      }
      if (base > limit) return line_no;
      at_start = true;
    } else if (quote == Quote::none) {
      at_start = true;
    }
    for (; i < line.size(); ++i) {
      const char c = line[i];
      if (quote == Quote::dbl) {
        if (c == '\\') ++i;
        else if (c == '"') quote = Quote::none;
        continue;
      }
      if (quote == Quote::single) {
        if (c == '\'') {
          if (i + 1 < line.size() && line[i + 1] == '\'') ++i;
          else quote = Quote::none;
        }
        continue;
      }
      if (c == ' ' || c == '\t') continue;
      if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) break;
      const bool next_blank = i + 1 == line.size() || line[i + 1] == ' ' || line[i + 1] == '\t';
      if (at_start && c == '"') {
        quote = Quote::dbl;
      } else if (at_start && c == '\'') {
        quote = Quote::single;
      } else if (at_start && (c == '&' || c == '!')) {
        // anchor or tag: the scalar (or collection) still starts after it
        while (i + 1 < line.size() && line[i + 1] != ' ' && line[i + 1] != '\t') ++i;
      } else if (at_start && flow == 0 && (c == '|' || c == '>')) {
        in_block_scalar = true;
        block_scalar_parent = indent;
        block_scalar_indent_known = false;
        break;
      } else if (c == '[' || c == '{') {
        ++flow;
        if (base + flow > limit) return line_no;
        at_start = true;
      } else if (c == ']' || c == '}') {
        if (flow > 0) --flow;
        at_start = false;
      } else if (c == ',' && flow > 0) {
        at_start = true;
      } else if (c == ':' && (flow > 0 || next_blank)) {
        at_start = true;
      } else if ((c == '-' || c == '?') && at_start && next_blank) {
        at_start = true;
      } else {
        at_start = false;
      }
    }
  }
  return 0;
}

// Well-formed UTF-8: no overlong forms, surrogates or code points above U+10FFFF.
bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07;
    else return false;
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

struct Walk {
  std::string_view source;
  std::map<std::string, int>* lines = nullptr;
  size_t values = 0;
  std::vector<Error> errors;

  bool count_value(int line) {
    if (++values <= limits::kMaxDocumentValues) return true;
    errors.push_back(limit_error(source, line,
                                 "more than " + std::to_string(limits::kMaxDocumentValues) +
                                     " values in the document, aliases expanded (limit " +
                                     std::to_string(limits::kMaxDocumentValues) + ")"));
    return false;
  }
  bool check_string(const std::string& s, const std::string& pointer, int line) {
    if (s.size() > limits::kMaxStringBytes) {
      errors.push_back(Error{ErrorCode::limit_exceeded, std::string(source), pointer, line, 0,
                             "string of " + std::to_string(s.size()) + " bytes (limit " +
                                 std::to_string(limits::kMaxStringBytes) + ")"});
      return false;
    }
    if (!is_utf8(s)) {  // YAML and JSON text is Unicode; yaml-cpp does not check
      errors.push_back(Error{ErrorCode::syntax, std::string(source), "", line, 0, "invalid UTF-8 in a string"});
      return false;
    }
    return true;
  }
  bool check_items(size_t size, const std::string& pointer, int line) {
    if (size <= limits::kMaxCollectionItems) return true;
    errors.push_back(Error{ErrorCode::limit_exceeded, std::string(source), pointer, line, 0,
                           std::to_string(size) + " items (limit " + std::to_string(limits::kMaxCollectionItems) + ")"});
    return false;
  }
  bool check_depth(int depth, const std::string& pointer, int line) {
    if (depth <= limits::kMaxNestingDepth) return true;
    errors.push_back(Error{ErrorCode::limit_exceeded, std::string(source), pointer, line, 0, depth_message()});
    return false;
  }
};

// Limits on a parsed JSON tree (whose depth the text scan already bounded).
bool json_check(Walk& w, const ojson& v, std::string& pointer, int depth) {
  if (!w.count_value(0) || !w.check_depth(depth, pointer, 0)) return false;
  if (v.is_string()) return w.check_string(v.get_ref<const std::string&>(), pointer, 0);
  if (v.is_array() || v.is_object()) {
    if (!w.check_items(v.size(), pointer, 0)) return false;
    size_t index = 0;
    for (auto it = v.begin(); it != v.end(); ++it, ++index) {
      const size_t saved = pointer.size();
      if (v.is_object()) {
        if (!w.check_string(it.key(), pointer, 0)) return false;
        pointer_append(pointer, it.key());
      } else {
        pointer_append(pointer, std::to_string(index));
      }
      const bool ok = json_check(w, it.value(), pointer, depth + 1);
      pointer.resize(saved);
      if (!ok) return false;
    }
  }
  return true;
}

bool is_digits(std::string_view s, int base) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = base == 8 ? (c >= '0' && c <= '7')
                    : base == 16 ? std::isxdigit(static_cast<unsigned char>(c)) != 0
                                 : (c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool is_yaml_float(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!is_digits(s.substr(i), 10)) return false;
    return true;
  }
  return i == s.size();
}

// A plain (unquoted) scalar under the YAML 1.2 core schema. Non-finite floats are refused:
// no field of ours means anything by them.
bool resolve_plain(const std::string& s, ojson& out, std::string& why) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
    out = nullptr;
    return true;
  }
  if (s == "true" || s == "True" || s == "TRUE") {
    out = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    out = false;
    return true;
  }
  std::string_view body = s;
  const bool negative = !body.empty() && body[0] == '-';
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
  int base = 0;
  std::string_view digits;
  if (body.starts_with("0x") && s[0] != '-' && s[0] != '+') base = 16, digits = body.substr(2);
  else if (body.starts_with("0o") && s[0] != '-' && s[0] != '+') base = 8, digits = body.substr(2);
  else if (is_digits(body, 10)) base = 10, digits = body;
  if (base != 0 && is_digits(digits, base)) {
    uint64_t u = 0;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
    if (ec == std::errc() && p == digits.data() + digits.size()) {
      if (!negative) {
        if (u <= static_cast<uint64_t>(INT64_MAX)) out = static_cast<int64_t>(u);
        else out = u;
        return true;
      }
      if (u <= static_cast<uint64_t>(INT64_MAX) + 1) {
        out = u == static_cast<uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(u);
        return true;
      }
    }
    // beyond 64 bits: read as a float below
  }
  static const std::set<std::string> non_finite = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
                                                   "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"};
  if (non_finite.count(s)) {
    why = "non-finite number " + s + " is not allowed";
    return false;
  }
  if (is_yaml_float(s) || (base != 0 && is_digits(digits, 10))) {
    const double d = std::strtod(s.c_str(), nullptr);
    if (!std::isfinite(d)) {
      why = "number " + s + " is out of range";
      return false;
    }
    out = d;
    return true;
  }
  out = s;
  return true;
}

bool yaml_convert(Walk& w, const YAML::Node& node, ojson& out, std::string& pointer, int depth) {
  const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
  if (!w.count_value(line) || !w.check_depth(depth, pointer, line)) return false;
  if (w.lines) (*w.lines)[pointer] = line;
  const auto fail = [&](std::string message) {
    w.errors.push_back(Error{ErrorCode::syntax, std::string(w.source), pointer, line, 0, std::move(message)});
    return false;
  };
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      out = nullptr;
      return true;
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (!w.check_string(s, pointer, line)) return false;
      const std::string& tag = node.Tag();
      if (tag == "!" || tag == "tag:yaml.org,2002:str") {
        out = s;
        return true;
      }
      if (tag != "?" && !tag.empty()) return fail("unsupported YAML tag '" + tag + "' (only !!str)");
      std::string why;
      if (!resolve_plain(s, out, why)) return fail(why);
      return true;
    }
    case YAML::NodeType::Sequence: {
      if (!w.check_items(node.size(), pointer, line)) return false;
      out = ojson::array();
      size_t index = 0;
      for (const YAML::Node& item : node) {
        const size_t saved = pointer.size();
        pointer_append(pointer, std::to_string(index++));
        ojson value;
        const bool ok = yaml_convert(w, item, value, pointer, depth + 1);
        pointer.resize(saved);
        if (!ok) return false;
        out.push_back(std::move(value));
      }
      return true;
    }
    case YAML::NodeType::Map: {
      if (!w.check_items(node.size(), pointer, line)) return false;
      out = ojson::object();
      for (const auto& member : node) {
        const YAML::Node& key = member.first;
        if (!key.IsScalar()) return fail("mapping keys must be plain strings, not collections");
        const std::string& name = key.Scalar();
        if (!w.check_string(name, pointer, line)) return false;
        if (out.contains(name)) {
          const int key_line = key.Mark().line + 1;
          w.errors.push_back(Error{ErrorCode::syntax, std::string(w.source), pointer, key_line, 0,
                                   "duplicate key '" + name + "'"});
          return false;
        }
        const size_t saved = pointer.size();
        pointer_append(pointer, name);
        ojson value;
        const bool ok = yaml_convert(w, member.second, value, pointer, depth + 1);
        // A field's line is its key's (a nested mapping's own mark is its first member).
        if (w.lines && key.Mark().line >= 0) (*w.lines)[pointer] = key.Mark().line + 1;
        pointer.resize(saved);
        if (!ok) return false;
        out[name] = std::move(value);
      }
      return true;
    }
  }
  return fail("unknown YAML node");
}

Result<Document> parse_json(std::string_view text, std::string_view source) {
  if (const int line = json_depth_exceeded_line(text)) return limit_error(source, line, depth_message());
  Document doc;
  doc.source = std::string(source);
  try {
    doc.root = ojson::parse(text.begin(), text.end());
  } catch (const ojson::parse_error& e) {
    // e.byte is 1-based; find its line and column.
    int line = 1, column = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') line++, column = 1;
      else ++column;
    }
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 3: syntax error ..." → after ": "
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return Error{ErrorCode::syntax, std::string(source), "", line, column, "JSON syntax error: " + what};
  } catch (const ojson::exception& e) {
    // Not a syntax error but a value nlohmann cannot hold, e.g. a number overflowing a double
    // ("1E745"); it carries no position.
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    return Error{ErrorCode::syntax, std::string(source), "", 0, 0, "JSON value out of range: " + what};
  }
  Walk w{source};
  std::string pointer;
  if (!json_check(w, doc.root, pointer, 1)) return w.errors;
  return doc;
}

Result<Document> parse_yaml(std::string_view text, std::string_view source) {
  if (const int line = yaml_depth_exceeded_line(text)) return limit_error(source, line, depth_message());
  YAML::Node node;
  try {
    node = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    return limit_error(source, e.mark.line + 1, depth_message());
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    const int column = e.mark.is_null() ? 0 : e.mark.column + 1;
    return Error{ErrorCode::syntax, std::string(source), "", line, column, "YAML syntax error: " + e.msg};
  }
  Document doc;
  doc.source = std::string(source);
  Walk w{source, &doc.lines};
  std::string pointer;
  try {
    if (!yaml_convert(w, node, doc.root, pointer, 1)) return w.errors;
  } catch (const YAML::Exception& e) {
    return Error{ErrorCode::syntax, std::string(source), pointer, e.mark.is_null() ? 0 : e.mark.line + 1, 0,
                 "YAML error: " + e.msg};
  }
  return doc;
}

}  // namespace

void pointer_append(std::string& pointer, std::string_view token) {
  pointer += '/';
  for (char c : token) {
    if (c == '~') pointer += "~0";
    else if (c == '/') pointer += "~1";
    else pointer += c;
  }
}

int Document::line_of(const std::string& pointer) const {
  // The field itself, else its nearest ancestor that has a line (a missing field: its parent).
  std::string p = pointer;
  while (true) {
    const auto it = lines.find(p);
    if (it != lines.end()) return it->second;
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return 0;
    p.resize(slash);
  }
}

Result<Document> document_parse(std::string_view text, std::string_view source, DocumentFormat format) {
  if (text.size() > limits::kMaxDocumentBytes)
    return limit_error(source, 0, "document of " + std::to_string(text.size()) + " bytes (limit " +
                                      std::to_string(limits::kMaxDocumentBytes) + ")");
  if (format == DocumentFormat::json) return parse_json(text, source);
  if (format == DocumentFormat::yaml) return parse_yaml(text, source);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    Result<Document> json = parse_json(text, source);
    if (json || json.errors().front().code != ErrorCode::syntax) return json;
    Result<Document> yaml = parse_yaml(text, source);
    return yaml ? std::move(yaml) : std::move(json);
  }
  return parse_yaml(text, source);
}

Result<Document> document_read(const std::string& path, DocumentFormat format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{ErrorCode::io, path, "", 0, 0, "cannot open file"};
  std::string text;
  text.resize(limits::kMaxDocumentBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Error{ErrorCode::io, path, "", 0, 0, "read error"};
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > limits::kMaxDocumentBytes)
    return limit_error(path, 0, "document larger than " + std::to_string(limits::kMaxDocumentBytes) + " bytes (limit)");
  if (format == DocumentFormat::automatic) {
    const auto ends_with = [&](std::string_view suffix) { return path.ends_with(suffix); };
    if (ends_with(".json")) format = DocumentFormat::json;
    else if (ends_with(".yaml") || ends_with(".yml")) format = DocumentFormat::yaml;
  }
  return document_parse(text, path, format);
}

}  // namespace kiln::api
