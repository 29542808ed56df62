// `kiln bench-target` end to end: a quick run prints progress and stores its points, a second
// run measures nothing new (--remeasure-loaded: only what was measured under load), --export then --import moves the profile into another store, --list
// shows measured targets beside the priors, --sweep-ops/--dtypes plan only those sweep points, and
// bad input gives one clean error; --device cuda on a machine without a usable GPU gives the device's
// one error line and writes nothing.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "perfmodel/bench_target.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/kernel_sweep.h"
#include "tests/perfmodel/run_kiln.h"
#include "tests/perfmodel/temp_dir.h"

using namespace kiln::perf::testing;

namespace {

KilnRun run_bench_target(const TempDir& dir, const std::string& args) { return run_kiln(dir, "bench-target " + args); }

nlohmann::json parse(const KilnRun& r) {
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

// Runs one statement on a store and returns the first column of its first row (0 without rows).
int64_t sql_int(const std::string& db, const std::string& sql) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &handle) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  const int rc = sqlite3_step(stmt);
  const int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  CHECK((rc == SQLITE_ROW || rc == SQLITE_DONE));
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return value;
}

// The points a dry run lists for `section` ("key dtype tN"), in order.
std::vector<std::string> listed_points(const std::string& err, const std::string& section) {
  std::vector<std::string> out;
  std::istringstream lines(err);
  const std::string prefix = "[" + section + "] ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    for (const std::string suffix : {": to measure", ": stored"})
      if (line.size() > suffix.size() && line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back(line.substr(prefix.size(), line.size() - prefix.size() - suffix.size()));
  }
  return out;
}

}  // namespace

TEST_CASE("kiln bench-target --sweep-ops/--dtypes --dry-run lists exactly the sweep points of those ops and dtypes",
          "[perfmodel][cli]") {
  struct Case {
    bool quick;
    std::vector<std::string> ops, dtypes;
    std::string only;  // --only, or none
  };
  // The quick grid's convs and max pool (a border conv_from_plain and the other ops left out), the full
  // grid's 3-channel stems in f32, a dtype alone, and a filter beside --only's peak section.
  const Case c = GENERATE(Case{true, {"conv", "maxpool"}, {"f32", "int8"}, ""}, Case{false, {"conv_stem"}, {"f32"}, ""},
                          Case{true, {}, {"int8"}, ""}, Case{true, {"gemm"}, {}, "sweep,peak"});
  std::string ops, dtypes;
  for (const std::string& x : c.ops) ops += (ops.empty() ? "" : ",") + x;
  for (const std::string& x : c.dtypes) dtypes += (dtypes.empty() ? "" : ",") + x;

  // The plan filtered here, independently of bench-target: the sweep's points of this CPU at one thread.
  kiln::perf::BenchPlanOptions plan;
  plan.quick = c.quick;
  plan.threads = {1};
  std::vector<std::string> all, expected;
  for (const kiln::perf::BenchPoint& p : kiln::perf::sweep_points(kiln::perf::fingerprint_local(), plan, nullptr)) {
    const std::string point = p.record.key + " " + p.record.dtype + " t1";
    all.push_back(point);
    const bool op_in = c.ops.empty() || std::find(c.ops.begin(), c.ops.end(), p.record.op) != c.ops.end();
    const bool dtype_in = c.dtypes.empty() || std::find(c.dtypes.begin(), c.dtypes.end(), p.record.dtype) != c.dtypes.end();
    if (op_in && dtype_in) expected.push_back(point);
  }
  INFO("--sweep-ops " << ops << " --dtypes " << dtypes << (c.quick ? " --quick" : ""));
  REQUIRE_FALSE(expected.empty());
  REQUIRE(expected.size() < all.size());

  TempDir dir;
  const std::string db = dir.file("a.sqlite");
  std::string args = std::string(c.quick ? "--quick " : "") + "--threads 1 --dry-run --json --db " + db;
  if (!ops.empty()) args += " --sweep-ops " + ops;
  if (!dtypes.empty()) args += " --dtypes " + dtypes;
  if (!c.only.empty()) args += " --only " + c.only;
  const KilnRun r = run_bench_target(dir, args);
  const nlohmann::json j = parse(r);
  INFO(r.err);
  CHECK(listed_points(r.err, "sweep") == expected);
  CHECK_THAT(r.err, Catch::Contains("[sweep] ") && Catch::Contains(": kept " + std::to_string(expected.size()) + " of " +
                                                                   std::to_string(all.size()) + " points"));
  // Without --only the sweep section runs alone; with it, its other sections are planned in full.
  CHECK(listed_points(r.err, "bandwidth").empty());
  CHECK(listed_points(r.err, "weights").empty());
  const size_t peak = listed_points(r.err, "peak").size();
  if (c.only.empty()) CHECK(peak == 0);
  else CHECK(peak > 0);
  CHECK(j["planned"].get<size_t>() == expected.size() + peak);
}

