#include "kernels/verify/verify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "kernels/engine.h"
#include "kernels/executor.h"
#include "kernels/quantization.h"
#include "kernels/verify/precision_emulation.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A plan input's compiled shape (concrete in a plan lowered with its dims bound).
Result<Shape> input_shape(const Plan& plan, const PlanInput& in) {
  const SymShape& s = plan.slot_types[static_cast<size_t>(in.slot)].shape;
  KILN_REQUIRE(sym_shape_is_concrete(s), invalid_argument, "input '", in.name, "' has shape ", sym_shape_to_string(s),
               ": verification needs a plan compiled for fixed shapes (bind the dims with --batch/--dims)");
  return sym_shape_concrete(s);
}

int64_t argmax_row(const Tensor& t, int64_t row, int64_t cols) {
  int64_t best = 0;
  double best_v = t.value_as_double(row * cols);
  for (int64_t c = 1; c < cols; ++c) {
    const double v = t.value_as_double(row * cols + c);
    if (v > best_v) best = c, best_v = v;
  }
  return best;
}

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

Tensor batch_slice(const Tensor& data, const Shape& shape, DType dtype, int64_t start, int64_t count) {
  Tensor batch = Tensor::zeros(dtype, shape);
  const size_t sample_bytes = batch.nbytes() / static_cast<size_t>(shape[0]);
  std::memcpy(batch.raw(), static_cast<const uint8_t*>(data.raw()) + static_cast<size_t>(start) * sample_bytes,
              static_cast<size_t>(count) * sample_bytes);
  return batch;
}

VerifyData verify_random_data(const Plan& plan, int64_t samples, uint32_t seed) {
  VerifyData data;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const PlanInput& in : plan.inputs) {
    Shape shape{samples};
    const SymShape& s = plan.slot_types[static_cast<size_t>(in.slot)].shape;
    for (size_t i = 1; i < s.size(); ++i) shape.push_back(s[i].known() ? s[i].value : 1);
    Tensor t = Tensor::zeros(in.type.dtype, shape);
    if (t.dtype() == DType::f32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    data.inputs.push_back(std::move(t));
  }
  std::ostringstream os;
  os << "seeded random data (" << samples << " samples, float inputs uniform in [-1, 1), seed " << seed << ")";
  data.source = os.str();
  data.random = true;
  return data;
}

Status OutputComparison::add(const Tensor& reference, const Tensor& compiled, int64_t rows, const int64_t* labels) {
  KILN_REQUIRE(reference.shape() == compiled.shape(), shape_mismatch, "output '", m_.name, "': the reference gives ",
               reference.describe(), " but the compiled model ", compiled.describe());
  const int64_t dim0 = reference.rank() == 0 ? 1 : reference.dim(0);
  KILN_REQUIRE(rows >= 0 && rows <= dim0, internal, "output '", m_.name, "': ", rows, " rows of ", reference.describe());
  const bool classifier = dtype_is_float(reference.dtype()) && reference.rank() == 2 && reference.dim(1) >= 2;
  if (!started_) m_.classifier = classifier, started_ = true;
  const int64_t per_row = dim0 == 0 ? 0 : reference.numel() / dim0;
  const int64_t count = rows * per_row;
  const bool f32 = reference.dtype() == DType::f32 && compiled.dtype() == DType::f32;
  for (int64_t i = 0; i < count; ++i) {
    const double r = f32 ? reference.data<float>()[i] : reference.value_as_double(i);
    const double g = f32 ? compiled.data<float>()[i] : compiled.value_as_double(i);
    if (!std::isfinite(r) || !std::isfinite(g)) {
      // Equal infinities agree; anything else non-finite on the compiled side is an error.
      if (std::isfinite(r) || !(r == g)) ++m_.nonfinite;
      continue;
    }
    m_.max_abs_error = std::max(m_.max_abs_error, std::fabs(r - g));
    m_.max_abs_reference = std::max(m_.max_abs_reference, std::fabs(r));
    dot_ += r * g;
    ref_sq_ += r * r;
    got_sq_ += g * g;
  }
  m_.elements += count;
  if (m_.classifier) {
    const int64_t cols = reference.dim(1);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t ref_top = argmax_row(reference, row, cols);
      const int64_t got_top = argmax_row(compiled, row, cols);
      m_.top1_agree += ref_top == got_top;
      if (labels) {
        m_.reference_correct += ref_top == labels[row];
        m_.compiled_correct += got_top == labels[row];
      }
    }
    m_.rows += rows;
    m_.has_labels = m_.has_labels || labels != nullptr;
  }
  return Status::ok();
}

