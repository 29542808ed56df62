// The application description's data sets (`data.calibration`, `data.validation`) as the CLI's
// data options, with paths resolved against the description's folder.
#pragma once

#include <string>

#include "api/description.h"
#include "kernels/core/status.h"
#include "service/cli/calibration_options.h"
#include "service/cli/dataset.h"

namespace kiln::cli {

// A data set to verify on (inputs and, when given, labels).
Result<DatasetOptions> description_dataset(const api::Dataset& data, const std::string& description_path);

// The calibration set as quantize_int8 takes it (MinMax, the CLI's default method).
Result<CalibrationCli> description_calibration(const api::Dataset& data, const std::string& description_path);

}  // namespace kiln::cli