TEST_CASE("kiln bench-target: an unknown --sweep-ops op or --dtypes dtype is one error naming it and the known ones",
          "[perfmodel][cli]") {
  TempDir dir;
  const std::string db = dir.file("a.sqlite");
  const KilnRun op = run_bench_target(dir, "--quick --dry-run --sweep-ops conv,max_pool --db " + db);
  INFO(op.err);
  CHECK(op.exit_code == 1);
  CHECK(op.out.empty());
  CHECK(op.err.rfind("kiln: error: --sweep-ops: unknown op 'max_pool' (known: ", 0) == 0);
  CHECK(op.err.find('\n') == op.err.size() - 1);  // one line
  // Every op of the grid is listed (the quick grid's and the full grid's alone among them).
  const std::vector<std::string> known = kiln::perf::sweep_record_ops();
  CHECK(known.size() > 10);
  for (const std::string& name : known) CHECK_THAT(op.err, Catch::Contains(" " + name + ",") || Catch::Contains(" " + name + ")"));
  CHECK_THAT(op.err, Catch::Contains("conv_stem") && Catch::Contains("maxpool") && Catch::Contains("depth_first_dw"));

  const KilnRun dtype = run_bench_target(dir, "--quick --dry-run --dtypes f32,fp16 --db " + db);
  INFO(dtype.err);
  CHECK(dtype.exit_code == 1);
  CHECK(dtype.out.empty());
  CHECK(dtype.err == "kiln: error: --dtypes: unknown dtype 'fp16' (known: f32, bf16, int8)\n");

  // A filter whose --only leaves the sweep out would restrict nothing.
  const KilnRun only = run_bench_target(dir, "--quick --dry-run --only peak --dtypes f32 --db " + db);
  CHECK(only.exit_code == 1);
  CHECK_THAT(only.err, Catch::Contains("add sweep to --only"));
  CHECK_FALSE(std::filesystem::exists(db));  // refused before the store is opened
}

TEST_CASE("kiln bench-target --remeasure-loaded measures again only the points stored as loaded", "[perfmodel][cli]") {
  TempDir dir;
  const std::string db = dir.file("a.sqlite");
  const nlohmann::json first = parse(run_bench_target(dir, "--quick --threads 1 --json --db " + db));
  // One point as if another process had kept a CPU busy while it ran (the quick run itself may
  // have met load too: the count comes from the store).
  sql_int(db, "UPDATE measurements SET load_avg = threads + 3 WHERE key = 'conv k3 s1 16->16 14x14 b1'");
  const std::string loaded_rows = "SELECT count(*) FROM measurements WHERE load_avg > threads + 0.5";
  const int64_t loaded = sql_int(db, loaded_rows);
  REQUIRE(loaded >= 1);

  // A plain re-run keeps them: stored is stored.
  const nlohmann::json plain = parse(run_bench_target(dir, "--quick --threads 1 --json --db " + db));
  CHECK(plain["measured"] == 0);

  const KilnRun again = run_bench_target(dir, "--quick --threads 1 --remeasure-loaded --json --db " + db);
  const nlohmann::json j = parse(again);
  CHECK(j["measured"] == loaded);
  CHECK(j["already_stored"] == first["planned"].get<int64_t>() - loaded);
  CHECK(j["loaded"].get<int64_t>() <= loaded);
  CHECK_THAT(again.err, Catch::Contains("conv k3 s1 16->16 14x14 b1 f32 t1: "));
  // The point was measured again by this run, which replaced its row.
  CHECK(sql_int(db, "SELECT run_id FROM measurements WHERE key = 'conv k3 s1 16->16 14x14 b1'") == j["run"].get<int64_t>());
}

