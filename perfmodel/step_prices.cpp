#include "perfmodel/step_prices.h"

#include "perfmodel/plan_features.h"
#include "perfmodel/cache_file.h"
#include "perfmodel/predictor_cache.h"
#include "perfmodel/target_profile.h"

namespace kiln::perf {

StepPricer predicted_step_prices(const LatencyPredictor& predictor) {
  return [&predictor](const Plan& plan, const std::vector<EngineStep>& steps, int threads) {
    const std::vector<StepFeatures> features = plan_features(plan, steps, threads);
    const PlanPrediction p = predictor.predict(features);
    std::map<std::string, double> ms;
    for (size_t i = 0; i < features.size() && i < p.steps.size(); ++i) ms[features[i].node] += p.steps[i].ms;
    return ms;
  };
}

std::optional<LatencyPredictor> local_predictor(const std::string& db) {
  auto profile = target_profile_load(db, "");
  if (!profile) return std::nullopt;
  auto fitted = predictor_fit_cached(profile->measurements, {}, kiln_cache_dir() + "/predictor");
  if (!fitted) return std::nullopt;
  return std::move(*fitted);
}

}  // namespace kiln::perf
