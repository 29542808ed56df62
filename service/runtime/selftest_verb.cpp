// kiln-runtime selftest [--bundle DIR] [--device cpu|cuda]: runs the bundle's plan on its self-test
// inputs and compares with the verified reference outputs stored at bundle time; exits 1 on a
// mismatch. The image's health check and the first step of a batch job; on a GPU it also checks
// that the device computes what was built (within its precision's tolerance).
#include <cstdio>
#include <filesystem>

#include "containers/bundle/selftest.h"
#include "kernels/plan_file.h"
#include "service/cli/device_options.h"
#include "service/runtime/verbs.h"

namespace kiln::runtime {
namespace {

struct SelftestOptions {
  std::string bundle;
  int threads = 0;
  cli::DeviceCli device;
};

int run_selftest(const SelftestOptions& opts) {
  const std::filesystem::path dir(opts.bundle);
  const std::string model = (dir / kBundleModelFile).string();
  auto loaded = plan_read_file(model);
  if (!loaded) return report_error(loaded.error().message);
  const PlanRunnerOptions runner = opts.device.runner_options(opts.threads, nullptr, &loaded->info);
  auto bundle_tolerance = selftest_tolerance_read((dir / kBundleMetadataFile).string());
  if (!bundle_tolerance) return report_error(bundle_tolerance.error().message);
  const SelftestTolerance tolerance = selftest_tolerance_on_device(*bundle_tolerance, runner);
  auto inputs = npz_read_file((dir / kBundleInputsFile).string());
  if (!inputs) return report_error(inputs.error().message);
  auto expected = npz_read_file((dir / kBundleExpectedFile).string());
  if (!expected) return report_error(expected.error().message);
  auto checks = selftest_run(loaded->plan, *inputs, *expected, tolerance, runner);
  if (!checks) return report_error(checks.error().message);
  for (const SelftestCheck& c : *checks)
    std::printf("  output %-20s max |error| %.3g (limit %.3g)  %s\n", c.output.c_str(), c.max_abs_error, c.limit,
                c.passed ? "ok" : "MISMATCH");
  std::fflush(stdout);
  Status status = selftest_status(*checks);
  if (!status) return report_error(status.message() + " (" + model + ")");
  std::printf("selftest passed: %zu output(s) of %s match the verified reference\n", checks->size(), model.c_str());
  return kExitOk;
}

}  // namespace

void add_selftest_verb(CLI::App& app, VerbRunner& run) {
  auto opts = std::make_shared<SelftestOptions>();
  opts->bundle = env_bundle();
  opts->threads = env_threads();
  CLI::App* cmd = app.add_subcommand("selftest", "Check the bundled plan against its verified self-test outputs");
  cmd->add_option("--bundle", opts->bundle, "Bundle folder holding model/, selftest/ and metadata.json (default: $KILN_BUNDLE or /kiln)");
  cmd->add_option("--threads", opts->threads, "Threads (default: $KILN_THREADS, else the CPU quota)")->check(CLI::NonNegativeNumber);
  opts->device.add_to(*cmd, /*with_device_index=*/true, kDeviceEnv, kCudaPrecisionEnv);
  cmd->callback([opts, &run] { run = [opts] { return run_selftest(*opts); }; });
}

}  // namespace kiln::runtime
