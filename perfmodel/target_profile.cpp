#include "perfmodel/target_profile.h"

#include <cstdlib>
#include <filesystem>

#include "perfmodel/fingerprint.h"

namespace kiln::perf {

std::string benchmark_store_default_path() {
  if (const char* dir = std::getenv("KILN_DATA_DIR"); dir && *dir) return std::string(dir) + "/benchmarks.sqlite";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/kiln/benchmarks.sqlite";
}

Result<TargetProfile> target_profile_load(const std::string& db_path, const std::string& target) {
  const std::string how = "run `kiln bench-target --db " + db_path +
                          "` on the target (about 4 minutes on 2 cores) or import its profile with "
                          "`kiln bench-target --db " + db_path + " --import PROFILE.json`";
  std::error_code ec;
  KILN_REQUIRE(std::filesystem::exists(db_path, ec), io, "no benchmark store at ", db_path, ": ", how);
  KILN_ASSIGN(store, BenchmarkStore::open(db_path));
  KILN_ASSIGN(targets, store->targets());
  const std::string wanted = target.empty() ? fingerprint_local().id : target;
  const StoredTarget* found = nullptr;
  for (const StoredTarget& t : targets)
    if (t.fingerprint.id == wanted) found = &t;
  if (!found && !target.empty())
    for (const StoredTarget& t : targets)
      if (t.fingerprint.cpu_model.find(target) != std::string::npos || t.fingerprint.host == target) {
        KILN_REQUIRE(!found, invalid_argument, "target '", target, "' matches more than one stored target (",
                     found->fingerprint.id, ", ", t.fingerprint.id, "): name it by id");
        found = &t;
      }
  if (!found) {
    std::string known;
    for (const StoredTarget& t : targets) known += (known.empty() ? "" : ", ") + t.fingerprint.id + " (" + t.fingerprint.cpu_model + ")";
    return make_error(ErrorCode::io, "no profile for ", target.empty() ? "this machine (fingerprint " + wanted + ")" : "target '" + target + "'",
                      " in ", db_path, known.empty() ? "" : " (stored: " + known + ")", ": ", how);
  }
  TargetProfile profile{*found, {}};
  KILN_ASSIGN(rows, store->measurements(found->fingerprint.id));
  bool any_kernel = false;
  for (const Measurement& m : rows) any_kernel = any_kernel || m.kind == kKindKernel;
  KILN_REQUIRE(any_kernel, io, "target ", found->fingerprint.id, " in ", db_path,
               " has no kernel-sweep measurements: ", how);
  profile.measurements = std::move(rows);
  return profile;
}

Result<std::optional<TargetProfile>> target_profile_replacing(const std::string& db_path, const TargetPrior& prior) {
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) return std::optional<TargetProfile>();  // a missing store is not created
  std::string id;
  {
    KILN_ASSIGN(store, BenchmarkStore::open(db_path));
    KILN_ASSIGN(targets, store->targets());
    id = prior_replaced_by(prior, targets);
  }
  if (id.empty()) return std::optional<TargetProfile>();
  KILN_ASSIGN(profile, target_profile_load(db_path, id));
  return std::optional<TargetProfile>(std::move(profile));
}

}  // namespace kiln::perf
