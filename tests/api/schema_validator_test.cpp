// The subset validator on small schemas: each keyword, and the wording of its messages.
#include <catch2/catch.hpp>

#include "api/description.h"
#include "api/schema_validator.h"

using namespace kiln::api;
using json = nlohmann::ordered_json;

namespace {

std::vector<Violation> run(const char* schema, const char* value) {
  return SchemaValidator(json::parse(schema)).validate(json::parse(value));
}

std::string only(const char* schema, const char* value) {
  const std::vector<Violation> v = run(schema, value);
  REQUIRE(v.size() == 1);
  return v[0].pointer + ": " + v[0].message;
}

}  // namespace

TEST_CASE("type, bounds and the value found", "[api][schema]") {
  const char* s = R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":64}}})";
  CHECK(only(s, R"({"n":"four"})") == "/n: expected integer >= 1 and <= 64, got \"four\"");
  CHECK(only(s, R"({"n":0})") == "/n: expected integer >= 1 and <= 64, got 0");
  CHECK(only(s, R"({"n":2.5})") == "/n: expected integer >= 1 and <= 64, got 2.5");
  CHECK(run(s, R"({"n":2.0})").empty());  // 2.0 is an integer in JSON Schema
  CHECK(only(s, R"({"n":[1]})") == "/n: expected integer >= 1 and <= 64, got an array");
  CHECK(only(R"({"type":"number","exclusiveMinimum":0})", "0") == ": expected number > 0, got 0");
}

TEST_CASE("enum and const suggest the closest value", "[api][schema]") {
  const char* s = R"({"enum":["latency","throughput","cost"]})";
  CHECK(only(s, R"("troughput")") ==
        ": expected one of \"latency\", \"throughput\", \"cost\", got \"troughput\" (did you mean \"throughput\"?)");
  CHECK(only(s, R"("speed")") == ": expected one of \"latency\", \"throughput\", \"cost\", got \"speed\"");
  CHECK(only(s, "3") == ": expected one of \"latency\", \"throughput\", \"cost\", got 3");
}

TEST_CASE("required, unknown fields and field names", "[api][schema]") {
  const char* s = R"({"type":"object","additionalProperties":false,"required":["max_latency_ms"],
      "properties":{"max_latency_ms":{"type":"number"},"max_memory_mb":{"type":"number"}}})";
  const std::vector<Violation> v = run(s, R"({"max_latncy_ms":3})");
  REQUIRE(v.size() == 2);
  CHECK(v[0].pointer == "/max_latency_ms");
  CHECK(v[0].message == "missing required field (expected number)");
  CHECK(v[1].pointer == "/max_latncy_ms");
  CHECK(v[1].message == "unknown field; did you mean 'max_latency_ms'? (known: max_latency_ms, max_memory_mb)");
  CHECK(only(R"({"type":"object","propertyNames":{"type":"string","maxLength":8,"pattern":"^[a-z]+$"}})", R"({"a/B":1})") ==
        "/a~1B: invalid field name: expected a string matching ^[a-z]+$, got \"a/B\"");
}

TEST_CASE("arrays: items, bounds, uniqueness", "[api][schema]") {
  const char* s = R"({"type":"array","minItems":1,"maxItems":3,"uniqueItems":true,"items":{"type":"integer"}})";
  CHECK(only(s, "[]") == ": expected at least 1 item, got 0");
  CHECK(only(s, "[1,2,3,4]") == ": expected at most 3 items, got 4");
  CHECK(only(s, "[1,2,1]") == "/2: duplicate of item 0 (1); items must be unique");
  CHECK(only(s, R"([1,"x"])") == "/1: expected integer, got \"x\"");
}

TEST_CASE("strings: length counts characters, pattern checked after length", "[api][schema]") {
  const char* s = R"({"type":"string","minLength":1,"maxLength":3,"pattern":"^[a-z]+$"})";
  CHECK(only(s, R"("")") == ": expected a non-empty string");
  CHECK(run(s, R"("\u00e9\u00e9\u00e9")").size() == 1);  // 3 characters, 6 bytes: only the pattern fails
  CHECK(only(s, R"("abcd")") == ": expected a string of at most 3 characters, got 4");
  CHECK(only(s, R"("A")") == ": expected a string matching ^[a-z]+$, got \"A\"");
}

TEST_CASE("oneOf: the plausible branch explains itself, else the alternatives are listed", "[api][schema]") {
  const char* s = R"({"$defs":{"p":{"type":"string","minLength":1,"maxLength":9}},
    "oneOf":[{"title":"{path: FILE}","type":"object","additionalProperties":false,"required":["path"],
              "properties":{"path":{"$ref":"#/$defs/p"}}},
             {"title":"{url: URL}","type":"object","additionalProperties":false,"required":["url"],
              "properties":{"url":{"type":"string"}}}]})";
  CHECK(run(s, R"({"path":"a"})").empty());
  CHECK(run(s, R"({"url":"a"})").empty());
  CHECK(only(s, R"({"path":""})") == "/path: expected a non-empty string");
  CHECK(only(s, R"({"path":"a","sha":"x"})") == "/sha: unknown field (known: path)");
  CHECK(only(s, R"({"file":"a"})") == ": expected {path: FILE} or {url: URL}, got an object with fields file");
  CHECK(only(s, R"({"path":"a","url":"b"})") == ": expected {path: FILE} or {url: URL}, got an object with fields path, url");
  CHECK(only(s, "7") == ": expected {path: FILE} or {url: URL}, got 7");
}

TEST_CASE("unsupported keywords and unchecked patterns are refused when the schema is built", "[api][schema]") {
  CHECK_THROWS_WITH(SchemaValidator(json::parse(R"({"type":"object","if":{}})")), Catch::Contains("unsupported keyword 'if'"));
  CHECK_THROWS_WITH(SchemaValidator(json::parse(R"({"type":"string","pattern":"^a$"})")), Catch::Contains("maxLength"));
  CHECK_THROWS_WITH(SchemaValidator(json::parse(R"({"$ref":"#/$defs/nope"})")), Catch::Contains("$defs"));
}

TEST_CASE("kiln's own schemas use only the supported subset", "[api][schema]") {
  for (DescriptionKind kind : {DescriptionKind::application, DescriptionKind::target}) {
    INFO(description_kind_name(kind));
    CHECK_NOTHROW(SchemaValidator(json::parse(schema_text(kind))));
  }
}
