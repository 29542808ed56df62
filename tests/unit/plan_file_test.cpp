// .kiln artifacts: round trip, and every kind of damage refused with a clear error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernels/executor.h"
#include "kernels/plan_file.h"
#include "tests/support/process_temp_dir.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// y = Relu(x * w + b) with a Constant-free plan holding two weights and an attribute tensor.
Plan tiny_plan() {
  Plan plan;
  auto slot = [&](Shape s) {
    plan.slot_types.push_back(ValueType::of(DType::f32, sym_shape_from(s)));
    return plan.num_slots++;
  };
  const int x = slot({2, 3}), w = slot({3}), b = slot({3}), m = slot({2, 3}), a = slot({2, 3}), y = slot({2, 3});
  const std::vector<float> wv = {0.5f, -1.0f, 2.0f}, bv = {0.25f, 0.0f, -0.5f};
  plan.constants = {{w, Tensor::from_values<float>({3}, wv)}, {b, Tensor::from_values<float>({3}, bv)}};
  plan.inputs = {{x, "x", plan.slot_types[0]}};
  plan.outputs = {{y, "y"}};
  Attrs clip;
  clip.set("note", std::vector<std::string>{"kept", "as is"});
  plan.steps.push_back({OpKind::Mul, {}, {x, w}, {m}, "mul"});
  plan.steps.push_back({OpKind::Add, {}, {m, b}, {a}, "add"});
  plan.steps.push_back({OpKind::Relu, clip, {a}, {y}, "relu"});
  return plan;
}

fs::path temp_file(const std::string& name) {
  static const kiln::test::ProcessTempDir dir("kiln-plan-test");
  return dir.path() / name;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

}  // namespace

TEST_CASE("a .kiln file round-trips and runs the same", "[plan_file]") {
  const Plan plan = tiny_plan();
  const fs::path path = temp_file("tiny.kiln");
  REQUIRE(plan_write_file(path.string(), plan, {"kiln test", "tiny", "none", "batch=2"}));
  auto loaded = plan_read_file(path.string());
  REQUIRE(loaded);
  REQUIRE(loaded->info.notes == "batch=2");
  REQUIRE(loaded->plan.steps.size() == 3);
  REQUIRE(loaded->plan.steps[2].attrs.has("note"));
  const std::vector<float> xv = {1, 2, 3, -1, -2, -3};
  const Tensor x = Tensor::from_values<float>({2, 3}, xv);
  auto want = execute_reference(plan, {x});
  auto got = execute_reference(loaded->plan, {x});
  REQUIRE(want);
  REQUIRE(got);
  for (int i = 0; i < 6; ++i) REQUIRE(got->outputs[0].data<float>()[i] == want->outputs[0].data<float>()[i]);
}

TEST_CASE("a .kiln file records the device and GPU precision it was compiled for", "[plan_file]") {
  const fs::path path = temp_file("device.kiln");
  REQUIRE(plan_write_file(path.string(), tiny_plan(), {"kiln test", "tiny", "none", "", "cuda", "fp16"}));
  auto loaded = plan_read_file(path.string());
  REQUIRE(loaded);
  CHECK(loaded->info.device == "cuda");
  CHECK(loaded->info.cuda_precision == "fp16");
  REQUIRE(plan_write_file(path.string(), tiny_plan(), {"kiln test", "tiny", "none", "", "", ""}));
  loaded = plan_read_file(path.string());
  REQUIRE(loaded);
  CHECK(loaded->info.device.empty());  // not recorded (as in files written before the field)
  // A value kiln does not know is refused, naming the field.
  REQUIRE(plan_write_file(path.string(), tiny_plan(), {"kiln test", "tiny", "none", "", "tpu", ""}));
  loaded = plan_read_file(path.string());
  REQUIRE_FALSE(loaded);
  CHECK_THAT(loaded.error().message, Catch::Contains("metadata 'device' is 'tpu', expected cpu or cuda"));
  REQUIRE(plan_write_file(path.string(), tiny_plan(), {"kiln test", "tiny", "none", "", "cpu", "fp16"}));
  loaded = plan_read_file(path.string());
  REQUIRE_FALSE(loaded);
  CHECK_THAT(loaded.error().message, Catch::Contains("metadata 'cuda_precision' is 'fp16' for device 'cpu'"));
}

