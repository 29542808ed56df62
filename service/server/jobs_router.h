// The service's /v1 endpoints as a function from request to response, testable without sockets:
//   POST   /v1/jobs                        submit (multipart: description, target, model,
//                                          optional calibration, validation; Idempotency-Key)
//   GET    /v1/jobs[?state=&limit=&cursor=] list, newest first
//   GET    /v1/jobs/{id}                   state, stage, progress, timings, errors
//   DELETE /v1/jobs/{id}                   cancel
//   GET    /v1/jobs/{id}/events            server-sent events (stage, done); Last-Event-ID resumes
//   GET    /v1/jobs/{id}/report            report.json once the report stage ran (?format=html or
//                                          Accept: text/html: rendered by report_html)
//   GET    /v1/jobs/{id}/artifacts[/{name}] the recorded artifacts; names are looked up in the
//                                          job's artifact list, never joined to a path
//   GET    /healthz, /readyz, /metrics
// A caller sees only the jobs it owns (admins and the local user see all); another owner's job
// is a 404, so its existence does not leak. The model comes as a part or by the description's
// model.url (JSON body or multipart), fetched by the job's first stage, `fetch`; the target as a
// part or by the description's `target` naming a registered target (copied into the job).
// Errors are {"error": {"code", "message", "details"?}} (openapi Error); status codes are
// chosen here and nowhere else. Uploads are written to the job's directory under the data dir.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "service/jobs/job_runner.h"
#include "service/jobs/job_store.h"
#include "service/runtime/serve/v2_router.h"
#include "service/server/address_policy.h"
#include "service/server/auth.h"

namespace kiln::server {

struct JobsRouterLimits {
  uint64_t max_document_bytes = uint64_t{1} << 20;  // description, target (api/limits.h)
  uint64_t max_model_bytes = uint64_t{1} << 30;
  uint64_t max_data_bytes = uint64_t{256} << 20;  // calibration, validation
  int64_t max_queued_jobs = 1000;                 // beyond: 503 with Retry-After
  // The request body limit the HTTP server needs for the largest valid upload.
  uint64_t max_body_bytes() const { return max_document_bytes * 2 + max_model_bytes + max_data_bytes * 2 + (1 << 20); }
};

class JobsRouter {
 public:
  JobsRouter(jobs::JobStore& store, jobs::JobRunner& runner, std::string data_dir, JobsRouterLimits limits = {});

  serve::HttpResponse handle(const serve::HttpRequest& request, const Caller& caller = Caller::local_user()) const;

  // Addresses a model URL may name besides public ones (kiln serve --fetch-allow).
  void set_fetch_allow(std::vector<Cidr> allow) { fetch_allow_ = std::move(allow); }

  // While draining before exit /readyz answers 503.
  void set_ready(bool ready) { ready_.store(ready); }

 private:
  serve::HttpResponse job_submit(const serve::HttpRequest& request, const Caller& caller) const;
  serve::HttpResponse job_list(const std::string& query, const Caller& caller) const;
  serve::HttpResponse job_route(const serve::HttpRequest& request, const std::string& rest, const std::string& query,
                                const Caller& caller) const;
  serve::HttpResponse ready() const;
  serve::HttpResponse metrics() const;

  jobs::JobStore& store_;
  jobs::JobRunner& runner_;
  std::string data_dir_;
  JobsRouterLimits limits_;
  std::vector<Cidr> fetch_allow_;
  std::atomic<bool> ready_{true};
};

// Whether `bytes` parse as a protobuf message with an ONNX ModelProto's top-level fields (a
// graph among them); cheap, checks the wire format only. Empty when it does, else why not.
std::string onnx_model_check(std::string_view bytes);

}  // namespace kiln::server
