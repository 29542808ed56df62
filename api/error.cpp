#include "api/error.h"

namespace kiln::api {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::io: return "io";
    case ErrorCode::syntax: return "syntax";
    case ErrorCode::limit_exceeded: return "limit_exceeded";
    case ErrorCode::invalid: return "invalid";
  }
  return "unknown";
}

std::string Error::to_string() const {
  std::string out = source.empty() ? std::string("document") : source;
  if (line > 0) {
    out += ':' + std::to_string(line);
    if (column > 0) out += ':' + std::to_string(column);
  }
  out += ": ";
  if (code == ErrorCode::invalid) out += (pointer.empty() ? std::string("(document)") : pointer) + ": ";
  else if (!pointer.empty()) out += pointer + ": ";
  out += message;
  return out;
}

}  // namespace kiln::api
