// kiln-runtime: the lean binary inside images. It executes .kiln plans and checks its self-test;
// it links kiln_kernels only (no ONNX, protobuf or compilers), which keeps the image's library
// closure small. One file per verb; each adds its subcommand and sets `run` to its exit code.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace kiln::runtime {

using VerbRunner = std::function<int()>;

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // bad input, failed run or failed self-test; the message says which
inline constexpr int kExitUsage = 2;

void add_run_verb(CLI::App& app, VerbRunner& run);
void add_selftest_verb(CLI::App& app, VerbRunner& run);
void add_serve_model_verb(CLI::App& app, VerbRunner& run);

// Defaults the image sets in its environment: KILN_THREADS (0 or unset: the CPU quota),
// KILN_BUNDLE (unset: /kiln) and KILN_DEVICE. Command-line options override them.
int env_threads();
std::string env_bundle();
// KILN_DEVICE (cpu|cuda; GPU images set cuda) is every verb's --device default; main refuses
// any other value, naming the variable.
inline constexpr const char* kDeviceEnv = "KILN_DEVICE";
// KILN_CUDA_PRECISION (fp32|tf32|fp16|bf16; GPU images set the one they were built for) is every
// verb's --cuda-precision default, checked the same way.
inline constexpr const char* kCudaPrecisionEnv = "KILN_CUDA_PRECISION";

// Prints "kiln-runtime: error: <message>" on stderr and returns kExitError.
int report_error(const std::string& message);

}  // namespace kiln::runtime
