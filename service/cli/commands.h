// CLI verbs. Each adds its subcommand to the app and sets `run` to the code it exits with.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kiln::cli {

using CommandRunner = std::function<int()>;

// Exit codes shared by all verbs.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // bad input or a failed operation; the message says which
inline constexpr int kExitUsage = 2;  // command-line misuse
inline constexpr int kExitInfeasible = 3;  // plan/optimize: no candidate meets the constraints (the plan is still written)

void add_inspect_command(CLI::App& app, CommandRunner& run);
void add_run_command(CLI::App& app, CommandRunner& run);
void add_compile_command(CLI::App& app, CommandRunner& run);
void add_bench_command(CLI::App& app, CommandRunner& run);
void add_image_command(CLI::App& app, CommandRunner& run);
void add_validate_command(CLI::App& app, CommandRunner& run);
void add_push_command(CLI::App& app, CommandRunner& run);
void add_verify_command(CLI::App& app, CommandRunner& run);
void add_export_command(CLI::App& app, CommandRunner& run);
void add_bench_target_command(CLI::App& app, CommandRunner& run);
void add_predict_command(CLI::App& app, CommandRunner& run);
void add_plan_command(CLI::App& app, CommandRunner& run);
void add_optimize_command(CLI::App& app, CommandRunner& run);
void add_serve_command(CLI::App& app, CommandRunner& run);
void add_token_command(CLI::App& app, CommandRunner& run);
void add_fetch_model_command(CLI::App& app, CommandRunner& run);
void add_submit_command(CLI::App& app, CommandRunner& run);

// Prints "kiln: error: <message>" on stderr and returns kExitError.
int report_error(const std::string& message);

}  // namespace kiln::cli
