// The registry of targets as a function from request to response:
//   GET    /v1/targets            names and kinds (read scope)
//   GET    /v1/targets/{name}     the document as registered, JSON (read)
//   PUT    /v1/targets/{name}     register or replace (admin): validated by the same schema as a
//                                 job's `target` part (422 naming each field by JSON pointer);
//                                 its `name` must equal the path's
//   DELETE /v1/targets/{name}     remove (admin); queued jobs keep their own copy
// Scopes are checked before (auth.h). Names follow openapi TargetName (no path characters).
#pragma once

#include <cstdint>
#include <string>

#include "service/jobs/job_store.h"
#include "service/runtime/serve/v2_router.h"

namespace kiln::server {

// openapi TargetName: ^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$, at most 63 characters.
bool target_name_valid(const std::string& name);

class TargetsRouter {
 public:
  TargetsRouter(jobs::JobStore& store, uint64_t max_document_bytes);

  // `path` starts with /v1/targets.
  serve::HttpResponse handle(const serve::HttpRequest& request, const std::string& path) const;

 private:
  serve::HttpResponse target_put(const serve::HttpRequest& request, const std::string& name) const;

  jobs::JobStore& store_;
  uint64_t max_document_bytes_;
};

}  // namespace kiln::server
