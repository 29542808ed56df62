// The verification stage: runs a compiled plan on the compiled engine and a reference plan
// (normally the same model before the passes, in fp32) on the reference executor, over the same
// data set, and compares every output.
//
// Data is a set of N samples per plan input (dim 0 = sample). The plans have a fixed batch B
// (dim 0 of every input and output): the samples run in ceil(N / B) batches, the last one padded
// with zeros and its outputs trimmed to the real samples.
//
// Per output it reports max abs error, max relative error (max abs error / max |reference|, so
// that near-zero reference values do not dominate), cosine similarity and, for classifier outputs
// (float [B, C], C >= 2), top-1 agreement; with labels, the accuracy of both and the drop.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"
#include "kernels/device/plan_runner.h"
#include "kernels/plan.h"

namespace kiln {

struct VerifyData {
  std::vector<Tensor> inputs;   // per plan input, [N, ...]: each sample's shape (or element count) must match the plan's
  std::optional<Tensor> labels;  // int64 [N], class per sample
  std::string source;            // where the data came from, for the report ("random: ...", a path)
  bool random = false;           // seeded random data rather than the user's
};

// Samples [start, start + count) of `data` ([N, ...]) as one zero-padded batch of `shape`
// (dim 0 = the batch; a sample may be shaped differently as long as its element count agrees).
Tensor batch_slice(const Tensor& data, const Shape& shape, DType dtype, int64_t start, int64_t count);

// Seeded random data for N samples of every plan input: float inputs uniform in [-1, 1), others
// zero (random indices or ids would be out of range for most models).
VerifyData verify_random_data(const Plan& plan, int64_t samples, uint32_t seed);

// `data` with every float input rounded to 8 bits as int8 quantization of that input rounds it:
// symmetric over the whole set (u8 when no value is negative, else s8), nothing clipped.
VerifyData round_inputs_to_8_bits(const VerifyData& data);

// Reference outputs kept from one verification to the next of the same reference plan on the
// same data (kiln optimize verifies several candidates, CPU and GPU, at one batch): per batch size,
// the outputs of each batch in order. The caller keeps plan and data the same; the reference
// executor is by far the slower side, so each later verification costs only its compiled runs.
struct ReferenceCache {
  std::map<int64_t, std::vector<std::vector<Tensor>>> outputs;
};

struct VerifyOptions {
  int threads = 0;            // compiled engine threads (0: the CPU quota)
  int reference_threads = 0;  // reference batches run at once (0: as many as engine threads)
  std::string reference_description;  // what the reference plan is, for the report
  DeviceKind device = DeviceKind::cpu;  // where the compiled plan runs (the reference always on the CPU)
  DeviceEngineOptions device_options;
  // Set: the compiled plan (compiled for the CUDA engine) runs on the CPU with this GPU precision's
  // rounding (kernels/verify/precision_emulation.h), not on `device`.
  std::optional<DevicePrecision> emulate;
  ReferenceCache* reference_cache = nullptr;  // see ReferenceCache; nullptr: the reference always runs
  // The input sensitivity check: when set (the same samples and shapes as `data`, e.g. rounded to
  // 8 bits), the reference plan also runs on the CPU engine over these inputs and is compared with
  // the same reference outputs (report.input_rounding): the reference executor runs once for both.
  const VerifyData* sensitivity_data = nullptr;
};

// One output's comparison, accumulated batch by batch (also usable on its own, as in the tests).
struct OutputMetrics {
  std::string name;
  int64_t elements = 0;
  int64_t nonfinite = 0;       // compiled values that are NaN/inf where the reference is finite
  double max_abs_error = 0;
  double max_abs_reference = 0;
  double max_rel_error = 0;    // max_abs_error / max_abs_reference
  double cosine = 1;
  bool classifier = false;     // float [N, C] with C >= 2: top-1 metrics below are meaningful
  int64_t rows = 0;
  int64_t top1_agree = 0;
  double top1_agreement = 0;   // top1_agree / rows
  bool has_labels = false;
  int64_t reference_correct = 0, compiled_correct = 0;
  double reference_accuracy = 0, compiled_accuracy = 0;
  double accuracy_drop = 0;    // reference_accuracy - compiled_accuracy (positive: compiled is worse)
};

class OutputComparison {
 public:
  explicit OutputComparison(std::string name) { m_.name = std::move(name); }
  // `reference` and `compiled` have the same shape; only the first `rows` of dim 0 count.
  // `labels` (int64, at least `rows` values) may be null.
  Status add(const Tensor& reference, const Tensor& compiled, int64_t rows, const int64_t* labels);
  OutputMetrics finish() const;

 private:
  OutputMetrics m_;
  bool started_ = false;
  double dot_ = 0, ref_sq_ = 0, got_sq_ = 0;
};

struct VerifyReport {
  std::string data_source;
  bool random_data = false;
  bool labels = false;
  std::string reference;  // what ran as the reference
  int64_t samples = 0;
  int64_t batch = 0;
  int64_t batches = 0;
  int64_t padded_samples = 0;  // zero samples added to fill the last batch
  int engine_threads = 0;
  std::string engine;  // where the compiled plan ran: "cpu, 2 threads", "cuda: <GPU>, fp16, CUDA Graph"
  int reference_threads = 0;
  double reference_seconds = 0;
  double compiled_seconds = 0;
  std::vector<OutputMetrics> outputs;
  // The passes that removed weights without fine-tuning (set by the caller that compiled the
  // model). The report then says so and names the accuracy drop as their cost.
  std::vector<std::string> pruned_by;
  // The fp32 model on its inputs rounded to 8 bits against the clean inputs (kiln verify
  // --input-sensitivity): how far the model's own outputs move under the rounding an int8 first
  // layer applies, so a bound on agreement can be read against what the model itself allows.
  std::vector<OutputMetrics> input_rounding;
};

// `compiled` runs on the engine, `reference` on the reference executor; both must have the same
// inputs and outputs (names and shapes).
Result<VerifyReport> verify_plans(const Plan& compiled, const Plan& reference, const VerifyData& data,
                                  const VerifyOptions& options = {});

std::string verify_report_json(const VerifyReport& report);  // pretty-printed JSON object
void verify_report_print(std::ostream& os, const VerifyReport& report);

}  // namespace kiln
