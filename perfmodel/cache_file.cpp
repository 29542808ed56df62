#include "perfmodel/cache_file.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::perf {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

}  // namespace

std::string kiln_cache_dir() {
  if (std::string d = env("KILN_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/kiln";
  const std::string home = env("HOME");
  return (home.empty() ? std::string(".") : home) + "/.cache/kiln";
}

Status cache_file_write(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  fs::create_directories(target.parent_path(), ec);
  KILN_REQUIRE(!ec, io, "cannot create ", target.parent_path().string(), ": ", ec.message());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    KILN_REQUIRE(out, io, "cannot write ", tmp);
    out << text;
    KILN_REQUIRE(out.good(), io, "cannot write ", tmp);
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return make_error(ErrorCode::io, "cannot move ", tmp, " to ", path);
  }
  return Status::ok();
}

Result<std::string> cache_file_read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_REQUIRE(in, io, "cannot open ", path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace kiln::perf
