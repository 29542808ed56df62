// kiln validate FILE [--kind application|target] [--json]: checks an application description
// or a target infrastructure document (YAML or JSON) against the schemas compiled into kiln.
// Prints "FILE: ok (...)" or one line per error naming the field; exit 1 when invalid.
#include <iostream>

#include <nlohmann/json.hpp>

#include "api/description.h"
#include "service/cli/commands.h"

namespace kiln::cli {
namespace {

struct ValidateOptions {
  std::string file;
  std::string kind;  // empty: detect
  bool json = false;
};

int print_errors(const ValidateOptions& o, const std::vector<api::Error>& errors, const char* kind) {
  if (o.json) {
    nlohmann::json j{{"file", o.file}, {"valid", false}, {"errors", nlohmann::json::array()}};
    if (kind) j["kind"] = kind;
    for (const api::Error& e : errors)
      j["errors"].push_back({{"code", api::error_code_name(e.code)}, {"pointer", e.pointer}, {"line", e.line},
                             {"message", e.message}, {"text", e.to_string()}});
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return kExitError;
  }
  for (const api::Error& e : errors) std::cerr << "kiln: error: " << e.to_string() << '\n';
  return kExitError;
}

int run_validate(const ValidateOptions& o) {
  api::Result<api::Document> doc = api::document_read(o.file);
  if (!doc) return print_errors(o, doc.errors(), nullptr);
  std::optional<api::DescriptionKind> kind;
  if (o.kind == "application") kind = api::DescriptionKind::application;
  else if (o.kind == "target") kind = api::DescriptionKind::target;
  else kind = api::description_kind_detect(doc->root);
  if (!kind)
    return print_errors(o,
                        {api::Error{api::ErrorCode::invalid, o.file, "", 0, 0,
                                    "cannot tell an application description (model, inputs) from a target "
                                    "(kind, scheduler, node); pass --kind application|target"}},
                        nullptr);
  const char* kind_name = api::description_kind_name(*kind);
  std::vector<api::Error> errors;
  if (*kind == api::DescriptionKind::application) {
    if (auto app = api::application_from_document(doc.value()); !app) errors = app.errors();
  } else {
    if (auto target = api::target_from_document(doc.value()); !target) errors = target.errors();
  }
  if (!errors.empty()) return print_errors(o, errors, kind_name);
  if (o.json) {
    const nlohmann::json j{{"file", o.file}, {"valid", true}, {"kind", kind_name}, {"errors", nlohmann::json::array()}};
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    std::cout << o.file << ": ok (" << kind_name << ")\n";
  }
  return kExitOk;
}

}  // namespace

void add_validate_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand("validate", "Check an application description or target (YAML or JSON) against kiln's schemas");
  cmd->add_option("file", opts->file, "Description or target file (.yaml, .yml or .json)")->required();
  cmd->add_option("--kind", opts->kind, "What the file is; detected from its fields when omitted")
      ->check(CLI::IsMember({"application", "target"}));
  cmd->add_flag("--json", opts->json, "Print the result as JSON on stdout");
  cmd->callback([opts, &run] { run = [opts] { return run_validate(*opts); }; });
}

}  // namespace kiln::cli
