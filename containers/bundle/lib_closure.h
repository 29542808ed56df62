// The shared libraries a binary loads, as the dynamic loader resolves them on this machine
// (what `ldd` prints: the ELF interpreter run with --list), so that an image carrying exactly
// these files at these paths needs no base image.
#pragma once

#include <string>
#include <vector>

#include "kernels/core/status.h"

namespace kiln {

struct SharedLibrary {
  std::string name;  // as requested ("libzip.so.4"); the interpreter's path for the interpreter
  std::string path;  // where the loader found it; also its path inside the image
  bool interpreter = false;
};

// The ELF's PT_INTERP ("/lib64/ld-linux-x86-64.so.2"); empty for a static binary.
Result<std::string> elf_interpreter(const std::string& binary);

// Every library the loader maps for `binary`, interpreter included, sorted by path. A library
// the loader cannot find is an error naming it. linux-vdso (in the kernel) is left out.
// A shared library (a dlopen'ed plugin) names no interpreter: `interpreter` lists it instead.
Result<std::vector<SharedLibrary>> library_closure(const std::string& binary, const std::string& interpreter = "");

// Parses the loader's --list output (exposed for tests).
Result<std::vector<SharedLibrary>> library_list_parse(const std::string& text, const std::string& binary);

}  // namespace kiln
