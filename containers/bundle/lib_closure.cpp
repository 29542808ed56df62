#include "containers/bundle/lib_closure.h"

#include <elf.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "containers/bundle/process.h"

namespace kiln {

Result<std::string> elf_interpreter(const std::string& binary) {
  std::ifstream in(binary, std::ios::binary);
  KILN_REQUIRE(in, io, "cannot open '", binary, "'");
  Elf64_Ehdr eh{};
  in.read(reinterpret_cast<char*>(&eh), sizeof eh);
  KILN_REQUIRE(in && std::equal(eh.e_ident, eh.e_ident + SELFMAG, ELFMAG), parse, "'", binary, "' is not an ELF file");
  KILN_REQUIRE(eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB, unsupported, "'", binary,
               "' is not a 64-bit little-endian ELF file");
  KILN_REQUIRE(eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 4096, parse, "'", binary, "' has malformed program headers");
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + static_cast<uint64_t>(i) * sizeof ph));
    in.read(reinterpret_cast<char*>(&ph), sizeof ph);
    KILN_REQUIRE(in, parse, "'", binary, "' is truncated (program header ", i, ")");
    if (ph.p_type != PT_INTERP) continue;
    KILN_REQUIRE(ph.p_filesz > 1 && ph.p_filesz < 4096, parse, "'", binary, "' has a malformed PT_INTERP");
    std::string path(ph.p_filesz, '\0');
    in.seekg(static_cast<std::streamoff>(ph.p_offset));
    in.read(path.data(), static_cast<std::streamsize>(path.size()));
    KILN_REQUIRE(in, parse, "'", binary, "' is truncated (PT_INTERP)");
    path.resize(path.find('\0') == std::string::npos ? path.size() : path.find('\0'));
    return path;
  }
  return std::string();
}

Result<std::vector<SharedLibrary>> library_list_parse(const std::string& text, const std::string& binary) {
  std::vector<SharedLibrary> libs;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    line = line.substr(first);
    const auto arrow = line.find(" => ");
    if (arrow != std::string::npos) {
      SharedLibrary lib;
      lib.name = line.substr(0, arrow);
      std::string rest = line.substr(arrow + 4);
      KILN_REQUIRE(rest.rfind("not found", 0) != 0, io, "'", binary, "' needs ", lib.name,
                   ", which the dynamic loader cannot find on this machine (install it or set LD_LIBRARY_PATH)");
      lib.path = rest.substr(0, rest.find(" ("));
      if (lib.path.empty() || lib.path.front() != '/') continue;  // "linux-vdso.so.1 =>  (0x...)" on old loaders
      libs.push_back(std::move(lib));
    } else if (line.front() == '/') {  // the interpreter: "/lib64/ld-linux-x86-64.so.2 (0x...)"
      SharedLibrary lib;
      lib.path = line.substr(0, line.find(" ("));
      lib.name = lib.path;
      lib.interpreter = true;
      libs.push_back(std::move(lib));
    }  // else "linux-vdso.so.1 (0x...)": provided by the kernel
  }
  std::sort(libs.begin(), libs.end(), [](const SharedLibrary& a, const SharedLibrary& b) { return a.path < b.path; });
  libs.erase(std::unique(libs.begin(), libs.end(), [](const SharedLibrary& a, const SharedLibrary& b) { return a.path == b.path; }),
             libs.end());
  return libs;
}

Result<std::vector<SharedLibrary>> library_closure(const std::string& binary, const std::string& interpreter) {
  KILN_ASSIGN(interp, elf_interpreter(binary));
  if (interp.empty()) interp = interpreter;
  if (interp.empty()) return std::vector<SharedLibrary>{};  // static: nothing to carry
  KILN_ASSIGN(listed, process_run({interp, "--list", binary}));
  KILN_REQUIRE(listed.exit_code == 0, io, "the dynamic loader ", interp, " could not list the libraries of '", binary,
               "' (exit ", listed.exit_code, ")");
  KILN_ASSIGN(libs, library_list_parse(listed.out, binary));
  if (std::none_of(libs.begin(), libs.end(), [](const SharedLibrary& l) { return l.interpreter; }))
    libs.push_back({interp, interp, true});
  std::sort(libs.begin(), libs.end(), [](const SharedLibrary& a, const SharedLibrary& b) { return a.path < b.path; });
  return libs;
}

}  // namespace kiln