TEST_CASE("a .kiln file records the steps a GPU plan keeps in fp32, each a step of the plan", "[plan_file]") {
  const fs::path path = temp_file("kept.kiln");
  const Plan plan = tiny_plan();
  const std::string first = plan.steps[0].name;
  REQUIRE(plan_write_file(path.string(), plan, {"kiln test", "tiny", "none", "", "cuda", "bf16", {first}}));
  auto loaded = plan_read_file(path.string());
  REQUIRE(loaded);
  CHECK(loaded->info.cuda_keep_fp32 == std::vector<std::string>{first});
  REQUIRE(plan_write_file(path.string(), plan, {"kiln test", "tiny", "none", "", "cuda", "bf16"}));
  loaded = plan_read_file(path.string());
  REQUIRE(loaded);
  CHECK(loaded->info.cuda_keep_fp32.empty());
  CHECK(read_all(path).find("cuda_keep_fp32") == std::string::npos);  // not written when empty
  // A name that is no step, or a list in a plan without a reduced GPU precision, is refused.
  REQUIRE(plan_write_file(path.string(), plan, {"kiln test", "tiny", "none", "", "cuda", "bf16", {"/nowhere/Conv"}}));
  loaded = plan_read_file(path.string());
  REQUIRE_FALSE(loaded);
  CHECK_THAT(loaded.error().message, Catch::Contains("metadata 'cuda_keep_fp32': keep fp32: no step of the plan is node '/nowhere/Conv'"));
  REQUIRE(plan_write_file(path.string(), plan, {"kiln test", "tiny", "none", "", "cuda", "fp32", {first}}));
  loaded = plan_read_file(path.string());
  REQUIRE_FALSE(loaded);
  CHECK_THAT(loaded.error().message, Catch::Contains("metadata 'cuda_keep_fp32' keeps nodes in fp32 in a plan whose GPU precision is 'fp32'"));
}

TEST_CASE("damaged .kiln files are refused with a clear error", "[plan_file]") {
  const fs::path good = temp_file("good.kiln");
  REQUIRE(plan_write_file(good.string(), tiny_plan(), {"kiln test", "tiny", "none", ""}));
  const std::string bytes = read_all(good);
  const fs::path bad = temp_file("bad.kiln");
  auto read_bad = [&](const std::string& content) {
    write_all(bad, content);
    return plan_read_file(bad.string());
  };

  SECTION("every truncation") {
    for (size_t n = 0; n < bytes.size(); n += 7) {
      auto r = read_bad(bytes.substr(0, n));
      REQUIRE_FALSE(r);
      REQUIRE(r.error().message.find("bad.kiln") != std::string::npos);
    }
  }
  SECTION("a flipped byte anywhere") {
    for (size_t i = 0; i < bytes.size(); i += 3) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ 0x20);
      auto r = read_bad(flipped);
      REQUIRE_FALSE(r);
    }
    std::string in_weights = bytes;
    in_weights[bytes.size() - 2] = static_cast<char>(in_weights[bytes.size() - 2] ^ 1);
    auto r = read_bad(in_weights);
    REQUIRE_FALSE(r);
    REQUIRE(r.error().message.find("corrupt weights (checksum mismatch)") != std::string::npos);
  }
  SECTION("another format version") {
    std::string other = bytes;
    other[8] = 1;  // the version field follows the 8-byte magic; 1 had MatMul's residual at input 2
    auto r = read_bad(other);
    REQUIRE_FALSE(r);
    REQUIRE(r.error().code == ErrorCode::unsupported);
    REQUIRE(r.error().message.find(".kiln format version 1 is not supported by this kiln (it reads version 2)") != std::string::npos);
  }
  SECTION("not a .kiln file") {
    auto r = read_bad(std::string(100, 'x'));
    REQUIRE_FALSE(r);
    REQUIRE(r.error().message.find("not a .kiln file (bad magic)") != std::string::npos);
  }
}

TEST_CASE("large weights are checksummed in parallel chunks, and a flip in any chunk is caught", "[plan_file]") {
  // 40 MB of weights: above the size where the check is split across threads.
  Plan plan = tiny_plan();
  const int big = plan.num_slots++;
  plan.slot_types.push_back(ValueType::of(DType::f32, sym_shape_from({10 << 20})));
  Tensor t = Tensor::zeros(DType::f32, {10 << 20});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 977);
  plan.constants.push_back({big, std::move(t)});
  const fs::path good = temp_file("big.kiln");
  REQUIRE(plan_write_file(good.string(), plan, {"kiln test", "big", "none", ""}));
  REQUIRE(plan_read_file(good.string()));
  const std::string bytes = read_all(good);
  const fs::path bad = temp_file("big_bad.kiln");
  for (double at : {0.3, 0.55, 0.8, 0.999}) {  // in the second, third and last chunks of the weights
    std::string flipped = bytes;
    const size_t i = static_cast<size_t>(static_cast<double>(bytes.size()) * at);
    flipped[i] = static_cast<char>(flipped[i] ^ 4);
    write_all(bad, flipped);
    auto r = plan_read_file(bad.string());
    INFO("flipped byte " << i << " of " << bytes.size());
    REQUIRE_FALSE(r);
    REQUIRE(r.error().message.find("corrupt weights (checksum mismatch)") != std::string::npos);
  }
  fs::remove(good);
  fs::remove(bad);
}