OutputMetrics OutputComparison::finish() const {
  OutputMetrics m = m_;
  if (ref_sq_ == 0 && got_sq_ == 0)
    m.cosine = 1;  // both all zero: identical
  else if (ref_sq_ == 0 || got_sq_ == 0)
    m.cosine = 0;
  else
    m.cosine = dot_ / (std::sqrt(ref_sq_) * std::sqrt(got_sq_));
  if (m.max_abs_reference > 0)
    m.max_rel_error = m.max_abs_error / m.max_abs_reference;
  else
    m.max_rel_error = m.max_abs_error == 0 ? 0 : std::numeric_limits<double>::infinity();
  if (m.rows > 0) {
    const auto rows = static_cast<double>(m.rows);
    m.top1_agreement = static_cast<double>(m.top1_agree) / rows;
    if (m.has_labels) {
      m.reference_accuracy = static_cast<double>(m.reference_correct) / rows;
      m.compiled_accuracy = static_cast<double>(m.compiled_correct) / rows;
      m.accuracy_drop = m.reference_accuracy - m.compiled_accuracy;
    }
  }
  return m;
}

VerifyData round_inputs_to_8_bits(const VerifyData& data) {
  VerifyData rounded = data;
  rounded.source = data.source + ", rounded to 8 bits";
  for (Tensor& t : rounded.inputs) {
    if (t.dtype() != DType::f32 || t.numel() == 0) continue;
    t = t.clone();  // copies share their buffer: round a copy, never the caller's data
    float* x = t.data<float>();
    const auto [lo, hi] = std::minmax_element(x, x + t.numel());
    const QuantParams q = quant_params_for_range(*lo, *hi);
    const float qmin = static_cast<float>(quant_min(q.type)), qmax = static_cast<float>(quant_max(q.type));
    for (int64_t i = 0; i < t.numel(); ++i) x[i] = std::clamp(std::nearbyint(x[i] / q.scale), qmin, qmax) * q.scale;
  }
  return rounded;
}