TEST_CASE("kiln bench-target --quick neither puts two-thread points off nor waits for the host", "[perfmodel][cli]") {
  // A quick run takes seconds: under a parallel test run the other CPU is busy for minutes, and
  // waiting for it (the full run's --settle 120) would make it take minutes. Flagging is enough.
  TempDir dir;
  const nlohmann::json j = parse(run_bench_target(dir, "--quick --only sweep --threads 1,2 --json --db " + dir.file("q.sqlite")));
  CHECK(j["measured"] == j["planned"]);
  CHECK(j["deferred"] == 0);
  CHECK(j["settle_waited_seconds"] == 0);
}

TEST_CASE("kiln bench-target --quick measures, then skips what is stored, exports and imports", "[perfmodel][cli]") {
  TempDir dir;
  const std::string db = dir.file("a.sqlite");
  const KilnRun first = run_bench_target(dir, "--quick --threads 1 --json --db " + db);
  const nlohmann::json j1 = parse(first);
  INFO(first.err);
  CHECK_THAT(first.err, Catch::Contains("[peak 1/") && Catch::Contains("[bandwidth 1/") && Catch::Contains("[sweep 1/") &&
                            Catch::Contains("ETA") && Catch::Contains("conv k3 s1 16->16 14x14 b1 f32 t1: "));
  CHECK(j1["planned"].get<int>() > 10);
  CHECK(j1["measured"] == j1["planned"]);
  CHECK(j1["failed"] == 0);
  CHECK(j1["already_stored"] == 0);
  // The machine's speed before the first point and after the last, at the one thread count.
  REQUIRE(j1["speed_drift"].size() == 1);
  const nlohmann::json& drift = j1["speed_drift"][0];
  CHECK(drift["threads"] == 1);
  CHECK(drift["start_gflops"].get<double>() > 0);
  CHECK(drift["end_gflops"].get<double>() > 0);
  CHECK(drift["change"].get<double>() == Approx(drift["end_gflops"].get<double>() / drift["start_gflops"].get<double>() - 1));
  CHECK_THAT(first.err, Catch::Contains("kiln: machine speed during the run: f32 peak at 1 thread "));

  // Incremental: everything is stored, nothing is measured again.
  const KilnRun second = run_bench_target(dir, "--quick --threads 1 --json --db " + db);
  const nlohmann::json j2 = parse(second);
  CHECK(j2["measured"] == 0);
  CHECK(j2["already_stored"] == j1["planned"]);
  CHECK(j2["target"] == j1["target"]);
  CHECK_THAT(second.err, Catch::Contains("already stored"));
  CHECK_THAT(second.err, !Catch::Contains("[sweep 1/"));
  CHECK(j2["speed_drift"].empty());  // nothing measured: no probe

  // --force re-measures one section.
  const nlohmann::json j3 = parse(run_bench_target(dir, "--quick --threads 1 --only peak --force --json --db " + db));
  CHECK(j3["measured"].get<int>() > 0);
  CHECK(j3["measured"].get<int>() < j1["measured"].get<int>());

  // --keep-faster times every peak point again: each stores the mean of its two times where they agree
  // within kReadingsAgreeRatio, else the faster (reading_choice_test has the rule itself). A point stored
  // under load takes the new reading whatever it is, so the bound holds only for points stored quiet: under
  // a parallel ctest the host's load average can flag some.
  struct PeakPoint {
    double ms = 0;
    bool loaded = false;
  };
  const auto peak_medians = [&](const std::string& file) {
    parse(run_bench_target(dir, "--export " + file + " --json --db " + db));
    std::ifstream in(file);
    const nlohmann::json doc = nlohmann::json::parse(in);
    std::map<std::string, PeakPoint> out;
    for (const auto& m : doc["targets"][0]["measurements"]) {
      if (m["kind"] != "peak") continue;
      kiln::perf::Measurement point;
      point.threads = m["threads"].get<int>();
      point.load_avg = m["load_avg"].get<double>();
      out[m["key"].get<std::string>() + " " + m["dtype"].get<std::string>()] = {m["median_ms"].get<double>(),
                                                                               kiln::perf::measured_under_load(point)};
    }
    return out;
  };
  const std::map<std::string, PeakPoint> before = peak_medians(dir.file("before.json"));
  const KilnRun faster = run_bench_target(dir, "--quick --threads 1 --only peak --keep-faster --json --db " + db);
  const nlohmann::json j4 = parse(faster);
  CHECK(j4["already_stored"] == 0);
  CHECK(j4["measured"].get<int>() + j4["kept_stored"].get<int>() == j4["planned"].get<int>());
  const std::map<std::string, PeakPoint> after = peak_medians(dir.file("after.json"));
  REQUIRE(after.size() == before.size());
  int unchanged = 0;
  int changed = 0;
  for (const auto& [key, point] : after) {
    const PeakPoint& stored = before.at(key);
    INFO(key << ": before " << stored.ms << " ms" << (stored.loaded ? " (loaded)" : "") << ", after " << point.ms << " ms");
    if (!stored.loaded) CHECK(point.ms <= stored.ms * (1 + kiln::perf::kReadingsAgreeRatio) / 2);  // a mean at most half the gap up
    unchanged += point.ms == stored.ms;
    changed += point.ms != stored.ms;
  }
  CHECK(unchanged == j4["kept_stored"].get<int>());
  CHECK(changed == j4["measured"].get<int>());
  CHECK(j4["averaged"].get<int>() <= j4["measured"].get<int>());
  if (j4["kept_stored"].get<int>() > 0) CHECK_THAT(faster.err, Catch::Contains("(kept the stored "));
  if (j4["averaged"].get<int>() > 0) CHECK_THAT(faster.err, Catch::Contains(": the mean of the two)"));

  const std::string profile = dir.file("node.json");
  const nlohmann::json exported = parse(run_bench_target(dir, "--export " + profile + " --json --db " + db));
  CHECK(exported["exported"]["measurements"] == j1["planned"]);
  const std::string other = dir.file("b.sqlite");
  const nlohmann::json imported = parse(run_bench_target(dir, "--import " + profile + " --json --db " + other));
  CHECK(imported["imported"]["measurements"] == j1["planned"]);

  const nlohmann::json listed = parse(run_bench_target(dir, "--list --json --db " + other));
  bool found = false, h100_prior = false;
  for (const auto& t : listed["targets"]) {
    if (t["id"] == j1["target"]) {
      found = true;
      CHECK(t["source"] == "imported");
      CHECK(t["prior"] == false);
      CHECK(t["measurements"] == j1["planned"]);
    }
    if (t["id"] == "nvidia-h100-sxm") h100_prior = t["prior"] == true && t["source"] == "prior";
  }
  CHECK(found);
  CHECK(h100_prior);

  // Every stored record carries the predictor's features.
  std::ifstream in(profile);
  const nlohmann::json doc = nlohmann::json::parse(in);
  int kernels = 0;
  for (const auto& m : doc["targets"][0]["measurements"]) {
    CHECK(m["runs"].get<int>() > 0);
    CHECK(m["median_ms"].get<double>() > 0);
    CHECK(m["p10_ms"].get<double>() <= m["median_ms"].get<double>());
    CHECK(m["median_ms"].get<double>() <= m["p90_ms"].get<double>());
    if (m["kind"] == "kernel") {
      ++kernels;
      CHECK(m["bytes"].get<double>() > 0);
      CHECK_FALSE(m["kernel"].get<std::string>().empty());
      if (m["op"] == "conv" || m["op"] == "gemm") CHECK(m["macs"].get<double>() > 0);
      // The bf16 pipeline really ran the convolution in bf16 (its output layout says so).
      if (m["op"] == "conv" && m["dtype"] == "bf16") CHECK_THAT(m["layout"].get<std::string>(), Catch::Contains("bf16"));
    }
  }
  CHECK(kernels > 5);
}

