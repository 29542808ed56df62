// kiln-runtime: executes compiled .kiln plans inside deployment images.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string_view>

#include "kernels/device/device_backend.h"
#include "service/runtime/verbs.h"

namespace kiln::runtime {

int env_threads() {
  const char* text = std::getenv("KILN_THREADS");
  if (!text || !*text) return 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return (end && *end == '\0' && v > 0 && v < 65536) ? static_cast<int>(v) : 0;
}

std::string env_bundle() {
  const char* dir = std::getenv("KILN_BUNDLE");
  return dir && *dir ? dir : "/kiln";
}

int report_error(const std::string& message) {
  std::cerr << "kiln-runtime: error: " << message << '\n';
  return kExitError;
}

}  // namespace kiln::runtime

int main(int argc, char** argv) {
  using namespace kiln::runtime;
  CLI::App app{"kiln-runtime: runs compiled kiln plans (.kiln), checks an image's self-test and serves the model over HTTP"};
  app.require_subcommand(1);
  // CLI11 would name only --device when the environment's value is wrong.
  if (const char* device = std::getenv(kDeviceEnv); device && *device && std::string_view(device) != "cpu" &&
                                                      std::string_view(device) != "cuda") {
    std::cerr << "kiln-runtime: error: " << kDeviceEnv << "=" << device << " is not a device: use cpu or cuda\n";
    return kExitUsage;
  }
  if (const char* precision = std::getenv(kCudaPrecisionEnv); precision && *precision && !kiln::device_precision_from_name(precision)) {
    std::cerr << "kiln-runtime: error: " << kCudaPrecisionEnv << "=" << precision
              << " is not a CUDA precision: use fp32, tf32, fp16 or bf16\n";
    return kExitUsage;
  }
  VerbRunner run;
  add_run_verb(app, run);
  add_selftest_verb(app, run);
  add_serve_model_verb(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  try {
    return run ? run() : kExitUsage;
  } catch (const std::bad_alloc&) {
    return report_error("out of memory");
  } catch (const std::exception& e) {
    return report_error(std::string("internal error: ") + e.what());
  }
}
