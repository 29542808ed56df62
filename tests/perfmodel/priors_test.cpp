// Spec priors: the common accelerators are there with plausible numbers and a source, and a
// prior is replaced once measured data for its device is stored.
#include <catch2/catch.hpp>

#include "perfmodel/priors.h"
#include "tests/perfmodel/store_samples.h"

using namespace kiln::perf;

TEST_CASE("priors exist for H100, H200, A100, L4, T4, V100 and a few CPUs", "[perfmodel][priors]") {
  for (const char* id : {"nvidia-h100-sxm", "nvidia-h200-sxm", "nvidia-a100-sxm4-80gb", "nvidia-l4", "nvidia-t4",
                         "nvidia-v100-sxm2-32gb"}) {
    INFO(id);
    const TargetPrior* p = target_prior_find(id);
    REQUIRE(p != nullptr);
    CHECK(p->device == "gpu");
    CHECK(p->memory_bandwidth_gbs > 100);
    CHECK(p->memory_gb >= 16);
    CHECK_FALSE(p->source.empty());
    REQUIRE_FALSE(p->peaks.empty());
    CHECK(p->peaks.front().dtype == "f32");
    for (const PriorPeak& k : p->peaks) CHECK(k.tflops > 0);
  }
  int cpus = 0;
  for (const TargetPrior& p : target_priors()) cpus += p.device == "cpu";
  CHECK(cpus >= 2);
  // Spot checks against the datasheets.
  CHECK(target_prior_find("nvidia-h200-sxm")->memory_gb == 141);
  CHECK(target_prior_find("nvidia-a100-sxm4-80gb")->memory_bandwidth_gbs == 2039);
  CHECK(target_prior_find("no-such-gpu") == nullptr);
}

TEST_CASE("a prior is replaced by measured data for its device", "[perfmodel][priors]") {
  const TargetPrior& h100 = *target_prior_find("nvidia-h100-sxm");
  StoredTarget measured;
  measured.fingerprint = testing::sample_fingerprint("NVIDIA H100 80GB HBM3");
  measured.source = "imported";
  measured.measurements = 0;
  CHECK(prior_replaced_by(h100, {measured}).empty());  // a target without data replaces nothing
  measured.measurements = 12;
  CHECK(prior_replaced_by(h100, {measured}) == measured.fingerprint.id);
  CHECK(prior_replaced_by(*target_prior_find("nvidia-a100-sxm4-80gb"), {measured}).empty());
}
