// The local fingerprint: every field filled, the same on two calls, and an id that changes with
// any identity field but not with the host name.
#include <catch2/catch.hpp>

#include <regex>

#include "perfmodel/fingerprint.h"

using namespace kiln::perf;

TEST_CASE("fingerprint fields are filled and stable across two calls", "[perfmodel][fingerprint]") {
  const TargetFingerprint a = fingerprint_local(), b = fingerprint_local();
  CHECK_FALSE(a.cpu_model.empty());
  CHECK_FALSE(a.vendor.empty());
  CHECK(a.logical_cpus > 0);
  CHECK(a.usable_threads > 0);
  CHECK(a.memory_bytes > (int64_t{256} << 20));
  CHECK(std::regex_match(a.onednn_version, std::regex(R"(\d+\.\d+\.\d+)")));
  CHECK_FALSE(a.kiln_version.empty());
  CHECK(std::regex_match(a.id, std::regex("[0-9a-f]{16}")));
#if defined(__x86_64__)
  CHECK(fingerprint_has(a, "avx2") == (__builtin_cpu_supports("avx2") != 0));
#endif
  CHECK(a.id == b.id);
  CHECK(a.cpu_model == b.cpu_model);
  CHECK(a.isa == b.isa);
  CHECK(a.memory_bytes == b.memory_bytes);
  CHECK(a.caches == b.caches);
  CHECK(fingerprint_id(a) == a.id);
}

TEST_CASE("fingerprint id follows the identity fields, not the host", "[perfmodel][fingerprint]") {
  TargetFingerprint fp = fingerprint_local();
  const std::string id = fingerprint_id(fp);
  TargetFingerprint renamed = fp;
  renamed.host = "another-node";
  CHECK(fingerprint_id(renamed) == id);
  TargetFingerprint more_cores = fp;
  more_cores.logical_cpus += 1;
  CHECK(fingerprint_id(more_cores) != id);
  TargetFingerprint other_lib = fp;
  other_lib.onednn_version = "3.0.0";
  CHECK(fingerprint_id(other_lib) != id);
  TargetFingerprint no_bf16 = fp;
  no_bf16.isa = {"avx2", "fma"};
  CHECK(fingerprint_id(no_bf16) != id);
  CHECK_FALSE(fingerprint_dtype_unsupported(no_bf16, "bf16").empty());
  CHECK(fingerprint_dtype_unsupported(no_bf16, "f32").empty());
  // int8 runs on AVX2 without VNNI (oneDNN's 16-bit pair sums), and the plan says so.
  CHECK(fingerprint_dtype_unsupported(no_bf16, "int8").empty());
  CHECK_THAT(fingerprint_dtype_note(no_bf16, "int8"), Catch::Contains("without VNNI"));
  CHECK(fingerprint_dtype_note(no_bf16, "f32").empty());
  no_bf16.isa.push_back("amx_bf16");
  CHECK(fingerprint_dtype_unsupported(no_bf16, "bf16").empty());
  TargetFingerprint vnni = no_bf16;
  vnni.isa.push_back("avx512_vnni");
  CHECK(fingerprint_dtype_unsupported(vnni, "int8").empty());
  CHECK(fingerprint_dtype_note(vnni, "int8").empty());
  TargetFingerprint sse_only = fp;
  sse_only.isa = {"sse4_2"};
  CHECK_FALSE(fingerprint_dtype_unsupported(sse_only, "int8").empty());
  CHECK(fingerprint_dtype_note(sse_only, "int8").empty());
}
