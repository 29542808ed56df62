// kiln token create --data-dir D --scopes submit,read [--name N]   prints a new token once
// kiln token list   --data-dir D                                  id, name, scopes, created, revoked
// kiln token revoke --data-dir D ID                               the token stops working at once
// Tokens live in D/jobs.db (the job store's tokens table), hashed; see service/server/auth.h.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "service/cli/commands.h"
#include "service/jobs/job_store.h"
#include "service/server/auth.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct TokenOptions {
  std::string data_dir;
  std::string scopes;
  std::string name;
  std::string id;
};

Result<std::unique_ptr<jobs::JobStore>> store_open(const std::string& data_dir) {
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  KILN_REQUIRE(!ec, io, "cannot create --data-dir '", data_dir, "': ", ec.message());
  return jobs::JobStore::open((fs::path(data_dir) / "jobs.db").string());
}

int token_create(const TokenOptions& opts) {
  auto store = store_open(opts.data_dir);
  if (!store) return report_error(store.error().message);
  auto token = server::token_new(opts.name, opts.scopes);
  if (!token) return report_error("--scopes: " + token.error().message);
  if (Status st = (*store)->token_add(token->record); !st) return report_error(st.message());
  // The token on stdout alone (scripts capture it); what it is on stderr.
  std::fprintf(stderr, "kiln token: created %s (scopes %s); it is shown only now\n", token->record.id.c_str(),
               token->record.scopes.c_str());
  std::printf("%s\n", token->token.c_str());
  return kExitOk;
}

int token_list(const TokenOptions& opts) {
  auto store = store_open(opts.data_dir);
  if (!store) return report_error(store.error().message);
  auto tokens = (*store)->token_list();
  if (!tokens) return report_error(tokens.error().message);
  std::printf("%-16s  %-20s  %-18s  %-24s  %s\n", "ID", "NAME", "SCOPES", "CREATED", "REVOKED");
  for (const jobs::TokenRecord& t : *tokens)
    std::printf("%-16s  %-20s  %-18s  %-24s  %s\n", t.id.c_str(), t.name.c_str(), t.scopes.c_str(), t.created_at.c_str(),
                t.revoked_at.empty() ? "-" : t.revoked_at.c_str());
  return kExitOk;
}

int token_revoke(const TokenOptions& opts) {
  auto store = store_open(opts.data_dir);
  if (!store) return report_error(store.error().message);
  auto revoked = (*store)->token_revoke(opts.id);
  if (!revoked) return report_error(revoked.error().message);
  if (!*revoked) return report_error("no valid token '" + opts.id + "' (see kiln token list)");
  std::printf("revoked %s\n", opts.id.c_str());
  return kExitOk;
}

}  // namespace

void add_token_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<TokenOptions>();
  CLI::App* cmd = app.add_subcommand("token", "Manage the API tokens of kiln serve --auth tokens");
  cmd->require_subcommand(1);
  CLI::App* create = cmd->add_subcommand("create", "Create a token and print it (once)");
  create->add_option("--data-dir", opts->data_dir, "The server's --data-dir")->required();
  create->add_option("--scopes", opts->scopes, "Comma-separated: submit, read, admin")->required();
  create->add_option("--name", opts->name, "What the token is for (shown by list)");
  create->callback([opts, &run] { run = [opts] { return token_create(*opts); }; });
  CLI::App* list = cmd->add_subcommand("list", "List tokens (never the tokens themselves)");
  list->add_option("--data-dir", opts->data_dir, "The server's --data-dir")->required();
  list->callback([opts, &run] { run = [opts] { return token_list(*opts); }; });
  CLI::App* revoke = cmd->add_subcommand("revoke", "Revoke a token by its id");
  revoke->add_option("--data-dir", opts->data_dir, "The server's --data-dir")->required();
  revoke->add_option("id", opts->id, "The token's id (kiln token list)")->required();
  revoke->callback([opts, &run] { run = [opts] { return token_revoke(*opts); }; });
}

}  // namespace kiln::cli
