#include "service/cli/dataset.h"

#include <cstring>
#include <filesystem>
#include <iostream>

#include "kernels/io/idx.h"
#include "kernels/io/npy.h"
#include "kernels/io/npz.h"
#include "kernels/io/plan_io.h"

namespace kiln::cli {
namespace {

// First `limit` samples (all when limit is 0 or larger than the set).
Tensor first_samples(const Tensor& t, int64_t limit) {
  if (limit <= 0 || t.rank() == 0 || t.dim(0) <= limit) return t;
  Shape shape = t.shape();
  shape[0] = limit;
  Tensor out = Tensor::zeros(t.dtype(), shape);
  std::memcpy(out.raw(), t.raw(), out.nbytes());
  return out;
}

}  // namespace

Result<VerifyData> load_dataset(const DatasetOptions& opts, const Plan& plan) {
  VerifyData data;
  if (!opts.idx_images.empty()) {
    KILN_REQUIRE(plan.inputs.size() == 1, invalid_argument, "IDX images feed single-input models; this one has ",
                 plan.inputs.size(), " inputs (give a .npz with one entry per input)");
    KILN_ASSIGN(images, idx_read_images(opts.idx_images, {255.0f, opts.mean, opts.std}));
    data.inputs.push_back(std::move(images));
    data.source = "IDX images " + opts.idx_images + " as (p/255 - " + std::to_string(opts.mean) + ") / " +
                  std::to_string(opts.std);
    if (!opts.idx_labels.empty()) {
      KILN_ASSIGN(labels, idx_read_labels(opts.idx_labels));
      KILN_REQUIRE(labels.dim(0) == data.inputs[0].dim(0), invalid_argument, "'", opts.idx_labels, "' has ",
                   labels.dim(0), " labels but '", opts.idx_images, "' has ", data.inputs[0].dim(0), " images");
      data.labels = std::move(labels);
      data.source += ", labels " + opts.idx_labels;
    }
  } else {
    const std::string ext = std::filesystem::path(opts.input).extension().string();
    NamedTensors entries;
    if (ext == ".npy") {
      KILN_ASSIGN(t, npy_read_file(opts.input));
      entries.emplace_back(plan.inputs.empty() ? "input" : plan.inputs[0].name, std::move(t));
    } else {
      KILN_REQUIRE(ext == ".npz", invalid_argument, "input file '", opts.input, "' must be .npy or .npz");
      KILN_ASSIGN(all, npz_read_file(opts.input));
      for (auto& [name, t] : all) {
        if (name == opts.labels_entry) {
          KILN_ASSIGN(labels, idx_labels_to_int64(t, "entry '" + name + "' of " + opts.input));
          data.labels = std::move(labels);
        } else {
          entries.emplace_back(name, std::move(t));
        }
      }
    }
    std::vector<std::string> ignored;
    KILN_ASSIGN(inputs, plan_inputs_match(entries, plan, opts.input, ignored));
    for (const std::string& name : ignored)
      std::cerr << "note: ignoring entry '" << name << "' of " << opts.input << " (not a model input)\n";
    data.inputs = std::move(inputs);
    data.source = opts.input + (data.labels ? " (labels from entry '" + opts.labels_entry + "')" : "");
  }
  if (opts.limit > 0) {
    for (Tensor& t : data.inputs) t = first_samples(t, opts.limit);
    if (data.labels) data.labels = first_samples(*data.labels, opts.limit);
    data.source += " (first " + std::to_string(opts.limit) + " samples)";
  }
  return data;
}

}  // namespace kiln::cli
