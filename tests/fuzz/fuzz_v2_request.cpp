// libFuzzer target: KServe v2 infer request bodies (what serve-model reads from the network).
// Each input is parsed, matched against a two-input model signature, and, when it parses and
// every value is finite, written back and parsed again: the round trip must give the same bytes.
// Any crash, sanitizer report, uncaught exception or unbounded recursion is a bug: every bad body
// must come back as an Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "service/runtime/serve/model_signature.h"
#include "service/runtime/serve/v2_protocol.h"

namespace {

bool all_finite(const kiln::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.value_as_double(i))) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  using namespace kiln::serve;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Result<V2InferRequest> request = v2_infer_request_parse(body);
  if (!request) {
    (void)request.error().message.size();
    return 0;
  }
  static const ModelSignature signature{{{"x", DType::f32, {4, 3}}, {"k", DType::i64, {4}}}, {{"y", DType::f32, {4, 2}}}, 4};
  if (auto matched = model_inputs_match(signature, request->inputs); !matched) (void)matched.error().message.size();
  (void)model_outputs_select(signature, request->outputs);
  for (const auto& [name, t] : request->inputs)
    if (!all_finite(t)) return 0;
  Result<V2InferRequest> again = v2_infer_request_parse(v2_infer_request_write(request->id, request->inputs));
  if (!again || again->inputs.size() != request->inputs.size() || again->id != request->id) __builtin_trap();
  for (size_t i = 0; i < again->inputs.size(); ++i) {
    const Tensor& a = request->inputs[i].second;
    const Tensor& b = again->inputs[i].second;
    if (again->inputs[i].first != request->inputs[i].first || a.dtype() != b.dtype() || a.shape() != b.shape() ||
        std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0)
      __builtin_trap();
  }
  (void)v2_infer_response_write("m", request->id, request->inputs);
  return 0;
}
