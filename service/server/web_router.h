// The web form's routes, as a function from request to response (no sockets):
//   GET /                  the form (index.html)
//   GET /static/<file>     its stylesheet and JavaScript modules
// The files are compiled into kiln (service/web/). Every response carries an ETag (the file's
// SHA-256) with Cache-Control: no-cache, so a browser revalidates and gets 304 while the binary
// is unchanged, and a Content-Security-Policy that allows scripts and styles from this origin
// only: no inline script, no inline style, nothing from elsewhere.
#pragma once

#include <string_view>

#include "service/runtime/serve/v2_router.h"

namespace kiln::server {

// Whether `path` (without query) is one of the web form's: "/" or under "/static/".
bool web_route_matches(std::string_view path);

serve::HttpResponse web_handle(const serve::HttpRequest& request);

// The policy of every HTML page the server sends (the form and the HTML report).
inline constexpr std::string_view kWebContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

// Adds the Content-Security-Policy and the headers that keep browsers from sniffing types,
// framing the page or sending it as a referrer.
void web_security_headers_add(serve::HttpResponse& response);

}  // namespace kiln::server
