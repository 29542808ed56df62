// POST /v1/jobs with a JSON body (openapi createJob, application/json): {"description": {...},
// "target": {...}?}, the model referenced by the description's model.url. Parsed into the same
// texts a multipart upload carries, so one path validates and queues both.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "service/runtime/serve/v2_router.h"

namespace kiln::server {

struct JsonSubmission {
  std::string description;  // JSON text
  std::string target;       // JSON text; empty when the description names a registered target
  std::string model_url;    // description.model.url as sent (checked before schema validation,
                            // so a refused scheme is a 400 naming it rather than a pattern error)
};

// The submission, or the 400 answer naming what is malformed.
std::variant<JsonSubmission, serve::HttpResponse> json_submission_parse(std::string_view body);

}  // namespace kiln::server