Result<VerifyReport> verify_plans(const Plan& compiled, const Plan& reference, const VerifyData& data,
                                  const VerifyOptions& options) {
  KILN_REQUIRE(compiled.inputs.size() == reference.inputs.size() && compiled.outputs.size() == reference.outputs.size(),
               invalid_argument, "the compiled plan has ", compiled.inputs.size(), " inputs and ", compiled.outputs.size(),
               " outputs but the reference plan ", reference.inputs.size(), " and ", reference.outputs.size());
  KILN_REQUIRE(!compiled.inputs.empty(), invalid_argument, "the model has no inputs: nothing to verify over");
  KILN_REQUIRE(data.inputs.size() == compiled.inputs.size(), invalid_argument, "the data has ", data.inputs.size(),
               " inputs but the model takes ", compiled.inputs.size());

  // Every input: the plan's batch shape, and data with the same samples in the same dtype.
  std::vector<Shape> shapes;
  int64_t batch = 0, samples = -1;
  for (size_t i = 0; i < compiled.inputs.size(); ++i) {
    const PlanInput& in = compiled.inputs[i];
    KILN_REQUIRE(in.name == reference.inputs[i].name, invalid_argument, "input ", i, " is '", in.name,
                 "' in the compiled plan but '", reference.inputs[i].name, "' in the reference");
    KILN_ASSIGN(shape, input_shape(compiled, in));
    KILN_ASSIGN(ref_shape, input_shape(reference, reference.inputs[i]));
    KILN_REQUIRE(shape == ref_shape, shape_mismatch, "input '", in.name, "' is ", shape_to_string(shape),
                 " in the compiled plan but ", shape_to_string(ref_shape), " in the reference");
    KILN_REQUIRE(!shape.empty() && shape[0] >= 1, invalid_argument, "input '", in.name, "' has shape ",
                 shape_to_string(shape), ": verification needs the batch as dim 0 of every input");
    KILN_REQUIRE(batch == 0 || shape[0] == batch, invalid_argument, "input '", in.name, "' has batch ", shape[0],
                 " but another input has ", batch);
    batch = shape[0];
    const Tensor& t = data.inputs[i];
    KILN_REQUIRE(t.rank() >= 1, invalid_argument, "data for input '", in.name, "' is ", t.describe(),
                 ": it needs the samples as dim 0");
    KILN_REQUIRE(samples < 0 || t.dim(0) == samples, invalid_argument, "data for input '", in.name, "' has ", t.dim(0),
                 " samples but another input has ", samples);
    samples = t.dim(0);
    KILN_REQUIRE(t.dtype() == in.type.dtype, invalid_argument, "data for input '", in.name, "' is ", t.describe(),
                 " but the model takes ", dtype_name(in.type.dtype));
    const Shape sample(shape.begin() + 1, shape.end());
    const Shape data_sample(t.shape().begin() + 1, t.shape().end());
    KILN_REQUIRE(shape_numel(sample) == shape_numel(data_sample), shape_mismatch, "data for input '", in.name, "' is ",
                 t.describe(), ": each sample is ", shape_to_string(data_sample), " but the model takes ",
                 shape_to_string(sample), " per sample");
    shapes.push_back(shape);
  }
  KILN_REQUIRE(samples >= 1, invalid_argument, "the data has no samples");
  if (options.sensitivity_data) {
    KILN_REQUIRE(options.sensitivity_data->inputs.size() == data.inputs.size(), invalid_argument,
                 "the sensitivity data has ", options.sensitivity_data->inputs.size(), " inputs, the reference's ", data.inputs.size());
    for (size_t i = 0; i < data.inputs.size(); ++i)
      KILN_REQUIRE(options.sensitivity_data->inputs[i].shape() == data.inputs[i].shape() &&
                       options.sensitivity_data->inputs[i].dtype() == data.inputs[i].dtype(),
                   invalid_argument, "the sensitivity data for input '", compiled.inputs[i].name, "' is ",
                   options.sensitivity_data->inputs[i].describe(), ", the reference's ", data.inputs[i].describe());
  }
  const int64_t* labels = nullptr;
  if (data.labels) {
    const Tensor& l = *data.labels;
    KILN_REQUIRE(l.dtype() == DType::i64 && l.rank() == 1 && l.dim(0) == samples, invalid_argument, "labels are ",
                 l.describe(), " but the data has ", samples, " samples (labels must be int64 [", samples, "])");
    labels = l.data<int64_t>();
  }

  // The compiled plan runs on an engine, or emulated beside the reference (both on the CPU's
  // reference kernels, so they share its threads).
  // fp16/bf16/fp32 emulation runs a rounding plan on the CPU engine; tf32 runs on the emulator.
  std::unique_ptr<PlanRunner> engine;
  std::optional<Tf32Emulator> emulator;
  if (options.emulate == DevicePrecision::tf32) {
    KILN_ASSIGN(e, Tf32Emulator::create(compiled, options.device_options.keep_fp32));
    emulator.emplace(std::move(e));
  } else {
    Plan rounding;
    if (options.emulate) {
      KILN_ASSIGN(p, storage_rounding_plan(compiled, *options.emulate, options.device_options.keep_fp32));
      rounding = std::move(p);
    }
    PlanRunnerOptions runner_options;
    runner_options.device = options.emulate ? DeviceKind::cpu : options.device;
    runner_options.threads = options.threads;
    runner_options.device_options = options.device_options;
    if (options.emulate) runner_options.device_options.keep_fp32.clear();  // the rounding plan holds them
    KILN_ASSIGN(e, PlanRunner::create(options.emulate ? rounding : compiled, runner_options));
    engine = std::move(e);
  }
  std::unique_ptr<PlanRunner> sensitivity_engine;  // the reference plan, compiled for the CPU, on the sensitivity data
  if (options.sensitivity_data) {
    PlanRunnerOptions cpu;
    cpu.threads = options.threads;
    KILN_ASSIGN(e, PlanRunner::create(reference, cpu));
    sensitivity_engine = std::move(e);
  }
  VerifyReport report;
  report.data_source = data.source;
  report.random_data = data.random;
  report.labels = labels != nullptr;
  report.reference = options.reference_description;
  report.samples = samples;
  report.batch = batch;
  report.batches = (samples + batch - 1) / batch;
  report.padded_samples = report.batches * batch - samples;
  report.engine_threads = engine ? engine->threads() : 0;
  report.engine = options.emulate ? emulation_description(*options.emulate) + " (" + (engine ? engine->describe() : "reference") + ")"
                                  : engine->describe();

  std::vector<OutputComparison> comparisons;
  for (const auto& [slot, name] : compiled.outputs) comparisons.emplace_back(name);
  std::vector<OutputComparison> rounding;
  if (sensitivity_engine)
    for (const auto& [slot, name] : compiled.outputs) rounding.emplace_back(name);
  // The reference executor is by far the slower side: a group of batches runs on it concurrently
  // (one per thread, and the threads left over shared among them: one batch alone gets them all),
  // then on the engine, then is compared; memory stays bounded by one group's outputs.
  const int64_t group = std::max<int64_t>(1, options.reference_threads > 0 ? options.reference_threads
                                             : engine && engine->threads() > 0 ? engine->threads()
                                                                               : cpu_quota_threads());
  report.reference_threads = static_cast<int>(group);
  const int64_t batches = report.batches;
  for (int64_t first = 0; first < batches; first += group) {
    const int64_t count = std::min(group, batches - first);
    std::vector<std::vector<Tensor>> inputs(static_cast<size_t>(count)), sensitivity_inputs(static_cast<size_t>(count));
    for (int64_t b = 0; b < count; ++b) {
      const int64_t start = (first + b) * batch;
      for (size_t i = 0; i < shapes.size(); ++i) {
        inputs[static_cast<size_t>(b)].push_back(batch_slice(data.inputs[i], shapes[i], compiled.inputs[i].type.dtype,
                                                             start, std::min(batch, samples - start)));
        if (options.sensitivity_data)
          sensitivity_inputs[static_cast<size_t>(b)].push_back(batch_slice(options.sensitivity_data->inputs[i], shapes[i],
                                                                           compiled.inputs[i].type.dtype, start,
                                                                           std::min(batch, samples - start)));
      }
    }

    auto t0 = Clock::now();
    std::vector<std::optional<Result<ExecuteResult>>> refs(static_cast<size_t>(count));
    // Batches an earlier verification of the same reference on the same data already ran.
    std::vector<std::vector<Tensor>>* cached = options.reference_cache ? &options.reference_cache->outputs[batch] : nullptr;
    for (int64_t b = 0; b < count; ++b)
      if (cached && static_cast<int64_t>(cached->size()) > first + b) refs[static_cast<size_t>(b)] = ExecuteResult{(*cached)[static_cast<size_t>(first + b)], {}};
    {
      const int64_t to_run = std::count_if(refs.begin(), refs.end(), [](const auto& r) { return !r.has_value(); });
      ExecuteOptions each;
      each.threads = static_cast<int>(std::max<int64_t>(1, group / std::max<int64_t>(1, to_run)));
      std::vector<std::jthread> workers;
      for (int64_t b = 1; b < count; ++b)
        if (!refs[static_cast<size_t>(b)])
          workers.emplace_back([&, b] { refs[static_cast<size_t>(b)] = execute_reference(reference, inputs[static_cast<size_t>(b)], each); });
      if (!refs[0]) refs[0] = execute_reference(reference, inputs[0], each);
    }
    report.reference_seconds += seconds_since(t0);
    for (auto& r : refs)
      if (!r->is_ok()) return r->status().with_context("reference executor: ");
    if (cached && static_cast<int64_t>(cached->size()) == first)
      for (auto& r : refs) cached->push_back(r->value().outputs);
    std::vector<std::optional<Result<std::vector<Tensor>>>> emulated(static_cast<size_t>(count));
    if (emulator) {
      t0 = Clock::now();
      {
        const int each = static_cast<int>(std::max<int64_t>(1, group / count));
        std::vector<std::jthread> workers;
        for (int64_t b = 1; b < count; ++b)
          workers.emplace_back([&, b] { emulated[static_cast<size_t>(b)] = emulator->run(inputs[static_cast<size_t>(b)], each); });
        emulated[0] = emulator->run(inputs[0], each);
      }
      report.compiled_seconds += seconds_since(t0);
    }

    for (int64_t b = 0; b < count; ++b) {
      const int64_t start = (first + b) * batch;
      const int64_t rows = std::min(batch, samples - start);
      if (engine) t0 = Clock::now();
      Result<std::vector<Tensor>> got = engine ? engine->run(inputs[static_cast<size_t>(b)]) : std::move(*emulated[static_cast<size_t>(b)]);
      if (!got) return got.status().with_context(engine ? "compiled engine: " : "emulation: ");
      if (engine) report.compiled_seconds += seconds_since(t0);
      const ExecuteResult& ref = refs[static_cast<size_t>(b)]->value();
      std::vector<Tensor> moved;  // the reference plan on the sensitivity data, when asked for
      if (sensitivity_engine) {
        auto ran = sensitivity_engine->run(sensitivity_inputs[static_cast<size_t>(b)]);
        if (!ran) return ran.status().with_context("input sensitivity: ");
        moved = std::move(*ran);
      }
      for (size_t o = 0; o < comparisons.size(); ++o) {
        const Tensor& r = ref.outputs[o];
        KILN_REQUIRE(rows == batch || (r.rank() >= 1 && r.dim(0) == batch), invalid_argument, "output '",
                     compiled.outputs[o].second, "' is ", r.describe(), ": trimming a padded batch of ", batch,
                     " needs the batch as dim 0 of every output (or a sample count divisible by the batch)");
        const int64_t out_rows = r.rank() >= 1 && r.dim(0) == batch ? rows : (r.rank() == 0 ? 1 : r.dim(0));
        KILN_TRY(comparisons[o].add(r, (*got)[o], out_rows, labels ? labels + start : nullptr));
        if (sensitivity_engine) KILN_TRY(rounding[o].add(r, moved[o], out_rows, labels ? labels + start : nullptr));
      }
    }
  }
  for (const OutputComparison& c : comparisons) report.outputs.push_back(c.finish());
  for (const OutputComparison& c : rounding) report.input_rounding.push_back(c.finish());
  return report;
}

