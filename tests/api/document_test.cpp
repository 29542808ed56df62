// YAML/JSON → JSON tree: scalar typing, line numbers, syntax errors and every hard limit.
#include <catch2/catch.hpp>

#include <chrono>

#include "api/document.h"
#include "api/limits.h"

using namespace kiln::api;
using json = nlohmann::ordered_json;

namespace {

Document parse_ok(const std::string& text, DocumentFormat format = DocumentFormat::automatic) {
  Result<Document> doc = document_parse(text, "t.yaml", format);
  INFO((doc ? std::string() : doc.message()));
  REQUIRE(doc);
  return std::move(doc).value();
}

Error parse_error(const std::string& text, DocumentFormat format = DocumentFormat::automatic) {
  Result<Document> doc = document_parse(text, "t.yaml", format);
  REQUIRE_FALSE(doc);
  return doc.errors().front();
}

double seconds_to_refuse(const std::string& text, DocumentFormat format, Error& error) {
  const auto start = std::chrono::steady_clock::now();
  Result<Document> doc = document_parse(text, "deep.yaml", format);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_FALSE(doc);
  error = doc.errors().front();
  return s;
}

}  // namespace

TEST_CASE("YAML scalars follow the YAML 1.2 core schema", "[api][document]") {
  const Document d = parse_ok(
      "i: 42\nneg: -7\nhex: 0x1F\nf: 2.5\ne: 1e3\nt: true\nn: null\nempty:\ns: hello\nq: '42'\nno: no\n"
      "ver: 1.2.3\nbig: 99999999999999999999\n");
  CHECK(d.root["i"] == 42);
  CHECK(d.root["i"].is_number_integer());
  CHECK(d.root["neg"] == -7);
  CHECK(d.root["hex"] == 31);
  CHECK(d.root["f"] == 2.5);
  CHECK(d.root["e"] == 1000.0);
  CHECK(d.root["t"] == true);
  CHECK(d.root["n"].is_null());
  CHECK(d.root["empty"].is_null());
  CHECK(d.root["s"] == "hello");
  CHECK(d.root["q"] == "42");  // quoted: always a string
  CHECK(d.root["no"] == "no");  // YAML 1.1 booleans are strings in 1.2
  CHECK(d.root["ver"] == "1.2.3");
  CHECK(d.root["big"].is_number_unsigned() == false);
  CHECK(d.root["big"].is_number_float());
  // Order of keys is kept.
  CHECK(d.root.begin().key() == "i");
}

TEST_CASE("YAML lines are recorded per JSON pointer", "[api][document]") {
  const Document d = parse_ok("a: 1\nb:\n  c: [1, 2]\n  d:\n    - x: 1\n");
  CHECK(d.line_of("/a") == 1);
  CHECK(d.line_of("/b/c") == 3);
  CHECK(d.line_of("/b/d/0/x") == 5);
  CHECK(d.line_of("/b/missing") == 2);  // nearest ancestor
}

TEST_CASE("JSON is read as JSON, YAML flow mappings that are not JSON fall back to YAML", "[api][document]") {
  CHECK(parse_ok("{\"a\": [1, 2.5, \"x\"]}").root["a"][2] == "x");
  CHECK(parse_ok("{a: 1}").root["a"] == 1);
  const Error e = parse_error("{\"a\": 1,\n \"b\": }", DocumentFormat::json);
  CHECK(e.code == ErrorCode::syntax);
  CHECK(e.line == 2);
  CHECK_THAT(e.to_string(), Catch::Contains("t.yaml:2:") && Catch::Contains("JSON syntax error"));
  // A number beyond a double is an error, not an exception (found by fuzz_description).
  const Error big = parse_error("{\"scale\": 0.0039215686E745098}", DocumentFormat::json);
  CHECK(big.code == ErrorCode::syntax);
  CHECK_THAT(big.message, Catch::Contains("JSON value out of range") && Catch::Contains("number overflow"));
}

TEST_CASE("YAML syntax errors give the line and column", "[api][document]") {
  const Error e = parse_error("name: x\nmodel: {path: a.onnx\ninputs: 3\n");
  CHECK(e.code == ErrorCode::syntax);
  CHECK(e.line >= 2);
  CHECK_THAT(e.to_string(), Catch::StartsWith("t.yaml:") && Catch::Contains("YAML syntax error"));
  const Error tab = parse_error("a:\n\tb: 1\n");
  CHECK(tab.line == 2);
}

TEST_CASE("duplicate keys, complex keys and unknown tags are refused", "[api][document]") {
  const Error dup = parse_error("a: 1\nb: 2\na: 3\n");
  CHECK_THAT(dup.message, Catch::Contains("duplicate key 'a'"));
  CHECK(dup.line == 3);
  CHECK_THAT(parse_error("? [a, b]\n: 1\n").message, Catch::Contains("mapping keys"));
  CHECK_THAT(parse_error("a: !!binary aGVsbG8=\n").message, Catch::Contains("unsupported YAML tag"));
  CHECK_THAT(parse_error("a: .inf\n").message, Catch::Contains("non-finite"));
  CHECK(parse_ok("a: !!str 12\n").root["a"] == "12");
}

