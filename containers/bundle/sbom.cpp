#include "containers/bundle/sbom.h"

#include <filesystem>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "containers/bundle/process.h"
#include "containers/oci/digest.h"
#include "containers/oci/tar.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Merged /usr: /lib/x/y and /usr/lib/x/y are one file, and dpkg knows only the one the package
// shipped.
std::vector<std::string> candidates(const std::string& path) {
  std::vector<std::string> out{path};
  auto twin = [](const std::string& p) { return p.rfind("/usr/", 0) == 0 ? p.substr(4) : "/usr" + p; };
  out.push_back(twin(path));
  std::error_code ec;
  const std::string real = fs::canonical(path, ec).string();
  if (!ec && real != path) {
    out.push_back(real);
    out.push_back(twin(real));
  }
  return out;
}

// SPDX ids allow letters, digits, '.' and '-'.
std::string spdx_id(const std::string& prefix, const std::string& name) {
  std::string id = prefix;
  for (char c : name) id.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '-');
  return id;
}

}  // namespace

std::map<std::string, DebianPackage> debian_packages_owning(const std::vector<std::string>& paths) {
  std::map<std::string, DebianPackage> owners;
  for (const std::string& p : paths) owners[p] = {};
  std::vector<std::string> query{"dpkg", "-S"};
  for (const std::string& p : paths)
    for (const std::string& c : candidates(p)) query.push_back(c);
  auto found = process_run(query);  // exits 1 when some path is not owned: the rest still print
  if (!found) return owners;
  std::map<std::string, std::string> owner_of;  // path -> "pkg:arch"
  std::istringstream lines(found->out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("diversion ", 0) == 0) continue;
    const auto sep = line.find(": /");
    if (sep == std::string::npos) continue;
    std::string pkg = line.substr(0, sep);
    pkg = pkg.substr(0, pkg.find(','));  // "a, b: /path" when several packages share a folder
    owner_of.emplace(line.substr(sep + 2), pkg);
  }
  std::set<std::string> names;
  for (const std::string& p : paths) {
    for (const std::string& c : candidates(p)) {
      const auto it = owner_of.find(c);
      if (it == owner_of.end()) continue;
      const auto colon = it->second.find(':');
      owners[p].name = it->second.substr(0, colon);
      owners[p].architecture = colon == std::string::npos ? "" : it->second.substr(colon + 1);
      names.insert(it->second);
      break;
    }
  }
  if (names.empty()) return owners;
  std::vector<std::string> versions_query{"dpkg-query", "-W", "-f=${binary:Package}\t${Version}\n"};
  versions_query.insert(versions_query.end(), names.begin(), names.end());
  auto versions = process_run(versions_query);
  if (!versions) return owners;
  std::map<std::string, std::string> version_of;
  std::istringstream vlines(versions->out);
  while (std::getline(vlines, line)) {
    const auto tab = line.find('\t');
    if (tab != std::string::npos) version_of[line.substr(0, tab)] = line.substr(tab + 1);
  }
  for (auto& [path, pkg] : owners) {
    if (pkg.name.empty()) continue;
    const std::string key = pkg.architecture.empty() ? pkg.name : pkg.name + ":" + pkg.architecture;
    auto it = version_of.find(key);
    if (it == version_of.end()) it = version_of.find(pkg.name);
    if (it != version_of.end()) pkg.version = it->second;
  }
  return owners;
}

std::string sbom_spdx_json(const SbomRequest& request) {
  using nlohmann::json;
  const std::string kiln_id = "SPDXRef-Package-kiln";
  json packages = json::array();
  packages.push_back({{"SPDXID", kiln_id},
                      {"name", "kiln"},
                      {"versionInfo", request.kiln_version},
                      {"downloadLocation", "NOASSERTION"},
                      {"filesAnalyzed", false},
                      {"licenseConcluded", "NOASSERTION"},
                      {"licenseDeclared", "NOASSERTION"},
                      {"copyrightText", "NOASSERTION"},
                      {"primaryPackagePurpose", "APPLICATION"},
                      {"comment", "kiln-runtime and the compiled model"}});
  json relationships = json::array();
  relationships.push_back({{"spdxElementId", "SPDXRef-DOCUMENT"}, {"relationshipType", "DESCRIBES"}, {"relatedSpdxElement", kiln_id}});

  // One SPDX package per Debian package (several libraries may share one), one per unknown file.
  std::map<std::string, std::pair<DebianPackage, std::vector<std::string>>> by_package;
  for (const SbomFile& f : request.files) {
    const std::string key = f.package.name.empty() ? "file " + f.path : f.package.name + ":" + f.package.architecture;
    auto& entry = by_package[key];
    entry.first = f.package;
    entry.second.push_back(f.path);
  }
  for (const auto& [key, entry] : by_package) {
    const auto& [pkg, files] = entry;
    std::string listed;
    for (const std::string& f : files) listed += (listed.empty() ? "" : ", ") + f;
    json p = {{"downloadLocation", "NOASSERTION"}, {"filesAnalyzed", false},        {"licenseConcluded", "NOASSERTION"},
              {"licenseDeclared", "NOASSERTION"},  {"copyrightText", "NOASSERTION"}, {"primaryPackagePurpose", "LIBRARY"}};
    if (pkg.name.empty()) {
      p["SPDXID"] = spdx_id("SPDXRef-File-", files.front());
      p["name"] = fs::path(files.front()).filename().string();
      p["versionInfo"] = "NOASSERTION";
      p["comment"] = "bundled file " + listed + ": no Debian package owns it (dpkg -S at build time)";
    } else {
      p["SPDXID"] = spdx_id("SPDXRef-Package-deb-", pkg.name);
      p["name"] = pkg.name;
      p["versionInfo"] = pkg.version.empty() ? "NOASSERTION" : pkg.version;
      p["supplier"] = "Organization: Debian";
      p["comment"] = "provides " + listed;
      std::string purl = "pkg:deb/debian/" + pkg.name;
      if (!pkg.version.empty()) purl += "@" + pkg.version;
      if (!pkg.architecture.empty()) purl += "?arch=" + pkg.architecture;
      p["externalRefs"] = json::array({{{"referenceCategory", "PACKAGE-MANAGER"}, {"referenceType", "purl"}, {"referenceLocator", purl}}});
    }
    relationships.push_back({{"spdxElementId", kiln_id}, {"relationshipType", "DEPENDS_ON"}, {"relatedSpdxElement", p["SPDXID"]}});
    packages.push_back(std::move(p));
  }
  // The namespace must be unique per document: derive it from the content, not a random UUID.
  const std::string content = packages.dump() + relationships.dump();
  json doc = {{"spdxVersion", "SPDX-2.3"},
              {"dataLicense", "CC0-1.0"},
              {"SPDXID", "SPDXRef-DOCUMENT"},
              {"name", request.image_name},
              {"documentNamespace", "https://kiln.invalid/spdx/" + request.image_name + "-" +
                                        std::string(oci::digest_hex(oci::sha256_digest(content)))},
              {"creationInfo", {{"created", oci::rfc3339_utc(request.created)}, {"creators", json::array({"Tool: kiln-" + request.kiln_version})}}},
              {"packages", packages},
              {"relationships", relationships}};
  return doc.dump();
}

}  // namespace kiln