namespace {

// "pruned by P without fine-tuning; accuracy cost: ..." (the reference is the unpruned model).
std::string pruning_statement(const VerifyReport& report) {
  std::ostringstream s;
  s << "pruned by ";
  for (size_t i = 0; i < report.pruned_by.size(); ++i) s << (i ? ", " : "") << report.pruned_by[i];
  s << " without fine-tuning; accuracy cost: " << std::fixed << std::setprecision(2);
  bool measured = false;
  for (const OutputMetrics& m : report.outputs) {
    if (!m.classifier || !m.has_labels) continue;
    s << (measured ? "; " : "") << 100.0 * m.accuracy_drop << " points on '" << m.name << "' ("
      << 100.0 * m.reference_accuracy << "% unpruned -> " << 100.0 * m.compiled_accuracy << "% pruned)";
    measured = true;
  }
  if (!measured)
    s << "not measured (no labelled classifier output; supply labels), top-1 agreement and cosine above show the change";
  return s.str();
}

}  // namespace

std::string verify_report_json(const VerifyReport& report) {
  nlohmann::json outputs = nlohmann::json::array();
  for (const OutputMetrics& m : report.outputs) {
    nlohmann::json o = {{"name", m.name},
                        {"elements", m.elements},
                        {"nonfinite", m.nonfinite},
                        {"max_abs_error", finite_or_null(m.max_abs_error)},
                        {"max_abs_reference", m.max_abs_reference},
                        {"max_rel_error", finite_or_null(m.max_rel_error)},
                        {"cosine", m.cosine},
                        {"classifier", m.classifier}};
    if (m.classifier) {
      o["rows"] = m.rows;
      o["top1_agree"] = m.top1_agree;
      o["top1_agreement"] = m.top1_agreement;
      if (m.has_labels) {
        o["reference_correct"] = m.reference_correct;
        o["compiled_correct"] = m.compiled_correct;
        o["reference_accuracy"] = m.reference_accuracy;
        o["compiled_accuracy"] = m.compiled_accuracy;
        o["accuracy_drop"] = m.accuracy_drop;
      }
    }
    outputs.push_back(std::move(o));
  }
  const nlohmann::json j = {
      {"data", {{"source", report.data_source}, {"random", report.random_data}, {"labels", report.labels},
                {"samples", report.samples}}},
      {"reference", report.reference},
      {"batch", report.batch},
      {"batches", report.batches},
      {"padded_samples", report.padded_samples},
      {"engine_threads", report.engine_threads},
      {"engine", report.engine},
      {"reference_threads", report.reference_threads},
      {"reference_seconds", report.reference_seconds},
      {"compiled_seconds", report.compiled_seconds},
      {"outputs", std::move(outputs)},
  };
  nlohmann::json out = j;
  if (!report.input_rounding.empty()) {
    nlohmann::json rounding = nlohmann::json::array();
    for (const OutputMetrics& m : report.input_rounding) {
      nlohmann::json o = {{"name", m.name}, {"max_rel_error", finite_or_null(m.max_rel_error)}, {"cosine", m.cosine}};
      if (m.classifier) o["top1_agreement"] = m.top1_agreement;
      rounding.push_back(std::move(o));
    }
    out["input_rounding"] = std::move(rounding);
  }
  if (!report.pruned_by.empty()) {
    nlohmann::json cost = nullptr;  // the first labelled classifier's accuracy drop
    for (const OutputMetrics& m : report.outputs)
      if (m.classifier && m.has_labels && cost.is_null()) cost = m.accuracy_drop;
    out["pruning"] = {{"passes", report.pruned_by},
                      {"fine_tuned", false},
                      {"accuracy_cost", cost},
                      {"statement", pruning_statement(report)}};
  }
  return out.dump(2);
}

