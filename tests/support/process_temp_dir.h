// One scratch folder per test process, named after the test kind and the pid, removed when the
// process exits (held in a function-local static). ctest runs every test case in a process of its own, so a folder that is only
// created would be left behind once per case (hundreds per CI run).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kiln::test {

class ProcessTempDir {
 public:
  explicit ProcessTempDir(const std::string& prefix)
      : path_(std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ProcessTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ProcessTempDir(const ProcessTempDir&) = delete;
  ProcessTempDir& operator=(const ProcessTempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::test
