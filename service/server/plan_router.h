// POST /v1/plan: prediction only, answered synchronously (service/planning/plan_application, as
// `kiln plan`). The body is either
//   multipart/form-data: `description` (YAML or JSON), optional `target`, optional `model`; or
//   application/json: {"description": {...}, "target": {...}?} whose model is named by
//   description.model.sha256 (a model sent to /v1/plan before).
// Models are kept content-addressed under DATA_DIR/models/<sha256>.onnx, so a client uploads a
// model once and plans it again by digest. The target is the `target` document, else the target
// the description names in the registry (/v1/targets), else this machine. Predictions come from
// DATA_DIR/benchmarks.sqlite (this machine: `kiln bench-target --db`; others: POST /v1/benchmarks);
// fits and model costs are cached under DATA_DIR/cache.
// Answers: 200 plan.json (status "ok" or "infeasible"); 400/413/422 naming the part and field;
// 409 when there is no benchmark profile for the target (says how to get one); 415 for another
// body type or a non-ONNX model.
#pragma once

#include <cstdint>
#include <string>

#include "service/jobs/job_store.h"
#include "service/runtime/serve/v2_router.h"

namespace kiln::server {

struct PlanRouterLimits {
  uint64_t max_document_bytes = uint64_t{1} << 20;
  uint64_t max_model_bytes = uint64_t{1} << 30;
};

class PlanRouter {
 public:
  PlanRouter(jobs::JobStore& store, std::string data_dir, PlanRouterLimits limits);

  // Blocking for as long as the plan takes (tens of ms warm; seconds the first time a model is
  // planned, when it is compiled once per precision): callers keep it off the I/O threads.
  serve::HttpResponse handle(const serve::HttpRequest& request) const;

 private:
  jobs::JobStore& store_;
  std::string data_dir_;
  PlanRouterLimits limits_;
};

}  // namespace kiln::server
