#include "service/server/html_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace kiln::server {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number_text(double value) {
  if (!std::isfinite(value)) return "n/a";
  const double magnitude = std::fabs(value);
  int decimals = 0;
  if (magnitude == 0 || magnitude >= 100) decimals = 0;
  else if (magnitude >= 10) decimals = 1;
  else if (magnitude >= 1) decimals = 2;
  else decimals = std::min(9, 2 - static_cast<int>(std::floor(std::log10(magnitude))));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string bytes_text(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(units)) v /= 1024, ++unit;
  return number_text(v) + " " + units[unit];
}

std::string text_shorten(std::string_view text, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    // Continuation bytes (10xxxxxx) belong to the character before them.
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (chars == max_chars) return std::string(text.substr(0, i)) + "…";
    ++chars;
  }
  return std::string(text);
}

}  // namespace kiln::server
