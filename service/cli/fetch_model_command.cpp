// kiln fetch-model DESCRIPTION -o model.onnx --max-bytes N [--allow CIDR,...] [--time-limit S]:
// the `fetch` stage of a job whose description gives model.url (run by the job runner in the
// job's folder, in a process of its own so the time limit and a cancellation can kill it).
// Downloads with url_fetch's checks (scheme, addresses, size cap), then checks the bytes are an
// ONNX model and match model.sha256 when the description gives one. Hidden: not for users.
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "api/description.h"
#include "containers/oci/digest.h"
#include "service/cli/commands.h"
#include "service/server/jobs_router.h"
#include "service/server/url_fetch.h"

namespace kiln::cli {
namespace {

struct FetchModelOptions {
  std::string description;
  std::string output;
  uint64_t max_bytes = 0;
  std::string allow;
  int64_t time_limit_s = 600;
};

int run_fetch_model(const FetchModelOptions& opts) {
  auto app = api::application_load(opts.description);
  if (!app) return report_error(app.message());
  if (app->model.url.empty()) return report_error(opts.description + ": model.url is not set; nothing to fetch");
  auto allow = server::cidr_list_parse(opts.allow);
  if (!allow) return report_error("--allow: " + allow.error().message);
  server::UrlFetchOptions fetch;
  fetch.max_bytes = opts.max_bytes;
  fetch.time_limit = std::chrono::seconds(opts.time_limit_s);
  fetch.allow = *allow;
  if (Status st = server::url_fetch(app->model.url, opts.output, fetch); !st) return report_error(st.message());

  std::ifstream in(opts.output, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string model = bytes.str();
  auto refuse = [&](const std::string& why) {
    std::error_code ec;
    std::filesystem::remove(opts.output, ec);
    return report_error(why);
  };
  if (std::string why = server::onnx_model_check(model); !why.empty())
    return refuse("the model fetched from " + app->model.url + " is not ONNX: " + why);
  if (!app->model.sha256.empty()) {
    const std::string digest = oci::sha256_digest(model);
    if (digest != "sha256:" + app->model.sha256)
      return refuse("the model fetched from " + app->model.url + " has " + digest + ", but the description's model.sha256 is " +
                    app->model.sha256);
  }
  std::printf("fetched %s: %zu bytes\n", app->model.url.c_str(), model.size());
  return kExitOk;
}

}  // namespace

void add_fetch_model_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<FetchModelOptions>();
  CLI::App* cmd = app.add_subcommand("fetch-model", "A job's fetch stage (used by kiln serve)");
  cmd->group("");  // hidden from --help
  cmd->add_option("description", opts->description, "The job's description (its model.url is fetched)")->required();
  cmd->add_option("-o,--output", opts->output, "Where to write the model")->required();
  cmd->add_option("--max-bytes", opts->max_bytes, "Size cap")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--allow", opts->allow, "CIDR,... allowed besides public addresses");
  cmd->add_option("--time-limit", opts->time_limit_s, "Seconds")->check(CLI::PositiveNumber);
  cmd->callback([opts, &run] { run = [opts] { return run_fetch_model(*opts); }; });
}

}  // namespace kiln::cli