void verify_report_print(std::ostream& os, const VerifyReport& report) {
  const auto flags = os.flags();
  const auto percent = [](double v) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(2) << 100.0 * v << '%';
    return s.str();
  };
  os << "data: " << report.data_source << (report.labels ? ", with labels" : ", no labels") << '\n';
  if (report.random_data) os << "  (random data: no accuracy; supply --input or IDX images and labels for that)\n";
  os << "reference: " << report.reference << '\n';
  os << report.samples << " samples in " << report.batches << " batches of " << report.batch;
  if (report.padded_samples > 0) os << " (last padded with " << report.padded_samples << " zero samples, trimmed)";
  os << std::fixed << std::setprecision(2) << "; reference " << report.reference_seconds << " s, compiled "
     << report.compiled_seconds << " s (" << report.engine << "; reference batches "
     << report.reference_threads << " at a time)\n";
  for (const OutputMetrics& m : report.outputs) {
    os << "output " << m.name << ":\n" << std::scientific << std::setprecision(3);
    os << "  max abs error " << m.max_abs_error << ", max rel error " << m.max_rel_error << " (of max |ref| "
       << m.max_abs_reference << ")" << std::fixed << std::setprecision(6) << ", cosine " << m.cosine << '\n';
    if (m.nonfinite > 0) os << "  WARNING: " << m.nonfinite << " compiled values are NaN/inf where the reference is finite\n";
    if (m.classifier) {
      os << "  top-1 agreement " << percent(m.top1_agreement) << " (" << m.top1_agree << "/" << m.rows << ")\n";
      if (m.has_labels)
        os << "  accuracy: reference " << percent(m.reference_accuracy) << " (" << m.reference_correct << "/" << m.rows
           << "), compiled " << percent(m.compiled_accuracy) << " (" << m.compiled_correct << "/" << m.rows << "), drop "
           << std::setprecision(2) << 100.0 * m.accuracy_drop << " points\n";
    }
  }
  if (!report.input_rounding.empty()) {
    os << "input sensitivity: the fp32 model on its inputs rounded to 8 bits (as an int8 first layer rounds them) "
          "against the clean inputs:\n";
    for (const OutputMetrics& m : report.input_rounding) {
      os << "  output " << m.name << ": max rel error " << std::scientific << std::setprecision(3) << m.max_rel_error
         << std::fixed << std::setprecision(6) << ", cosine " << m.cosine;
      if (m.classifier) os << ", top-1 agreement " << percent(m.top1_agreement) << " (" << m.top1_agree << "/" << m.rows << ")";
      os << '\n';
    }
    os << "  (int8 rounds the input of every layer so: where this rounding alone loses agreement, an int8 model is unlikely to keep it)\n";
  }
  if (!report.pruned_by.empty()) os << pruning_statement(report) << '\n';
  os.flags(flags);
}

}  // namespace kiln
