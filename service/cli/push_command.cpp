// kiln push LAYOUT REGISTRY/REPO:TAG: pushes the image in an OCI layout (a `kiln image` output
// folder or its oci/) to a registry — layers, config, manifest by digest, then the tag — and
// prints one line per blob (skipped, mounted or uploaded; bytes; time).
//
// Credentials: --username with --password-stdin, or KILN_REGISTRY_USERNAME and
// KILN_REGISTRY_PASSWORD (never a password on the command line, where `ps` shows it).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "containers/registry/layout.h"
#include "containers/registry/push.h"
#include "containers/registry/reference.h"
#include "service/cli/commands.h"

namespace kiln::cli {
namespace {

struct PushCmdOptions {
  std::string layout;
  std::string reference;
  std::string from_tag;
  std::string username;
  bool password_stdin = false;
  bool plain_http = false;
  bool insecure = false;
  std::string ca_cert;
  std::string mount_from;
  int retries = 3;
  bool json = false;
};

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(n) / 1e6);
  else if (n >= 1000) std::snprintf(buf, sizeof buf, "%.1f kB", static_cast<double>(n) / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

int run_push(const PushCmdOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  auto ref = registry::reference_parse(opts.reference);
  if (!ref) return report_error(ref.error().message);
  auto image = registry::layout_image_read(opts.layout, opts.from_tag);
  if (!image) return report_error(image.error().message);

  registry::PushOptions options;
  options.credentials.username = opts.username.empty() ? env_or_empty("KILN_REGISTRY_USERNAME") : opts.username;
  if (opts.password_stdin) {
    std::getline(std::cin, options.credentials.password);
    if (!options.credentials.password.empty() && options.credentials.password.back() == '\r')
      options.credentials.password.pop_back();
  } else {
    options.credentials.password = env_or_empty("KILN_REGISTRY_PASSWORD");
  }
  if (!options.credentials.password.empty() && options.credentials.username.empty())
    return report_error("a password was given but no username (--username or KILN_REGISTRY_USERNAME)");
  options.plain_http = opts.plain_http;
  options.tls.verify = !opts.insecure;
  options.tls.ca_file = opts.ca_cert;
  options.retry.retries = opts.retries;
  options.mount_from = opts.mount_from;
  if (opts.insecure) std::cerr << "kiln: warning: --insecure: the registry's TLS certificate is not checked\n";

  if (!opts.json)
    std::cout << "pushing " << image->manifest.digest << " to " << ref->to_string() << '\n';
  auto progress = [&](const registry::BlobPushed& b) {
    if (opts.json) return;
    char line[256];
    std::snprintf(line, sizeof line, "  %-22s %.19s…  %10s  %-23s %6.2f s", b.role.c_str(), b.digest.c_str(),
                  human_bytes(b.size).c_str(), registry::blob_outcome_name(b.outcome), b.seconds);
    std::cout << line;
    if (b.outcome == registry::BlobOutcome::uploaded && b.seconds > 0)
      std::cout << "  (" << human_bytes(static_cast<uint64_t>(static_cast<double>(b.size) / b.seconds)) << "/s)";
    if (b.attempts > 1) std::cout << "  [" << b.attempts << " attempts]";
    std::cout << std::endl;
  };
  auto pushed = registry::image_push(*image, *ref, options, progress);
  if (!pushed) {
    const std::string not_written =
        ref->tag.empty() ? "" : "; tag '" + ref->tag + "' was not written (it still points where it did)";
    return report_error("push to " + ref->to_string() + " failed: " + pushed.error().message + not_written);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t uploaded = 0;
  for (const auto& b : pushed->blobs)
    if (b.outcome == registry::BlobOutcome::uploaded) uploaded += b.size;
  if (opts.json) {
    nlohmann::json j = {{"reference", pushed->reference}, {"digest", pushed->manifest_digest},
                        {"uploaded_bytes", uploaded}, {"seconds", seconds}};
    for (const auto& b : pushed->blobs)
      j["blobs"].push_back({{"role", b.role}, {"digest", b.digest}, {"size", b.size},
                            {"outcome", b.outcome == registry::BlobOutcome::skipped   ? "skipped"
                                        : b.outcome == registry::BlobOutcome::mounted ? "mounted"
                                                                                      : "uploaded"},
                            {"seconds", b.seconds}, {"attempts", b.attempts}});
    std::cout << j.dump(2) << '\n';
  } else {
    char line[128];
    std::snprintf(line, sizeof line, "%.2f s, %s uploaded", seconds, human_bytes(uploaded).c_str());
    std::cout << "pushed " << pushed->reference << "@" << pushed->manifest_digest << " (" << line << ")\n";
  }
  return kExitOk;
}

}  // namespace

void add_push_command(CLI::App& app, CommandRunner& run) {
  auto opts = std::make_shared<PushCmdOptions>();
  CLI::App* cmd = app.add_subcommand("push", "Push an OCI image layout to a registry (layers, config, manifest, then the tag)");
  cmd->add_option("layout", opts->layout, "OCI image layout, or a `kiln image` output folder")->required();
  cmd->add_option("reference", opts->reference, "REGISTRY/REPOSITORY[:TAG] (default tag: latest)")->required();
  cmd->add_option("--from-tag", opts->from_tag, "Which image of a layout that holds several (its ref.name)");
  cmd->add_option("-u,--username", opts->username, "Registry username (else $KILN_REGISTRY_USERNAME)");
  cmd->add_flag("--password-stdin", opts->password_stdin, "Read the password from stdin (else $KILN_REGISTRY_PASSWORD)");
  cmd->add_flag("--plain-http", opts->plain_http, "Speak http:// instead of https:// (loopback and test registries)");
  cmd->add_flag("--insecure", opts->insecure, "Do not verify the registry's TLS certificate");
  cmd->add_option("--ca-cert", opts->ca_cert, "CA bundle to verify the registry's certificate with")->check(CLI::ExistingFile);
  cmd->add_option("--mount-from", opts->mount_from, "Mount blobs from this repository of the same registry");
  cmd->add_option("--retries", opts->retries, "Retries on connection errors and 5xx, with backoff")->capture_default_str()
      ->check(CLI::Range(0, 10));
  cmd->add_flag("--json", opts->json, "Print the result as JSON");
  cmd->callback([opts, &run] { run = [opts] { return run_push(*opts); }; });
}

}  // namespace kiln::cli
