// A JSON Schema (2020-12) validator for the subset kiln's own schemas use, with messages made
// for people: each violation names the field by JSON pointer and says what was expected
// ("expected integer >= 1, got \"four\"", "unknown field (known: a, b)").
//
// Supported: type, enum, const, properties, required, additionalProperties (false or a schema),
// propertyNames, minProperties, maxProperties, items, minItems, maxItems, uniqueItems, minimum,
// maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern (ECMAScript,
// whole-value semantics as anchored by the pattern itself), oneOf, $ref to "#/$defs/NAME";
// annotations ($schema, $id, $comment, title, description, default, examples, format) are ignored.
// The constructor rejects a schema using anything else, so a schema cannot silently outgrow it.
// Debian 12's libvalijson-dev (draft 7) was the packaged alternative; its messages do not name
// the expected type or list the known fields, which the API contract requires.
#pragma once

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::api {

struct Violation {
  std::string pointer;  // JSON pointer of the offending (or missing) field
  std::string message;
};

class SchemaValidator {
 public:
  // Throws std::invalid_argument on a malformed schema or an unsupported keyword (a kiln bug,
  // caught by the tests; the schemas are compiled in).
  explicit SchemaValidator(nlohmann::ordered_json schema);

  // Every violation, at most `max_violations` of them.
  std::vector<Violation> validate(const nlohmann::ordered_json& value, size_t max_violations = 32) const;

  // Property names the schema allows at the top level (for telling documents apart).
  std::vector<std::string> top_level_properties() const;

 private:
  using json = nlohmann::ordered_json;
  struct Context;
  void check(const json& schema, const json& value, std::string& pointer, Context& ctx) const;
  void check_one_of(const json& schema, const json& value, std::string& pointer, Context& ctx) const;
  const json& resolve(const json& schema) const;
  std::string describe(const json& schema) const;
  void prepare(const json& schema, const std::string& where);

  json schema_;
  std::map<std::string, std::regex> patterns_;  // compiled once; validate() is const and thread-safe
};

}  // namespace kiln::api
