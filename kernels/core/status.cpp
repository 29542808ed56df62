#include "kernels/core/status.h"

namespace kiln {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::io: return "i/o error";
    case ErrorCode::parse: return "parse error";
    case ErrorCode::invalid_graph: return "invalid graph";
    case ErrorCode::shape_mismatch: return "shape mismatch";
    case ErrorCode::limit_exceeded: return "limit exceeded";
    case ErrorCode::constraint_not_met: return "constraint not met";
    case ErrorCode::internal: return "internal error";
  }
  return "error";
}

}  // namespace kiln
