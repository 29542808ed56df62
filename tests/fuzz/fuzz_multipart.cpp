// libFuzzer target: what `kiln serve` reads from a job submission before anything touches the
// disk: the Content-Type (first line of the input), the multipart/form-data body (the rest), and
// each part through the ONNX wire check. Every part must lie inside the body; any crash,
// sanitizer report or uncaught exception is a bug: bad input must come back as an Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "service/server/jobs_router.h"
#include "service/server/multipart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  const std::string_view content_type = input.substr(0, eol);
  const std::string_view body = eol == std::string_view::npos ? std::string_view() : input.substr(eol + 1);
  Result<std::string> boundary = server::multipart_boundary(content_type);
  if (!boundary) return 0;
  Result<std::vector<server::MultipartPart>> parts = server::multipart_parse(body, *boundary);
  if (!parts) return 0;
  for (const server::MultipartPart& p : *parts) {
    if (p.body.data() < body.data() || p.body.data() + p.body.size() > body.data() + body.size()) __builtin_trap();
    (void)server::onnx_model_check(p.body).size();
  }
  return 0;
}
