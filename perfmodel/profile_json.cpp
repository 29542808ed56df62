#include "perfmodel/profile_json.h"

#include <cstdint>
#include <fstream>
#include <utility>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "perfmodel/measurement_json.h"

namespace kiln::perf {
namespace {

using nlohmann::json;

json fingerprint_to_json(const TargetFingerprint& fp) {
  return {{"id", fp.id},
          {"cpu_model", fp.cpu_model},
          {"vendor", fp.vendor},
          {"isa", fp.isa},
          {"logical_cpus", fp.logical_cpus},
          {"usable_threads", fp.usable_threads},
          {"memory_bytes", fp.memory_bytes},
          {"caches", fp.caches},
          {"onednn_version", fp.onednn_version},
          {"kiln_version", fp.kiln_version},
          {"host", fp.host}};
}

Result<TargetFingerprint> fingerprint_from_json(const json& j, const std::string& where) {
  KILN_REQUIRE(j.is_object(), parse, where, ": expected an object");
  TargetFingerprint fp;
  KILN_TRY(json_read_field(j, "id", fp.id, where));
  KILN_TRY(json_read_field(j, "cpu_model", fp.cpu_model, where));
  KILN_TRY(json_read_field(j, "vendor", fp.vendor, where));
  KILN_TRY(json_read_field(j, "logical_cpus", fp.logical_cpus, where));
  KILN_TRY(json_read_field(j, "usable_threads", fp.usable_threads, where));
  KILN_TRY(json_read_field(j, "memory_bytes", fp.memory_bytes, where));
  KILN_TRY(json_read_field(j, "caches", fp.caches, where));
  KILN_TRY(json_read_field(j, "onednn_version", fp.onednn_version, where));
  KILN_TRY(json_read_field(j, "kiln_version", fp.kiln_version, where));
  KILN_TRY(json_read_field(j, "host", fp.host, where));
  const auto isa = j.find("isa");
  KILN_REQUIRE(isa != j.end() && isa->is_array(), parse, where, ".isa: expected an array of strings");
  for (const json& f : *isa) {
    KILN_REQUIRE(f.is_string(), parse, where, ".isa: expected an array of strings");
    fp.isa.push_back(f.get<std::string>());
  }
  KILN_REQUIRE(fingerprint_id(fp) == fp.id, parse, where, ".id: '", fp.id,
               "' does not match the fingerprint's fields (", fingerprint_id(fp), "): the file was edited or is damaged");
  return fp;
}

struct ImportedTarget {
  TargetFingerprint fingerprint;
  std::vector<SkippedBenchmark> skipped;
  std::vector<Measurement> measurements;
};

}  // namespace

Result<ProfileCounts> profile_export(BenchmarkStore& store, const std::string& path, const std::string& target_id) {
  KILN_ASSIGN(targets, store.targets());
  json doc = {{"format", kProfileFormat}, {"version", kProfileVersion}, {"exported_at", utc_now()}, {"targets", json::array()}};
  ProfileCounts counts;
  for (const StoredTarget& t : targets) {
    if (!target_id.empty() && t.fingerprint.id != target_id) continue;
    KILN_ASSIGN(ms, store.measurements(t.fingerprint.id));
    KILN_ASSIGN(sk, store.skipped(t.fingerprint.id));
    json jt = {{"fingerprint", fingerprint_to_json(t.fingerprint)}, {"source", t.source}, {"skipped", json::array()},
               {"measurements", json::array()}};
    for (const SkippedBenchmark& s : sk) jt["skipped"].push_back({{"kind", s.kind}, {"dtype", s.dtype}, {"reason", s.reason}});
    for (const Measurement& m : ms) jt["measurements"].push_back(measurement_to_json(m));
    counts.measurements += static_cast<int64_t>(ms.size());
    ++counts.targets;
    doc["targets"].push_back(std::move(jt));
  }
  KILN_REQUIRE(target_id.empty() || counts.targets == 1, invalid_argument, "no target '", target_id, "' in ", store.path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  KILN_REQUIRE(out, io, path, ": cannot write");
  out << doc.dump(1) << '\n';
  out.close();
  KILN_REQUIRE(out, io, path, ": write failed");
  return counts;
}

Result<ProfileCounts> profile_import(BenchmarkStore& store, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_REQUIRE(in, io, path, ": cannot read");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return profile_import_text(store, bytes.str(), path);
}

Result<ProfileCounts> profile_import_text(BenchmarkStore& store, std::string_view text, const std::string& path) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  KILN_REQUIRE(!doc.is_discarded(), parse, path, ": not valid JSON");
  KILN_REQUIRE(doc.is_object() && doc.contains("format") && doc["format"].is_string(), parse, path,
               ": not a kiln target profile (no \"format\" field; expected \"", kProfileFormat, "\")");
  const std::string format = doc["format"].get<std::string>();
  KILN_REQUIRE(format == kProfileFormat, unsupported, path, ": format \"", format, "\" is not a kiln target profile (expected \"",
               kProfileFormat, "\")");
  KILN_REQUIRE(doc.contains("version") && doc["version"].is_number_integer(), parse, path, ": no integer \"version\" field");
  const int64_t version = doc["version"].get<int64_t>();
  KILN_REQUIRE(version == kProfileVersion, unsupported, path, ": target profile version ", version,
               " is not supported (this kiln reads version ", kProfileVersion, ")");
  KILN_REQUIRE(doc.contains("targets") && doc["targets"].is_array(), parse, path, ": \"targets\" must be an array");

  // Everything is checked before anything is written.
  std::vector<ImportedTarget> targets;
  for (size_t t = 0; t < doc["targets"].size(); ++t) {
    const json& jt = doc["targets"][t];
    const std::string where = path + ": targets[" + std::to_string(t) + "]";
    KILN_REQUIRE(jt.is_object() && jt.contains("fingerprint") && jt.contains("measurements") && jt["measurements"].is_array(),
                 parse, where, ": expected an object with \"fingerprint\" and \"measurements\"");
    ImportedTarget it;
    KILN_ASSIGN(fp, fingerprint_from_json(jt["fingerprint"], where + ".fingerprint"));
    it.fingerprint = std::move(fp);
    if (jt.contains("skipped")) {
      KILN_REQUIRE(jt["skipped"].is_array(), parse, where, ".skipped: expected an array");
      for (const json& js : jt["skipped"]) {
        SkippedBenchmark s;
        KILN_REQUIRE(js.is_object(), parse, where, ".skipped: expected objects");
        KILN_TRY(json_read_field(js, "kind", s.kind, where + ".skipped"));
        KILN_TRY(json_read_field(js, "dtype", s.dtype, where + ".skipped"));
        KILN_TRY(json_read_field(js, "reason", s.reason, where + ".skipped"));
        it.skipped.push_back(std::move(s));
      }
    }
    for (size_t i = 0; i < jt["measurements"].size(); ++i) {
      KILN_ASSIGN(m, measurement_from_json(jt["measurements"][i], where + ".measurements[" + std::to_string(i) + "]"));
      it.measurements.push_back(std::move(m));
    }
    targets.push_back(std::move(it));
  }

  ProfileCounts counts;
  KILN_TRY(store.transaction([&]() -> Status {
    for (const ImportedTarget& it : targets) {
      KILN_TRY(store.target_put(it.fingerprint, "imported"));
      KILN_ASSIGN(run, store.run_begin(it.fingerprint.id, "--import " + path, "imported"));
      for (const SkippedBenchmark& s : it.skipped) KILN_TRY(store.skipped_put(it.fingerprint.id, s));
      for (const Measurement& m : it.measurements) KILN_TRY(store.measurement_put(it.fingerprint.id, run, m));
      KILN_TRY(store.run_finish(run, "imported", static_cast<int64_t>(it.measurements.size()), 0));
      counts.measurements += static_cast<int64_t>(it.measurements.size());
      ++counts.targets;
    }
    return Status::ok();
  }));
  return counts;
}

}  // namespace kiln::perf
