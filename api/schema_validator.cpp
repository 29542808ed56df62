#include "api/schema_validator.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "api/document.h"

namespace kiln::api {
namespace {

using json = nlohmann::ordered_json;

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> keywords = {
      "$schema", "$id", "$comment", "title", "description", "default", "examples", "format", "$defs", "$ref",
      "type", "enum", "const", "properties", "required", "additionalProperties", "propertyNames", "minProperties",
      "maxProperties", "items", "minItems", "maxItems", "uniqueItems", "minimum", "maximum", "exclusiveMinimum",
      "exclusiveMaximum", "minLength", "maxLength", "pattern", "oneOf"};
  return keywords;
}

// Longest string a pattern may be matched against: libstdc++'s std::regex recurses per
// character, so every pattern comes with a maxLength no larger than this, checked first.
constexpr size_t kMaxPatternSubject = 4096;

std::string render(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 60) + "...";
  return s;
}

const char* type_of(const json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_number_integer()) return "integer";
  return "number";
}

bool type_matches(const std::string& type, const json& v) {
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (v.is_number_float()) {
      const double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
    return false;
  }
  if (type == "number") return v.is_number();
  return type == type_of(v);
}

bool any_type_matches(const json& type, const json& v) {
  if (type.is_string()) return type_matches(type.get<std::string>(), v);
  for (const json& t : type)
    if (type_matches(t.get<std::string>(), v)) return true;
  return false;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate closest to `word`, if it is close enough to be a likely typo.
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > 256) return {};
  std::string best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    if (c.size() > 256) continue;
    const size_t d = edit_distance(word, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string plural(size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

struct SchemaValidator::Context {
  std::vector<Violation> out;
  size_t max = 32;
  size_t total = 0;
  void add(const std::string& pointer, std::string message) {
    ++total;
    if (out.size() < max) out.push_back({pointer, std::move(message)});
  }
};

SchemaValidator::SchemaValidator(json schema) : schema_(std::move(schema)) { prepare(schema_, ""); }

void SchemaValidator::prepare(const json& schema, const std::string& where) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument("schema " + (where.empty() ? std::string("(root)") : where) + ": " + why);
  };
  if (schema.is_boolean()) return;
  if (!schema.is_object()) fail("a schema must be an object or a boolean");
  for (auto it = schema.begin(); it != schema.end(); ++it)
    if (!supported_keywords().count(it.key())) fail("unsupported keyword '" + it.key() + "'");
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"].get<std::string>();
    if (!ref.starts_with("#/$defs/") || !schema_.contains("$defs") || !schema_["$defs"].contains(ref.substr(8)))
      fail("$ref '" + ref + "' does not name an entry of $defs");
  }
  if (schema.contains("pattern")) {
    if (!schema.contains("maxLength") || schema["maxLength"].get<size_t>() > kMaxPatternSubject)
      fail("a pattern needs a maxLength of at most " + std::to_string(kMaxPatternSubject));
    const std::string pattern = schema["pattern"].get<std::string>();
    if (!patterns_.count(pattern)) patterns_.emplace(pattern, std::regex(pattern, std::regex::ECMAScript));
  }
  for (const char* key : {"properties", "$defs"})
    if (schema.contains(key))
      for (auto it = schema[key].begin(); it != schema[key].end(); ++it)
        prepare(it.value(), where + "/" + key + "/" + it.key());
  for (const char* key : {"additionalProperties", "propertyNames", "items"})
    if (schema.contains(key)) prepare(schema[key], where + "/" + key);
  if (schema.contains("oneOf")) {
    if (!schema["oneOf"].is_array() || schema["oneOf"].empty()) fail("oneOf must be a non-empty array");
    for (size_t i = 0; i < schema["oneOf"].size(); ++i) prepare(schema["oneOf"][i], where + "/oneOf/" + std::to_string(i));
  }
}

const SchemaValidator::json& SchemaValidator::resolve(const json& schema) const {
  const json* s = &schema;
  for (int hops = 0; s->is_object() && s->contains("$ref") && hops < 16; ++hops)
    s = &schema_["$defs"][(*s)["$ref"].get<std::string>().substr(8)];
  return *s;
}

