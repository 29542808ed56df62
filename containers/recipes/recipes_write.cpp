// Writes the recipes into the output folder, after checking the spec.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "containers/recipes/recipes.h"

namespace kiln::recipes {
namespace {

namespace fs = std::filesystem;

Status text_write(const fs::path& path, const std::string& text, fs::perms mode) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  KILN_REQUIRE(!ec, io, "cannot create '", path.parent_path().string(), "': ", ec.message());
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  KILN_REQUIRE(f, io, "cannot create '", path.string(), "': ", std::strerror(errno));
  KILN_REQUIRE(std::fwrite(text.data(), 1, text.size(), f.get()) == text.size(), io, "cannot write '", path.string(), "'");
  KILN_REQUIRE(std::fclose(f.release()) == 0, io, "cannot write '", path.string(), "': ", std::strerror(errno));
  fs::permissions(path, mode, fs::perm_options::replace, ec);
  KILN_REQUIRE(!ec, io, "cannot set the mode of '", path.string(), "': ", ec.message());
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> recipes_write(const DeploymentSpec& spec, const std::string& dir) {
  KILN_TRY(deployment_spec_check(spec));
  constexpr fs::perms kFile = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read;
  constexpr fs::perms kScript = kFile | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  struct Recipe {
    const char* path;
    std::string text;
    fs::perms mode;
  };
  const Recipe recipes[] = {
      {"Dockerfile", dockerfile_text(spec), kFile},
      {".dockerignore", dockerignore_text(spec), kFile},
      {"kiln.def", apptainer_definition_text(spec), kFile},
      {"job.slurm", slurm_script_text(spec), kScript},
      {"kubernetes/deployment.yaml", kubernetes_service_yaml(spec), kFile},
      {"kubernetes/job.yaml", kubernetes_job_yaml(spec), kFile},
  };
  std::vector<std::string> written;
  for (const Recipe& r : recipes) {
    KILN_TRY(text_write(fs::path(dir) / r.path, r.text, r.mode));
    written.emplace_back(r.path);
  }
  return written;
}

}  // namespace kiln::recipes
