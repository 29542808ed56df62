#include "service/server/multipart.h"

#include <algorithm>
#include <cctype>

namespace kiln::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The value of `key=` in a header's parameters (quoted or not); empty when absent.
std::string header_param(std::string_view header, std::string_view key) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t semi = header.find(';', pos);
    if (semi == std::string_view::npos) semi = header.size();
    std::string_view item = trim(header.substr(pos, semi - pos));
    pos = semi + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || lower(trim(item.substr(0, eq))) != key) continue;
    std::string_view value = trim(item.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"') {
      // Quoted: up to the closing quote (a ';' inside quotes was split above only if present).
      value.remove_prefix(1);
      const size_t end = value.find('"');
      return std::string(value.substr(0, end));
    }
    return std::string(value);
  }
  return "";
}

}  // namespace

Result<std::string> multipart_boundary(std::string_view content_type) {
  const std::string type = lower(trim(content_type.substr(0, content_type.find(';'))));
  KILN_REQUIRE(type == "multipart/form-data", unsupported, "expected Content-Type multipart/form-data, got '",
               std::string(content_type.substr(0, 100)), "'");
  std::string boundary = header_param(content_type, "boundary");
  KILN_REQUIRE(!boundary.empty() && boundary.size() <= 70, invalid_argument,
               "multipart/form-data needs a boundary parameter of 1 to 70 characters");
  return boundary;
}

Result<std::vector<MultipartPart>> multipart_parse(std::string_view body, std::string_view boundary) {
  const std::string delimiter = "--" + std::string(boundary);
  const std::string next = "\r\n" + delimiter;
  size_t pos = body.find(delimiter);
  KILN_REQUIRE(pos != std::string_view::npos, invalid_argument, "multipart body without its boundary");
  pos += delimiter.size();
  std::vector<MultipartPart> parts;
  for (;;) {
    if (body.substr(pos, 2) == "--") return parts;  // the closing delimiter
    KILN_REQUIRE(body.substr(pos, 2) == "\r\n", invalid_argument, "multipart: expected CRLF after a boundary");
    pos += 2;
    const size_t header_end = body.find("\r\n\r\n", pos);
    KILN_REQUIRE(header_end != std::string_view::npos, invalid_argument, "multipart: a part's header does not end");
    MultipartPart part;
    std::string_view headers = body.substr(pos, header_end - pos);
    while (!headers.empty()) {
      size_t eol = headers.find("\r\n");
      std::string_view line = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string name = lower(trim(line.substr(0, colon)));
      const std::string_view value = trim(line.substr(colon + 1));
      if (name == "content-disposition") {
        KILN_REQUIRE(lower(value.substr(0, 9)) == "form-data", invalid_argument,
                     "multipart: Content-Disposition must be form-data");
        part.name = header_param(value, "name");
        part.filename = header_param(value, "filename");
      } else if (name == "content-type") {
        part.content_type = std::string(value);
      }
    }
    KILN_REQUIRE(!part.name.empty(), invalid_argument, "multipart: a part without a name in its Content-Disposition");
    pos = header_end + 4;
    const size_t end = body.find(next, pos);
    KILN_REQUIRE(end != std::string_view::npos, invalid_argument, "multipart: part '", part.name,
                 "' is not closed by the boundary (truncated body?)");
    part.body = body.substr(pos, end - pos);
    parts.push_back(std::move(part));
    KILN_REQUIRE(parts.size() <= 16, limit_exceeded, "multipart: more than 16 parts");
    pos = end + next.size();
  }
}

}  // namespace kiln::server
