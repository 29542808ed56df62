// The dynamic batcher (service/runtime/serve/batcher.h) with a fake engine: concurrent requests
// share one run, outputs go back to the right request, padding rows are zero, large requests are
// chunked, failures and back-pressure reach the caller, stop() drains.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "service/runtime/serve/batcher.h"

using namespace kiln;
using namespace kiln::serve;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kBatch = 4;
constexpr int64_t kWidth = 3;

// The fake engine: x f32[B,3] -> y = 2x + 1 (f32[B,3]) and s = row sum as int64 (i64[B]); it
// records the inputs of every run.
struct FakeEngine {
  std::mutex mu;
  std::vector<Tensor> runs;  // the x of each run
  bool fail = false;

  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) {
    {
      std::lock_guard lock(mu);
      runs.push_back(inputs[0].clone());
    }
    if (fail) return make_error(ErrorCode::internal, "engine exploded");
    const Tensor& x = inputs[0];
    Tensor y = Tensor::zeros(DType::f32, x.shape());
    Tensor s = Tensor::zeros(DType::i64, {x.dim(0)});
    for (int64_t r = 0; r < x.dim(0); ++r)
      for (int64_t c = 0; c < kWidth; ++c) {
        const float v = x.data<float>()[r * kWidth + c];
        y.data<float>()[r * kWidth + c] = 2 * v + 1;
        s.data<int64_t>()[r] += static_cast<int64_t>(v);
      }
    return std::vector<Tensor>{y, s};
  }
  size_t run_count() {
    std::lock_guard lock(mu);
    return runs.size();
  }
};

// Request k carries rows whose values are 100k + 10r + c, so every row is unique.
Tensor rows(int64_t k, int64_t n) {
  Tensor t = Tensor::zeros(DType::f32, {n, kWidth});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < kWidth; ++c) t.data<float>()[r * kWidth + c] = static_cast<float>(100 * k + 10 * r + c);
  return t;
}

void check_outputs(const std::vector<Tensor>& out, int64_t k, int64_t n) {
  REQUIRE(out.size() == 2);
  REQUIRE(out[0].shape() == Shape{n, kWidth});
  REQUIRE(out[1].shape() == Shape{n});
  for (int64_t r = 0; r < n; ++r) {
    int64_t sum = 0;
    for (int64_t c = 0; c < kWidth; ++c) {
      const float v = static_cast<float>(100 * k + 10 * r + c);
      CHECK(out[0].data<float>()[r * kWidth + c] == 2 * v + 1);
      sum += static_cast<int64_t>(v);
    }
    CHECK(out[1].data<int64_t>()[r] == sum);
  }
}

struct Fixture {
  FakeEngine engine;
  std::unique_ptr<Batcher> batcher;

  explicit Fixture(BatcherOptions options, Shape shape = {kBatch, kWidth}) {
    batcher = std::make_unique<Batcher>(options, std::vector<DType>{DType::f32}, std::vector<Shape>{std::move(shape)},
                                        [this](const std::vector<Tensor>& in) { return engine.run(in); });
  }

  std::future<Result<std::vector<Tensor>>> submit(Tensor x) {
    auto promise = std::make_shared<std::promise<Result<std::vector<Tensor>>>>();
    auto future = promise->get_future();
    const SubmitResult r = batcher->submit({std::move(x)}, [promise](Result<std::vector<Tensor>> out) { promise->set_value(std::move(out)); });
    if (!r.accepted()) promise->set_value(make_error(ErrorCode::invalid_argument, "refused: ", r.message));
    return future;
  }
};

BatcherOptions batching(std::chrono::microseconds delay, int64_t max_batch = 0) {
  BatcherOptions o;
  o.batch = kBatch;
  o.max_batch = max_batch;
  o.max_delay = delay;
  return o;
}

}  // namespace

TEST_CASE("concurrent single-sample requests share one engine run", "[serve]") {
  Fixture f(batching(30s));  // a full batch runs at once, long before the delay
  std::vector<std::future<Result<std::vector<Tensor>>>> futures(kBatch);
  std::vector<std::thread> clients;
  for (int64_t k = 0; k < kBatch; ++k) clients.emplace_back([&, k] { futures[static_cast<size_t>(k)] = f.submit(rows(k, 1)); });
  for (auto& t : clients) t.join();
  for (int64_t k = 0; k < kBatch; ++k) {
    auto out = futures[static_cast<size_t>(k)].get();
    REQUIRE(out);
    check_outputs(*out, k, 1);
  }
  CHECK(f.engine.run_count() == 1);
  const BatcherStats s = f.batcher->stats();
  CHECK(s.execution_count == 1);
  CHECK(s.inference_count == kBatch);
  CHECK(s.requests == kBatch);
  CHECK(s.failed == 0);
}

TEST_CASE("a lone request runs after the delay, padded with zero rows", "[serve]") {
  Fixture f(batching(20ms));
  const auto start = std::chrono::steady_clock::now();
  auto out = f.submit(rows(3, 1)).get();
  CHECK(std::chrono::steady_clock::now() - start >= 20ms);
  REQUIRE(out);
  check_outputs(*out, 3, 1);
  REQUIRE(f.engine.run_count() == 1);
  const Tensor& x = f.engine.runs[0];
  REQUIRE(x.shape() == Shape{kBatch, kWidth});
  CHECK(x.data<float>()[0] == 300);
  for (int64_t i = kWidth; i < kBatch * kWidth; ++i) CHECK(x.data<float>()[i] == 0);
}

