#include "service/cli/description_data.h"

#include <cmath>
#include <filesystem>

namespace kiln::cli {
namespace {

std::string resolve(const std::string& path, const std::string& description_path) {
  const std::filesystem::path p(path);
  return p.is_absolute() ? path : (std::filesystem::path(description_path).parent_path() / p).string();
}

// IDX pixels are fed as (p / 255 - mean) / std: the description's normalization must say that.
Status idx_normalization(const api::Dataset& data, const std::string& where, float& mean, float& std) {
  if (!data.normalize) return Status::ok();
  const api::Normalize& n = *data.normalize;
  KILN_REQUIRE(std::abs(n.scale * 255.0 - 1.0) < 1e-6 || n.scale == 1.0, unsupported, where,
               "/normalize/scale: IDX images are read as p/255; scale ", n.scale, " is not supported yet");
  KILN_REQUIRE(n.mean.size() <= 1 && n.std.size() <= 1, unsupported, where,
               "/normalize: per-channel mean/std is not supported for IDX images (one channel)");
  if (!n.mean.empty()) mean = static_cast<float>(n.mean[0]);
  if (!n.std.empty()) std = static_cast<float>(n.std[0]);
  KILN_REQUIRE(std != 0.0f, invalid_argument, where, "/normalize/std must not be zero");
  return Status::ok();
}

}  // namespace

Result<DatasetOptions> description_dataset(const api::Dataset& data, const std::string& description_path) {
  DatasetOptions d;
  if (data.format == api::Dataset::Format::idx) {
    d.idx_images = resolve(data.images, description_path);
    if (!data.labels.empty()) d.idx_labels = resolve(data.labels, description_path);
    KILN_TRY(idx_normalization(data, description_path + ": /data", d.mean, d.std));
  } else {
    d.input = resolve(data.npz, description_path);
    if (!data.labels_entry.empty()) d.labels_entry = data.labels_entry;
  }
  if (data.limit) d.limit = *data.limit;
  return d;
}

Result<CalibrationCli> description_calibration(const api::Dataset& data, const std::string& description_path) {
  CalibrationCli c;
  if (data.format == api::Dataset::Format::idx) {
    c.file = resolve(data.images, description_path);
    KILN_TRY(idx_normalization(data, description_path + ": /data/calibration", c.mean, c.std));
  } else {
    c.file = resolve(data.npz, description_path);
  }
  if (data.limit) c.limit = *data.limit;
  return c;
}

}  // namespace kiln::cli
