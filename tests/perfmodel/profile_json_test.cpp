// JSON target profiles: export then import into a fresh store gives the same data; a wrong
// format, an unsupported version, malformed JSON or one bad record is refused with a clear
// message and imports nothing.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "perfmodel/profile_json.h"
#include "tests/perfmodel/store_samples.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln;
using namespace kiln::perf;
using namespace kiln::perf::testing;

namespace {

void fill(BenchmarkStore& store) {
  const TargetFingerprint a = sample_fingerprint("CPU A"), b = sample_fingerprint("CPU B");
  REQUIRE(store.target_put(a, "measured"));
  REQUIRE(store.target_put(b, "measured"));
  auto run = store.run_begin(a.id, "");
  REQUIRE(run);
  REQUIRE(store.measurement_put(a.id, *run, sample_conv(1, 0.8)));
  REQUIRE(store.measurement_put(a.id, *run, sample_conv(2, 0.45, "bf16")));
  REQUIRE(store.measurement_put(a.id, *run, sample_peak()));
  REQUIRE(store.measurement_put(b.id, *run, sample_conv(1, 3.25)));
  REQUIRE(store.skipped_put(b.id, {kKindKernel, "int8", "no native int8 dot product"}));
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

size_t target_count(BenchmarkStore& store) {
  auto t = store.targets();
  REQUIRE(t);
  return t->size();
}

}  // namespace

TEST_CASE("profile export then import into a fresh store equals the original", "[perfmodel][profile]") {
  TempDir dir;
  auto src = BenchmarkStore::open(dir.file("src.sqlite"));
  REQUIRE(src);
  fill(**src);
  auto exported = profile_export(**src, dir.file("p.json"));
  REQUIRE(exported);
  CHECK(exported->targets == 2);
  CHECK(exported->measurements == 4);
  const nlohmann::json doc = read_json(dir.file("p.json"));
  CHECK(doc["format"] == kProfileFormat);
  CHECK(doc["version"] == kProfileVersion);

  auto dst = BenchmarkStore::open(dir.file("dst.sqlite"));
  REQUIRE(dst);
  auto imported = profile_import(**dst, dir.file("p.json"));
  INFO((imported ? "" : imported.error().message));
  REQUIRE(imported);
  CHECK(imported->measurements == 4);

  auto src_targets = (*src)->targets();
  auto dst_targets = (*dst)->targets();
  REQUIRE(src_targets);
  REQUIRE(dst_targets);
  REQUIRE(src_targets->size() == dst_targets->size());
  for (const StoredTarget& s : *src_targets) {
    const StoredTarget* d = nullptr;
    for (const StoredTarget& t : *dst_targets)
      if (t.fingerprint.id == s.fingerprint.id) d = &t;
    REQUIRE(d != nullptr);
    CHECK(d->source == "imported");
    CHECK(d->fingerprint.cpu_model == s.fingerprint.cpu_model);
    CHECK(d->fingerprint.isa == s.fingerprint.isa);
    CHECK(d->fingerprint.host == s.fingerprint.host);
    auto sm = (*src)->measurements(s.fingerprint.id);
    auto dm = (*dst)->measurements(s.fingerprint.id);
    REQUIRE(sm);
    REQUIRE(dm);
    REQUIRE(sm->size() == dm->size());
    for (size_t i = 0; i < sm->size(); ++i) CHECK(same_measurement(sm->at(i), dm->at(i)));
    auto ss = (*src)->skipped(s.fingerprint.id);
    auto ds = (*dst)->skipped(s.fingerprint.id);
    REQUIRE(ss);
    REQUIRE(ds);
    CHECK(ss->size() == ds->size());
  }
  // Exporting the imported store gives the same targets and measurements again.
  REQUIRE(profile_export(**dst, dir.file("q.json")));
  nlohmann::json again = read_json(dir.file("q.json")), first = doc;
  again.erase("exported_at");
  first.erase("exported_at");
  for (auto& t : again["targets"]) t.erase("source");
  for (auto& t : first["targets"]) t.erase("source");
  CHECK(again == first);
}

TEST_CASE("profile import refuses other formats, versions and malformed files and imports nothing", "[perfmodel][profile]") {
  TempDir dir;
  auto src = BenchmarkStore::open(dir.file("src.sqlite"));
  REQUIRE(src);
  fill(**src);
  REQUIRE(profile_export(**src, dir.file("good.json")));
  const nlohmann::json good = read_json(dir.file("good.json"));
  auto dst = BenchmarkStore::open(dir.file("dst.sqlite"));
  REQUIRE(dst);

  SECTION("an unsupported version names the version found and the one supported") {
    nlohmann::json doc = good;
    doc["version"] = 2;
    write_text(dir.file("v2.json"), doc.dump());
    auto r = profile_import(**dst, dir.file("v2.json"));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("version 2") && Catch::Contains("version 1"));
  }
  SECTION("another kind of file") {
    write_text(dir.file("other.json"), R"({"format": "kiln-report", "version": 1, "targets": []})");
    auto r = profile_import(**dst, dir.file("other.json"));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("\"kiln-report\"") && Catch::Contains(kProfileFormat));
    write_text(dir.file("noformat.json"), R"({"name": "something"})");
    auto n = profile_import(**dst, dir.file("noformat.json"));
    REQUIRE_FALSE(n);
    CHECK_THAT(n.error().message, Catch::Contains("not a kiln target profile"));
  }
  SECTION("malformed JSON") {
    write_text(dir.file("bad.json"), good.dump().substr(0, 200));
    auto r = profile_import(**dst, dir.file("bad.json"));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("not valid JSON"));
  }
  SECTION("one bad record in the last target: the earlier targets are not imported either") {
    nlohmann::json doc = good;
    doc["targets"].back()["measurements"][0].erase("median_ms");
    write_text(dir.file("hole.json"), doc.dump());
    auto r = profile_import(**dst, dir.file("hole.json"));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("median_ms") && Catch::Contains("measurements[0]"));
  }
  SECTION("an edited fingerprint no longer matches its id") {
    nlohmann::json doc = good;
    doc["targets"][0]["fingerprint"]["cpu_model"] = "Faster CPU";
    write_text(dir.file("edited.json"), doc.dump());
    auto r = profile_import(**dst, dir.file("edited.json"));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("does not match"));
  }
  CHECK(target_count(**dst) == 0);
}
