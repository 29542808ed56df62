// The service's front: authenticates each request (auth.h), sends it to the router of its path
// (jobs, targets, benchmarks, plan; everything else to JobsRouter, which also answers /healthz,
// /readyz, /metrics and 404), records request metrics, and adds them to /metrics. A function
// from request to response like the routers behind it, testable without sockets.
#pragma once

#include "service/server/auth.h"
#include "service/server/benchmarks_router.h"
#include "service/server/jobs_router.h"
#include "service/server/plan_router.h"
#include "service/server/request_metrics.h"
#include "service/server/targets_router.h"

namespace kiln::server {

class ServiceRouter {
 public:
  // `benchmarks` may be null (no benchmark store): /v1/benchmarks then answers 404.
  // `plan` may be null: /v1/plan then answers 404.
  ServiceRouter(jobs::JobStore& store, JobsRouter& jobs, TargetsRouter& targets, BenchmarksRouter* benchmarks, AuthMode mode,
                const PlanRouter* plan = nullptr);

  serve::HttpResponse handle(const serve::HttpRequest& request);

 private:
  serve::HttpResponse dispatch(const serve::HttpRequest& request, const std::string& path);

  jobs::JobStore& store_;
  JobsRouter& jobs_;
  TargetsRouter& targets_;
  BenchmarksRouter* benchmarks_;
  AuthMode mode_;
  const PlanRouter* plan_;
  RequestMetrics metrics_;
};

}  // namespace kiln::server
