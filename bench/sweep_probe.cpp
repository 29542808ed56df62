// One sweep shape at a time: the profile's prediction for it beside its time now, measured the way
// `kiln bench-target` measures its sweep (one-op graph, producer in the same precision). For
// finding out whether a whole-model miss is the predictor's interpolation (a shape the sweep never
// had) or the model's context (the same shape alone runs faster than inside the model).
//
//   kiln_sweep_probe [--db FILE] [--target ID] --dtype f32|bf16|int8 --threads T SHAPE...
//   SHAPE: conv:B,CIN,COUT,H,K,S  dwconv:B,C,H,K,S  add:B,C,H  (H: input height = width; pad K/2)
//          concat:B,C,H (two inputs of C channels)  maxpool:B,C,H,K,S (no padding)
//          add a suffix "+plain" (reads plain float32), "+f32" (reads float32 in its own format) or
//          "+s8" (int8 reading s8; without a suffix int8 convs read u8)
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/predictor.h"
#include "perfmodel/target_profile.h"

using namespace kiln;

namespace {

bool parse_shape(std::string spec, perf::SweepShape& s) {
  bool plain = false, f32in = false, s8in = false;
  if (const auto plus = spec.find('+'); plus != std::string::npos) {
    const std::string suffix = spec.substr(plus + 1);
    plain = suffix == "plain", f32in = suffix == "f32", s8in = suffix == "s8";
    if (!plain && !f32in && !s8in) return false;
    spec.resize(plus);
  }
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return false;
  const std::string op = spec.substr(0, colon);
  std::vector<int64_t> v;
  std::stringstream in(spec.substr(colon + 1));
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::atoll(item.c_str()));
  if (op == "conv" && v.size() == 6) {
    s = {perf::SweepOp::conv, v[0], v[1], v[2], v[3], v[3], v[4], v[5], v[4] / 2};
  } else if (op == "dwconv" && v.size() == 5) {
    s = {perf::SweepOp::depthwise_conv, v[0], v[1], v[1], v[2], v[2], v[3], v[4], v[3] / 2};
  } else if (op == "add" && v.size() == 3) {
    s = {perf::SweepOp::add, v[0], v[1], v[1], v[2], v[2]};
  } else if (op == "concat" && v.size() == 3) {  // two inputs of C channels each
    s = {perf::SweepOp::concat, v[0], v[1], 2 * v[1], v[2], v[2]};
  } else if (op == "maxpool" && v.size() == 5) {
    s = {perf::SweepOp::maxpool, v[0], v[1], v[1], v[2], v[2], v[3], v[4], 0};
  } else {
    return false;
  }
  s.plain_input = plain, s.float_input = f32in, s.signed_input = s8in;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db, target, dtype = "f32";
  int threads = 1;
  std::vector<perf::SweepShape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--db" && has_value) db = argv[++i];
    else if (a == "--target" && has_value) target = argv[++i];
    else if (a == "--dtype" && has_value) dtype = argv[++i];
    else if (a == "--threads" && has_value) threads = std::atoi(argv[++i]);
    else if (perf::SweepShape s; parse_shape(a, s)) shapes.push_back(s);
    else {
      std::fprintf(stderr, "kiln_sweep_probe: cannot read '%s'\nusage: kiln_sweep_probe [--db FILE] [--target ID] --dtype f32|bf16|int8 --threads T conv:B,CIN,COUT,H,K,S[+plain|+f32|+s8] dwconv:B,C,H,K,S[+plain|+s8] add:B,C,H concat:B,C,H maxpool:B,C,H,K,S ...\n", a.c_str());
      return 2;
    }
  }
  if (shapes.empty() || threads < 1 || (dtype != "f32" && dtype != "bf16" && dtype != "int8")) {
    std::fprintf(stderr, "kiln_sweep_probe: give --dtype f32|bf16|int8, --threads >= 1 and at least one shape\n");
    return 2;
  }
  auto profile = perf::target_profile_load(db.empty() ? perf::benchmark_store_default_path() : db, target);
  if (!profile) {
    std::fprintf(stderr, "kiln_sweep_probe: %s\n", profile.error().message.c_str());
    return 1;
  }
  auto predictor = perf::LatencyPredictor::fit(profile->measurements, {});
  if (!predictor) {
    std::fprintf(stderr, "kiln_sweep_probe: %s\n", predictor.error().message.c_str());
    return 1;
  }
  perf::TimingOptions timing;
  timing.budget_ms = 200;
  timing.min_runs = 10;
  timing.warmup = 2;
  std::printf("%-48s %6s %3s %12s %12s %8s  how\n", "shape", "dtype", "thr", "predicted_ms", "measured_ms", "error%");
  for (const perf::SweepShape& s : shapes) {
    perf::BenchPoint p = perf::sweep_point(perf::sweep_as_run(s, dtype), dtype, threads, timing);
    perf::Measurement m = p.record;
    if (Status st = p.measure(m); !st) {
      std::fprintf(stderr, "kiln_sweep_probe: %s\n", st.message().c_str());
      return 1;
    }
    // A border point is priced as the model prices it: the interior kernel plus its conversion.
    perf::Measurement interior = p.record;
    const std::string suffix = s.plain_input ? perf::kFromPlainSuffix : s.float_input ? perf::kFromFloatSuffix : s.signed_input ? perf::kFromSignedSuffix : "";
    if (!suffix.empty()) interior.op.resize(interior.op.size() - suffix.size());
    const perf::StepPrediction pred = predictor->kernel_ms(interior);
    std::printf("%-48s %6s %3d %12.3f %12.3f %+7.1f%%  %s%s [%s -> %s]\n", p.record.key.c_str(), dtype.c_str(), threads, pred.ms,
                m.median_ms, 100 * (pred.ms / m.median_ms - 1), pred.how.c_str(), suffix.empty() ? "" : " (interior only)",
                m.kernel.c_str(), m.layout.c_str());
  }
  return 0;
}