TEST_CASE("kiln bench-target: bad input is one clean error", "[perfmodel][cli]") {
  TempDir dir;
  const KilnRun section = run_bench_target(dir, "--only peak,flops --db " + dir.file("a.sqlite"));
  CHECK(section.exit_code == 1);
  CHECK_THAT(section.err, Catch::Contains("unknown section 'flops'"));

  std::ofstream(dir.file("v9.json")) << R"({"format": "kiln-target-profile", "version": 9, "targets": []})";
  const KilnRun version = run_bench_target(dir, "--import " + dir.file("v9.json") + " --db " + dir.file("a.sqlite"));
  CHECK(version.exit_code == 1);
  CHECK_THAT(version.err, Catch::Contains("kiln: error:") && Catch::Contains("version 9") && Catch::Contains("version 1"));

  std::ofstream(dir.file("junk.sqlite")) << std::string(4096, 'j');
  const KilnRun junk = run_bench_target(dir, "--list --db " + dir.file("junk.sqlite"));
  CHECK(junk.exit_code == 1);
  CHECK_THAT(junk.err, Catch::Contains("not a kiln benchmark store"));
}

TEST_CASE("kiln bench-target: Ctrl-C keeps what was measured and the next run continues", "[perfmodel][cli]") {
  TempDir dir;
  const std::string db = dir.file("a.sqlite");
  // The full sweep takes minutes: interrupted after 4 s with SIGINT, as Ctrl-C would (the run times
  // the machine's speed before its first point; under ASan and a parallel ctest that took 2 s).
  const std::string cmd = "timeout --preserve-status -s INT 4 " KILN_BINARY " bench-target --only sweep --threads 1 --json --db " +
                          db + " 2>" + dir.file("err.txt");
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  const nlohmann::json j = nlohmann::json::parse(out);
  CHECK(j["interrupted"] == true);
  const int measured = j["measured"].get<int>();
  CHECK(measured > 0);
  CHECK(measured < j["planned"].get<int>());

  const nlohmann::json plan = parse(run_bench_target(dir, "--only sweep --threads 1 --dry-run --json --db " + db));
  CHECK(plan["already_stored"] == measured);
  CHECK(plan["to_measure"].get<int>() == plan["planned"].get<int>() - measured);
}

