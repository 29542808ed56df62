// multipart/form-data (RFC 7578) as parts that borrow the request body: no copies, bounded by
// the caller's per-part limits. Errors say what is malformed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/status.h"

namespace kiln::server {

struct MultipartPart {
  std::string name;      // from Content-Disposition
  std::string filename;  // empty when the part is a plain field
  std::string content_type;
  std::string_view body;  // into the request body
};

// The boundary of a `multipart/form-data; boundary=...` Content-Type; error when it is not one.
Result<std::string> multipart_boundary(std::string_view content_type);

Result<std::vector<MultipartPart>> multipart_parse(std::string_view body, std::string_view boundary);

}  // namespace kiln::server
