// kiln: one binary, one subcommand per verb.
#include <exception>
#include <iostream>
#include <new>

#include "service/cli/commands.h"

namespace kiln::cli {

int report_error(const std::string& message) {
  std::cerr << "kiln: error: " << message << '\n';
  return kExitError;
}

}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  CLI::App app{"kiln: turns an ML model plus a target description into a verified, optimized container"};
  app.require_subcommand(1);
  CommandRunner run;
  add_inspect_command(app, run);
  add_run_command(app, run);
  add_compile_command(app, run);
  add_bench_command(app, run);
  add_image_command(app, run);
  add_validate_command(app, run);
  add_push_command(app, run);
  add_verify_command(app, run);
  add_export_command(app, run);
  add_bench_target_command(app, run);
  add_predict_command(app, run);
  add_plan_command(app, run);
  add_optimize_command(app, run);
  add_serve_command(app, run);
  add_token_command(app, run);
  add_fetch_model_command(app, run);
  add_submit_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  try {
    return run ? run() : kExitUsage;
  } catch (const std::bad_alloc&) {
    return report_error("out of memory");
  } catch (const std::exception& e) {
    return report_error(std::string("internal error: ") + e.what());
  }
}