std::string SchemaValidator::describe(const json& raw) const {
  if (raw.is_boolean()) return raw.get<bool>() ? "anything" : "nothing";
  // Own keywords first (a $ref with siblings), then the referenced schema's.
  const json& s = raw.contains("type") || raw.contains("enum") || raw.contains("oneOf") || raw.contains("const")
                      ? raw
                      : resolve(raw);
  if (s.contains("oneOf")) {
    std::vector<std::string> parts;
    for (const json& branch : s["oneOf"])
      parts.push_back(branch.contains("title") ? branch["title"].get<std::string>() : describe(branch));
    return join(parts, " or ");
  }
  if (s.contains("const")) return s["const"].dump();
  if (s.contains("enum")) {
    std::vector<std::string> parts;
    for (const json& v : s["enum"]) parts.push_back(v.dump());
    return "one of " + join(parts, ", ");
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    if (s["type"].is_string()) types.push_back(s["type"].get<std::string>());
    else
      for (const json& t : s["type"]) types.push_back(t.get<std::string>());
  } else if (s.contains("properties") || s.contains("additionalProperties")) {
    types.push_back("object");
  } else if (s.contains("items")) {
    types.push_back("array");
  }
  for (std::string& t : types) {
    if (t == "integer" || t == "number") {
      std::vector<std::string> bounds;
      const auto num = [](const json& v) { return v.dump(); };
      if (s.contains("minimum")) bounds.push_back(">= " + num(s["minimum"]));
      if (s.contains("exclusiveMinimum")) bounds.push_back("> " + num(s["exclusiveMinimum"]));
      if (s.contains("maximum")) bounds.push_back("<= " + num(s["maximum"]));
      if (s.contains("exclusiveMaximum")) bounds.push_back("< " + num(s["exclusiveMaximum"]));
      if (!bounds.empty()) t += " " + join(bounds, " and ");
    } else if (t == "array" && s.contains("items")) {
      t = "array of " + describe(s["items"]);
    }
  }
  return types.empty() ? "anything" : join(types, " or ");
}

void SchemaValidator::check(const json& schema, const json& value, std::string& pointer, Context& ctx) const {
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) ctx.add(pointer, "not allowed here");
    return;
  }
  const size_t before = ctx.total;
  if (schema.contains("$ref")) {
    check(resolve(schema), value, pointer, ctx);
    if (ctx.total > before) return;
  }
  if (schema.contains("oneOf")) {
    check_one_of(schema, value, pointer, ctx);
    if (ctx.total > before) return;
  }
  if (schema.contains("type") && !any_type_matches(schema["type"], value)) {
    ctx.add(pointer, "expected " + describe(schema) + ", got " + render(value));
    return;
  }
  const auto enum_miss = [&](const json& allowed) {
    std::string message = "expected " + describe(schema) + ", got " + render(value);
    if (value.is_string()) {
      std::vector<std::string> names;
      for (const json& a : allowed)
        if (a.is_string()) names.push_back(a.get<std::string>());
      const std::string guess = closest(value.get<std::string>(), names);
      if (!guess.empty()) message += " (did you mean \"" + guess + "\"?)";
    }
    ctx.add(pointer, std::move(message));
  };
  if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end()) {
    enum_miss(schema["enum"]);
    return;
  }
  if (schema.contains("const") && schema["const"] != value) {
    enum_miss(json::array({schema["const"]}));
    return;
  }

  if (value.is_number()) {
    const double v = value.get<double>();
    const bool bad = (schema.contains("minimum") && v < schema["minimum"].get<double>()) ||
                     (schema.contains("maximum") && v > schema["maximum"].get<double>()) ||
                     (schema.contains("exclusiveMinimum") && v <= schema["exclusiveMinimum"].get<double>()) ||
                     (schema.contains("exclusiveMaximum") && v >= schema["exclusiveMaximum"].get<double>());
    if (bad) ctx.add(pointer, "expected " + describe(schema) + ", got " + render(value));
  } else if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    const size_t length = utf8_length(s);
    if (schema.contains("minLength") && length < schema["minLength"].get<size_t>()) {
      ctx.add(pointer, schema["minLength"].get<size_t>() == 1
                           ? std::string("expected a non-empty string")
                           : "expected a string of at least " + plural(schema["minLength"].get<size_t>(), "character") +
                                 ", got " + std::to_string(length));
    } else if (schema.contains("maxLength") && length > schema["maxLength"].get<size_t>()) {
      ctx.add(pointer, "expected a string of at most " + plural(schema["maxLength"].get<size_t>(), "character") +
                           ", got " + std::to_string(length));
    } else if (schema.contains("pattern")) {
      const std::string& pattern = schema["pattern"].get_ref<const std::string&>();
      if (!std::regex_search(s, patterns_.at(pattern)))
        ctx.add(pointer, "expected a string matching " + pattern + ", got " + render(value));
    }
  } else if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>())
      ctx.add(pointer, "expected at least " + plural(schema["minItems"].get<size_t>(), "item") + ", got " +
                           std::to_string(value.size()));
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      ctx.add(pointer, "expected at most " + plural(schema["maxItems"].get<size_t>(), "item") + ", got " +
                           std::to_string(value.size()));
    if (schema.contains("uniqueItems") && schema["uniqueItems"].get<bool>()) {
      for (size_t i = 1; i < value.size(); ++i)
        for (size_t j = 0; j < i; ++j)
          if (value[i] == value[j]) {
            ctx.add(pointer + "/" + std::to_string(i),
                    "duplicate of item " + std::to_string(j) + " (" + render(value[i]) + "); items must be unique");
            j = i;
          }
    }
    if (schema.contains("items"))
      for (size_t i = 0; i < value.size(); ++i) {
        const size_t saved = pointer.size();
        pointer_append(pointer, std::to_string(i));
        check(schema["items"], value[i], pointer, ctx);
        pointer.resize(saved);
      }
  } else if (value.is_object()) {
    static const json kEmpty = json::object();
    const json& properties = schema.contains("properties") ? schema["properties"] : kEmpty;
    if (schema.contains("required"))
      for (const json& name : schema["required"])
        if (!value.contains(name.get<std::string>())) {
          std::string p = pointer;
          pointer_append(p, name.get<std::string>());
          const std::string& n = name.get_ref<const std::string&>();
          ctx.add(p, "missing required field (expected " + (properties.contains(n) ? describe(properties[n]) : "a value") + ")");
        }
    if (schema.contains("minProperties") && value.size() < schema["minProperties"].get<size_t>())
      ctx.add(pointer, "expected at least " + plural(schema["minProperties"].get<size_t>(), "field") + ", got " +
                           std::to_string(value.size()));
    if (schema.contains("maxProperties") && value.size() > schema["maxProperties"].get<size_t>())
      ctx.add(pointer, "expected at most " + plural(schema["maxProperties"].get<size_t>(), "field") + ", got " +
                           std::to_string(value.size()));
    for (auto it = value.begin(); it != value.end(); ++it) {
      const size_t saved = pointer.size();
      pointer_append(pointer, it.key());
      if (schema.contains("propertyNames")) {
        Context names;
        std::string p = pointer;
        check(schema["propertyNames"], json(it.key()), p, names);
        for (const Violation& v : names.out) ctx.add(pointer, "invalid field name: " + v.message);
      }
      if (properties.contains(it.key())) {
        check(properties[it.key()], it.value(), pointer, ctx);
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) {
          std::vector<std::string> known;
          for (auto p = properties.begin(); p != properties.end(); ++p) known.push_back(p.key());
          const std::string guess = closest(it.key(), known);
          ctx.add(pointer, "unknown field" + (guess.empty() ? std::string() : "; did you mean '" + guess + "'?") +
                               " (known: " + join(known, ", ") + ")");
        } else {
          check(extra, it.value(), pointer, ctx);
        }
      }
      pointer.resize(saved);
    }
  }
}

