// Responses in the contract's shapes for the routers added beside jobs_router: JSON bodies and
// the openapi Error {"error": {"code", "message", "details"?}}, including a document's schema
// violations as FieldErrors (part, pointer, line, column, message).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/error.h"
#include "service/runtime/serve/v2_router.h"

namespace kiln::server {

serve::HttpResponse api_json(int status, const nlohmann::ordered_json& body);
serve::HttpResponse api_error(int status, const std::string& code, const std::string& message,
                              nlohmann::ordered_json details = nullptr);
// 400 (syntax), 413 (a limit) or 422 (schema) naming `part` and each violation by JSON pointer.
serve::HttpResponse api_document_errors(const std::string& part, const std::vector<api::Error>& errors);

}  // namespace kiln::server
