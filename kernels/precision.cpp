#include "kernels/precision.h"

namespace kiln {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::int8: return "int8";
  }
  return "fp32";
}

Result<Precision> precision_from_attrs(const Attrs& attrs) {
  KILN_ASSIGN(name, attrs.get_string(std::string(kPrecisionAttr), "fp32"));
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  if (name == "int8") return Precision::int8;
  return make_error(ErrorCode::invalid_argument, "unknown precision '", name, "' (known: fp32, bf16, int8)");
}

Result<bool> bf16_output_from_attrs(const Attrs& attrs) {
  KILN_ASSIGN(flag, attrs.get_int(std::string(kBf16OutputAttr), 0));
  return flag != 0;
}

void precision_to_attrs(Precision p, Attrs& attrs) {
  if (p == Precision::fp32) attrs.erase(std::string(kPrecisionAttr));
  else attrs.set(std::string(kPrecisionAttr), std::string(precision_name(p)));
}

}  // namespace kiln
