// libFuzzer target: application descriptions and targets (YAML or JSON) from untrusted bytes.
// Each input is read as YAML, as JSON and as auto-detected, then validated against both schemas
// and converted to the typed structs. Any crash, sanitizer report, uncaught exception or
// unbounded recursion is a bug: every bad document must come back as api::Error values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/description.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::api;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (DocumentFormat format : {DocumentFormat::automatic, DocumentFormat::yaml, DocumentFormat::json}) {
    Result<Document> doc = document_parse(text, "fuzz", format);
    if (!doc) {
      for (const Error& e : doc.errors()) (void)e.to_string();
      continue;
    }
    (void)description_kind_detect(doc->root);
    if (Result<ApplicationDescription> app = application_from_document(doc.value()); !app) (void)app.message();
    if (Result<TargetInfrastructure> target = target_from_document(doc.value()); !target) (void)target.message();
  }
  return 0;
}
