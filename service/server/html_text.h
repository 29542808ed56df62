// Values as text for the HTML the server writes: escaping (every string that reaches HTML goes
// through html_escape, in text and in attribute values alike) and numbers, sizes, truncation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::server {

// & < > " ' as character references; safe in element text and in quoted attribute values.
std::string html_escape(std::string_view text);

// Three significant digits without exponent: 0.0123, 1.23, 12.3, 123, 12345.
std::string number_text(double value);

// 512 B, 12.3 KiB, 4.56 MiB, 1.20 GiB.
std::string bytes_text(int64_t bytes);

// At most `max_chars` code points of UTF-8 `text`, cut on a character boundary, with "…" when cut.
std::string text_shorten(std::string_view text, size_t max_chars);

}  // namespace kiln::server