TEST_CASE("a request larger than the batch runs in chunks and is reassembled", "[serve]") {
  Fixture f(batching(1ms));
  auto out = f.submit(rows(5, 10)).get();
  REQUIRE(out);
  check_outputs(*out, 5, 10);
  CHECK(f.engine.run_count() == 3);  // 4 + 4 + 2 (padded)
  CHECK(f.batcher->stats().inference_count == 10);
  CHECK(f.batcher->stats().requests == 1);
}

TEST_CASE("requests straddle runs: 3 + 3 samples fill one run of 4 and one of 2", "[serve]") {
  Fixture f(batching(50ms));
  auto a = f.submit(rows(1, 3));
  auto b = f.submit(rows(2, 3));
  auto out_a = a.get();
  auto out_b = b.get();
  REQUIRE(out_a);
  REQUIRE(out_b);
  check_outputs(*out_a, 1, 3);
  check_outputs(*out_b, 2, 3);
  REQUIRE(f.engine.run_count() == 2);
  CHECK(f.engine.runs[0].data<float>()[3 * kWidth] == 200);  // b's first row completes run 1
  CHECK(f.engine.runs[1].data<float>()[0] == 210);
}

TEST_CASE("max_batch below the compiled batch gathers fewer samples and still pads", "[serve]") {
  Fixture f(batching(30s, 2));
  auto a = f.submit(rows(1, 1));
  auto b = f.submit(rows(2, 1));
  check_outputs(*a.get(), 1, 1);
  check_outputs(*b.get(), 2, 1);
  REQUIRE(f.engine.run_count() == 1);
  CHECK(f.engine.runs[0].data<float>()[2 * kWidth] == 0);
}

TEST_CASE("an engine failure fails every request of the run, and the batcher goes on", "[serve]") {
  Fixture f(batching(30s));
  f.engine.fail = true;
  std::vector<std::future<Result<std::vector<Tensor>>>> futures;
  futures.push_back(f.submit(rows(1, 2)));
  futures.push_back(f.submit(rows(2, 6)));  // its second chunk never runs
  for (auto& fut : futures) {
    auto out = fut.get();
    REQUIRE_FALSE(out);
    CHECK_THAT(out.error().message, Catch::Contains("engine exploded"));
  }
  CHECK(f.engine.run_count() == 1);
  CHECK(f.batcher->stats().failed == 2);
  f.engine.fail = false;
  f.batcher->stop();  // drains: the failed request's rest is skipped
  CHECK(f.engine.run_count() == 1);
}

TEST_CASE("submit refuses wrong inputs, a full queue and a stopped batcher", "[serve]") {
  BatcherOptions o = batching(0us);
  o.max_queued = 1;
  std::promise<void> entered, release;
  auto release_future = release.get_future().share();
  bool first = true;
  Batcher b(o, {DType::f32}, {{kBatch, kWidth}}, [&](const std::vector<Tensor>& in) -> Result<std::vector<Tensor>> {
    if (first) {
      first = false;
      entered.set_value();
      release_future.wait();
    }
    return std::vector<Tensor>{in[0]};
  });
  auto noop = [](Result<std::vector<Tensor>>) {};
  CHECK(b.submit({Tensor::zeros(DType::f32, {1, 4})}, noop).outcome == SubmitOutcome::invalid);
  CHECK(b.submit({Tensor::zeros(DType::i64, {1, kWidth})}, noop).outcome == SubmitOutcome::invalid);
  CHECK(b.submit({Tensor::zeros(DType::f32, {0, kWidth})}, noop).outcome == SubmitOutcome::invalid);
  CHECK(b.submit({}, noop).outcome == SubmitOutcome::invalid);
  REQUIRE(b.submit({rows(1, 1)}, noop).accepted());
  entered.get_future().wait();  // the worker holds request 1 in the engine
  REQUIRE(b.submit({rows(2, 1)}, noop).accepted());
  const SubmitResult full = b.submit({rows(3, 1)}, noop);
  CHECK(full.outcome == SubmitOutcome::queue_full);
  CHECK_THAT(full.message, Catch::Contains("queue is full"));
  release.set_value();
  b.stop();
  CHECK(b.stats().inference_count == 2);
  CHECK(b.submit({rows(4, 1)}, noop).outcome == SubmitOutcome::stopped);
}

TEST_CASE("stop runs queued requests at once instead of waiting for the delay", "[serve]") {
  Fixture f(batching(30s));
  auto fut = f.submit(rows(1, 1));
  const auto start = std::chrono::steady_clock::now();
  f.batcher->stop();
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  auto out = fut.get();
  REQUIRE(out);
  check_outputs(*out, 1, 1);
}

TEST_CASE("without batching each request runs alone with its exact shapes", "[serve]") {
  BatcherOptions o;
  o.batch = 0;
  Fixture f(o, {2, kWidth});
  auto a = f.submit(rows(1, 2));
  auto b = f.submit(rows(2, 2));
  check_outputs(*a.get(), 1, 2);
  check_outputs(*b.get(), 2, 2);
  CHECK(f.engine.run_count() == 2);
  auto bad = f.submit(rows(3, 1)).get();
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("the engine takes [2,3]"));
}
