// Errors of the api module: every one names the source, the field (JSON pointer) or the line,
// and says what was expected. A document can have several; they come back together.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::api {

enum class ErrorCode {
  io,              // the file could not be read
  syntax,          // not YAML / JSON (line and column given)
  limit_exceeded,  // a hard limit of api/limits.h (the message states it)
  invalid,         // well-formed but violates the schema or a rule across fields
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::invalid;
  std::string source;   // file name, or what the text was ("description" for an upload part)
  std::string pointer;  // JSON pointer of the field; empty for the whole document
  int line = 0;         // 1-based, 0 when unknown (JSON values, or no position)
  int column = 0;       // 1-based, 0 when unknown
  std::string message;  // what was expected and what was found

  // "target.yaml:12: /node/gpus/0/count: expected integer >= 1, got "four""
  std::string to_string() const;
};

// Either a value or the errors that prevented it (never empty).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                  // NOLINT: implicit by design
  Result(Error error) : v_(std::vector<Error>{std::move(error)}) {}  // NOLINT
  Result(std::vector<Error> errors) : v_(std::move(errors)) {}       // NOLINT

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const std::vector<Error>& errors() const { return std::get<std::vector<Error>>(v_); }
  // All errors, one per line.
  std::string message() const;

 private:
  std::variant<T, std::vector<Error>> v_;
};

template <typename T>
std::string Result<T>::message() const {
  std::string out;
  for (const Error& e : errors()) {
    if (!out.empty()) out += '\n';
    out += e.to_string();
  }
  return out;
}

}  // namespace kiln::api