TEST_CASE("invalid UTF-8 is a syntax error, in YAML as in JSON", "[api][document]") {
  CHECK(parse_error("a: \xff\xfe\n").code == ErrorCode::syntax);
  CHECK_THAT(parse_error("\xc0\xaf: 1\n").message, Catch::Contains("invalid UTF-8"));  // overlong '/' in a key
  CHECK(parse_error("{\"a\": \"\xed\xa0\x80\"}", DocumentFormat::json).code == ErrorCode::syntax);  // surrogate
  CHECK(parse_ok("a: \"caf\xc3\xa9 \xf0\x9f\x94\xa5\"\n").root["a"] == "caf\xc3\xa9 \xf0\x9f\x94\xa5");
}

TEST_CASE("deeply nested YAML is refused quickly, before yaml-cpp recurses", "[api][document][limits]") {
  for (const std::string& text : {std::string(100000, '['), std::string(100000, '{'), "a: " + std::string(100000, '['),
                                  [] {
                                    std::string s;
                                    for (int i = 0; i < 50000; ++i) s += "- ";
                                    return s + "x\n";
                                  }(),
                                  [] {
                                    std::string s;  // quotes that close brackets must not hide the depth
                                    for (int i = 0; i < 20000; ++i) s += "[ \"]\", ";
                                    return s;
                                  }(),
                                  [] {
                                    std::string s;  // anchors before quotes, too
                                    for (int i = 0; i < 20000; ++i) s += "[ &a \"]\", ";
                                    return s;
                                  }()}) {
    Error e;
    const double s = seconds_to_refuse(text, DocumentFormat::yaml, e);
    INFO(e.to_string());
    CHECK(e.code == ErrorCode::limit_exceeded);
    CHECK_THAT(e.message, Catch::Contains("limit 64"));
    CHECK(s < 0.5);
  }
}

TEST_CASE("block indentation nesting is bounded too", "[api][document][limits]") {
  std::string text;
  for (int i = 0; i < 80; ++i) text += std::string(static_cast<size_t>(i), ' ') + "k:\n";
  const Error e = parse_error(text);
  CHECK(e.code == ErrorCode::limit_exceeded);
  CHECK_THAT(e.to_string(), Catch::Contains("nesting deeper than 64"));
  // 60 levels are fine.
  std::string ok;
  for (int i = 0; i < 60; ++i) ok += std::string(static_cast<size_t>(i), ' ') + "k:\n";
  parse_ok(ok);
}

TEST_CASE("brackets inside quoted strings, comments and block scalars do not count as nesting", "[api][document]") {
  const std::string brackets(200, '[');
  parse_ok("a: \"" + brackets + "\"\nb: '" + brackets + "'\n# " + brackets + "\nc: |\n  " + brackets + "\n  more\nd: 1\n");
}

TEST_CASE("deeply nested JSON is refused with the line", "[api][document][limits]") {
  Error e;
  const double s = seconds_to_refuse(std::string(100000, '['), DocumentFormat::json, e);
  CHECK(e.code == ErrorCode::limit_exceeded);
  CHECK(e.line == 1);
  CHECK(s < 0.5);
  CHECK(parse_ok("{\"s\": \"" + std::string(100, '[') + "\"}", DocumentFormat::json).root["s"].is_string());
}

TEST_CASE("size, string, collection and alias-expansion limits state the limit", "[api][document][limits]") {
  const Error big = parse_error(std::string(limits::kMaxDocumentBytes + 1, ' '));
  CHECK(big.code == ErrorCode::limit_exceeded);
  CHECK_THAT(big.message, Catch::Contains("limit " + std::to_string(limits::kMaxDocumentBytes)));

  const Error str = parse_error("a: " + std::string(limits::kMaxStringBytes + 1, 'x') + "\n");
  CHECK(str.code == ErrorCode::limit_exceeded);
  CHECK(str.pointer == "/a");

  std::string items = "[";
  for (size_t i = 0; i <= limits::kMaxCollectionItems; ++i) items += "1,";
  items += "1]";
  CHECK(parse_error(items, DocumentFormat::json).code == ErrorCode::limit_exceeded);
  CHECK(parse_error(items, DocumentFormat::yaml).code == ErrorCode::limit_exceeded);

  // "Billion laughs": 9 levels of 10 aliases each would be 10^9 values.
  std::string laughs = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string name = std::to_string(i), prev = std::to_string(i - 1);
    laughs.append("a").append(name).append(": &a").append(name).append(" [");
    for (int j = 0; j < 10; ++j) laughs.append(j ? ", *a" : "*a").append(prev);
    laughs += "]\n";
  }
  Error e;
  const double s = seconds_to_refuse(laughs, DocumentFormat::yaml, e);
  CHECK(e.code == ErrorCode::limit_exceeded);
  CHECK_THAT(e.message, Catch::Contains("aliases expanded"));
  CHECK(s < 1.0);
}

TEST_CASE("document_read: missing file and extension-selected format", "[api][document]") {
  const Result<Document> missing = document_read("/nonexistent/kiln/app.yaml");
  REQUIRE_FALSE(missing);
  CHECK(missing.errors().front().code == ErrorCode::io);
  CHECK_THAT(missing.message(), Catch::Contains("/nonexistent/kiln/app.yaml") && Catch::Contains("cannot open"));
}
