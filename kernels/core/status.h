// Status and Result: how kiln modules report errors without exceptions crossing module APIs.
// Every error carries a code (one enum for all of kiln's boundaries) and a one-line message
// that names the node, field or file that is wrong.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

enum class ErrorCode {
  invalid_argument,   // a caller passed something malformed (attribute, shape, dtype, arity)
  unsupported,        // well-formed but kiln cannot do it (op, dtype, opset, mode)
  io,                 // a file could not be opened, read or written
  parse,              // bytes that do not decode (truncated protobuf, bad .npy header)
  invalid_graph,      // dangling edge, cycle, duplicate name
  shape_mismatch,     // shapes that do not fit together
  limit_exceeded,     // a hard size limit was hit before allocation
  internal,           // a kiln bug surfaced as an error instead of a crash
  constraint_not_met, // a stated requirement (accuracy drop, latency) cannot be met by any choice
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  static Status ok() { return {}; }

  bool is_ok() const { return !error_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Error& error() const { return *error_; }
  const std::string& message() const { return error_->message; }
  ErrorCode code() const { return error_->code; }

  // Prefixes the message with context, e.g. "node 'conv1' (Conv): ".
  Status with_context(const std::string& prefix) const {
    if (is_ok()) return *this;
    return Error{error_->code, prefix + error_->message};
  }

 private:
  std::optional<Error> error_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}       // NOLINT
  Result(Status status) : v_(status.error()) {}       // NOLINT: only from a failed Status

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<Error>(v_); }
  Status status() const { return is_ok() ? Status::ok() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

// Builds an Error from streamed parts: make_error(ErrorCode::parse, "bad header in '", path, "'").
template <typename... Parts>
Error make_error(ErrorCode code, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return Error{code, os.str()};
}

inline Status to_status(const Status& s) { return s; }
template <typename T>
Status to_status(const Result<T>& r) { return r.status(); }

}  // namespace kiln

// Returns an error Status from the enclosing function when `cond` is false.
#define KILN_REQUIRE(cond, code, ...)                                   \
  do {                                                                  \
    if (!(cond)) return ::kiln::make_error(::kiln::ErrorCode::code, __VA_ARGS__); \
  } while (0)

// Propagates a failed Status (or Result) from an expression.
#define KILN_TRY(expr)                                 \
  do {                                                 \
    auto kiln_try_status_ = (expr);                    \
    if (!kiln_try_status_) return ::kiln::to_status(kiln_try_status_); \
  } while (0)

// Unwraps a Result into a new variable `var`, returning its error from the enclosing function.
#define KILN_ASSIGN(var, expr)                       \
  auto var##_result_ = (expr);                       \
  if (!var##_result_) return var##_result_.status(); \
  auto var = std::move(var##_result_).value()