TEST_CASE("kiln bench-target --device cuda without a usable GPU: one error line, nothing written", "[perfmodel][cli][device]") {
  TempDir dir;
  const std::string db = dir.file("gpu.sqlite");
  // The dry run first: on a machine with a usable GPU it succeeds at once (then nothing else runs).
  for (const char* extra : {" --dry-run --quick", "", " --quick --only sweep --cuda-precision fp16 --cuda-device 0"}) {
    const KilnRun r = run_bench_target(dir, "--device cuda --db " + db + extra);
    INFO(extra << ": " << r.out << r.err);
    if (r.exit_code == 0) {
      WARN("a usable CUDA device is present: bench-target planned its points instead of the no-device message");
      return;
    }
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    REQUIRE_FALSE(r.err.empty());
    CHECK(r.err.rfind("kiln: error: ", 0) == 0);
    CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
    // The messages `kiln bench --device cuda` gives: no plugin (built without CUDA), no driver, no device.
    CHECK((r.err.find("the CUDA backend plugin is not installed") != std::string::npos ||
           r.err.find("no NVIDIA driver") != std::string::npos || r.err.find("no CUDA device") != std::string::npos ||
           r.err.find("driver is too old") != std::string::npos));
    CHECK_FALSE(std::filesystem::exists(db));  // no store, not even an empty one
  }
}

TEST_CASE("kiln bench-target: GPU options without --device cuda, or --threads with it, are refused", "[perfmodel][cli]") {
  TempDir dir;
  const std::string db = dir.file("a.sqlite");
  KilnRun r = run_bench_target(dir, "--cuda-precision fp16 --dry-run --db " + db);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("add --device cuda"));
  r = run_bench_target(dir, "--device cuda --threads 2 --db " + db);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("a GPU is measured as one device"));
  CHECK_FALSE(std::filesystem::exists(db));
  r = run_bench_target(dir, "--device cuda --cuda-precision int8 --db " + db);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("int8"));
}
