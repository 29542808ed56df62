// Runs the kiln binary under test with arguments, capturing stdout, stderr and the exit code; and
// the small file helpers the CLI tests share.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/perfmodel/temp_dir.h"

namespace kiln::perf::testing {

struct KilnRun {
  int exit_code = -1;
  std::string out, err;
};

// `args` go to the shell as written (quote paths with spaces); stderr lands in `dir`. The run is
// killed after `timeout_s` (a hang fails the test instead of CI).
inline KilnRun run_kiln(const TempDir& dir, const std::string& args, int timeout_s = 120) {
  const std::string err_path = dir.file("stderr.txt");
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " KILN_BINARY " " + args + " 2>" + err_path;
  KilnRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::ostringstream s;
  s << in.rdbuf();
  r.err = s.str();
  return r;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  REQUIRE(out.good());
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace kiln::perf::testing