void SchemaValidator::check_one_of(const json& schema, const json& value, std::string& pointer, Context& ctx) const {
  const json& branches = schema["oneOf"];
  std::vector<size_t> matching, plausible;
  for (size_t i = 0; i < branches.size(); ++i) {
    Context trial;
    trial.max = 1;
    std::string p = pointer;
    check(branches[i], value, p, trial);
    if (trial.total == 0) matching.push_back(i);
    // Plausible: the value has the branch's type and, for objects, all its required fields;
    // the branch's own errors then say more than "expected one of".
    const json& b = branches[i].contains("type") || branches[i].contains("const") ? branches[i] : resolve(branches[i]);
    bool fits = true;
    if (b.contains("type")) fits = any_type_matches(b["type"], value);
    else if (b.contains("const")) fits = std::string(type_of(b["const"])) == type_of(value);
    if (fits && value.is_object() && b.contains("required"))
      for (const json& name : b["required"]) fits = fits && value.contains(name.get<std::string>());
    if (fits) plausible.push_back(i);
  }
  if (matching.size() == 1) return;
  if (matching.size() > 1) {
    ctx.add(pointer, "expected exactly one of " + describe(schema) + ", but it matches several");
    return;
  }
  if (plausible.size() == 1) {
    check(branches[plausible[0]], value, pointer, ctx);
    return;
  }
  std::string got = render(value);
  if (value.is_object()) {
    std::vector<std::string> keys;
    for (auto it = value.begin(); it != value.end(); ++it) keys.push_back(it.key());
    got += keys.empty() ? " with no fields" : " with fields " + join(keys, ", ");
  }
  ctx.add(pointer, "expected " + describe(schema) + ", got " + got);
}

std::vector<Violation> SchemaValidator::validate(const json& value, size_t max_violations) const {
  Context ctx;
  ctx.max = max_violations;
  std::string pointer;
  check(schema_, value, pointer, ctx);
  if (ctx.total > ctx.out.size())
    ctx.out.push_back({"", std::to_string(ctx.total - ctx.out.size()) + " more errors not listed"});
  return std::move(ctx.out);
}

std::vector<std::string> SchemaValidator::top_level_properties() const {
  std::vector<std::string> names;
  if (schema_.contains("properties"))
    for (auto it = schema_["properties"].begin(); it != schema_["properties"].end(); ++it) names.push_back(it.key());
  return names;
}

}  // namespace kiln::api
