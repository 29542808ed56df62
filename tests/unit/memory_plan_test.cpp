// Memory planning: hand-made request sets with exact arenas, a seeded property test over random
// sets, and plans of small shape-inferred graphs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>

#include "compilers/ir/shape_inference.h"
#include "compilers/planning/memory_plan.h"

using namespace kiln;

namespace {

MemoryPlan plan_ok(const std::vector<BufferRequest>& requests, int64_t alignment,
                   PlacementStrategy strategy = PlacementStrategy::greedy_by_size) {
  auto plan = plan_buffers(requests, alignment, strategy);
  REQUIRE(plan);
  const Status valid = verify_memory_plan(requests, *plan, alignment);
  INFO((valid ? std::string() : valid.message()));
  REQUIRE(valid);
  return *plan;
}

// The lower bound by brute force: every step, every buffer.
int64_t brute_force_bound(const std::vector<BufferRequest>& requests, int64_t alignment) {
  std::map<int, int64_t> live;
  for (const BufferRequest& r : requests)
    for (int s = r.first_step; s <= r.last_step; ++s) live[s] += align_bytes(r.bytes, alignment);
  int64_t peak = 0;
  for (const auto& [step, bytes] : live) peak = std::max(peak, bytes);
  return peak;
}

}  // namespace

TEST_CASE("an empty request set needs no arena", "[memory_plan]") {
  const MemoryPlan plan = plan_ok({}, 64);
  REQUIRE(plan.offsets.empty());
  REQUIRE(plan.arena_bytes == 0);
  REQUIRE(plan.lower_bound_bytes == 0);
  REQUIRE(plan.sum_of_buffers_bytes == 0);
}

TEST_CASE("buffers with disjoint lifetimes share offset 0", "[memory_plan]") {
  const std::vector<BufferRequest> requests = {{100, 0, 1}, {100, 2, 3}, {30, 4, 4}};
  const MemoryPlan plan = plan_ok(requests, 64);
  REQUIRE(plan.offsets == std::vector<int64_t>{0, 0, 0});
  REQUIRE(plan.arena_bytes == 128);
  REQUIRE(plan.lower_bound_bytes == 128);
  REQUIRE(plan.sum_of_buffers_bytes == 320);
}

TEST_CASE("a chain reuses the space of dead buffers and reaches the bound", "[memory_plan]") {
  // a 32 [0,1], b 28 [1,2], c 36 [2,3], d 16 [3,4], e 8 [4,5]; placed c, a, b, d, e
  const std::vector<BufferRequest> requests = {{32, 0, 1}, {28, 1, 2}, {36, 2, 3}, {16, 3, 4}, {8, 4, 5}};
  const MemoryPlan plan = plan_ok(requests, 1);
  REQUIRE(plan.offsets == std::vector<int64_t>{0, 36, 0, 36, 0});
  REQUIRE(plan.arena_bytes == 64);
  REQUIRE(plan.lower_bound_bytes == 64);  // step 2: b + c
  REQUIRE(plan.sum_of_buffers_bytes == 120);
}

TEST_CASE("greedy by size takes the smallest gap that fits", "[memory_plan]") {
  // At step 2, p1 holds [100,160) and p2 [210,260): gaps [0,100) and [160,210) for q.
  const std::vector<BufferRequest> requests = {
      {100, 0, 1},  // f1 -> 0
      {60, 1, 2},   // p1 -> 100 (above f1)
      {50, 0, 1},   // f2 -> 160 (ties with p2, starts earlier)
      {50, 1, 2},   // p2 -> 210
      {40, 2, 2},   // q -> 160, not 0
  };
  const MemoryPlan plan = plan_ok(requests, 1);
  REQUIRE(plan.offsets == std::vector<int64_t>{0, 100, 160, 210, 160});
  REQUIRE(plan.arena_bytes == 260);
  REQUIRE(plan.lower_bound_bytes == 260);
  // lowest offset first puts q in the lowest gap
  const MemoryPlan lowest = plan_ok(requests, 1, PlacementStrategy::lowest_offset_first);
  REQUIRE(lowest.offsets[4] == 0);
  REQUIRE(lowest.arena_bytes == 260);
}

TEST_CASE("a residual stream: greedy by size misses the bound, lowest offset first reaches it", "[memory_plan]") {
  // Three blocks of 10 steps: a residual r_k (1 byte) lives through block k and meets r_k+1 at
  // its last step; a big buffer b_k (3 bytes) lives in the block's middle. Bound: r_k + b_k = 4.
  std::vector<BufferRequest> requests;
  for (int k = 0; k < 3; ++k) {
    requests.push_back({1, 10 * k, 10 * k + 10});    // r_k: ids 0, 2, 4
    requests.push_back({3, 10 * k + 4, 10 * k + 6});  // b_k: ids 1, 3, 5
  }
  // Greedy by size puts every b_k at 0, so r_k and r_k+1 need two slots above them.
  const MemoryPlan by_size = plan_ok(requests, 1, PlacementStrategy::greedy_by_size);
  REQUIRE(by_size.offsets == std::vector<int64_t>{3, 0, 4, 0, 3, 0});
  REQUIRE(by_size.arena_bytes == 5);
  REQUIRE(by_size.lower_bound_bytes == 4);
  // Lowest offset first (longer-lived first on ties) alternates r_k between bottom and top.
  const MemoryPlan lowest = plan_ok(requests, 1, PlacementStrategy::lowest_offset_first);
  REQUIRE(lowest.offsets == std::vector<int64_t>{0, 1, 3, 0, 0, 1});
  REQUIRE(lowest.arena_bytes == 4);
  const MemoryPlan best = plan_ok(requests, 1, PlacementStrategy::best_of_both);
  REQUIRE(best.offsets == lowest.offsets);
  REQUIRE(best.arena_bytes == 4);
}

TEST_CASE("equal sizes are placed by first step, then by request order", "[memory_plan]") {
  SECTION("a rolling chain alternates between two slots") {
    const std::vector<BufferRequest> requests = {{64, 2, 3}, {64, 1, 2}, {64, 0, 1}, {64, 3, 4}};
    const MemoryPlan plan = plan_ok(requests, 64);
    // placement order: [0,1] -> 0, [1,2] -> 64, [2,3] -> 0, [3,4] -> 64
    REQUIRE(plan.offsets == std::vector<int64_t>{0, 64, 0, 64});
    REQUIRE(plan.arena_bytes == 128);
    REQUIRE(plan.lower_bound_bytes == 128);
  }
  SECTION("identical requests stack in request order") {
    const std::vector<BufferRequest> requests = {{64, 0, 2}, {64, 0, 2}, {64, 0, 2}};
    const MemoryPlan plan = plan_ok(requests, 64);
    REQUIRE(plan.offsets == std::vector<int64_t>{0, 64, 128});
    REQUIRE(plan.arena_bytes == 192);
  }
}

TEST_CASE("zero-size buffers occupy nothing", "[memory_plan]") {
  SECTION("next to a real buffer") {
    const std::vector<BufferRequest> requests = {{0, 0, 5}, {100, 0, 5}, {0, 3, 3}};
    const MemoryPlan plan = plan_ok(requests, 64);
    REQUIRE(plan.offsets == std::vector<int64_t>{0, 0, 0});
    REQUIRE(plan.arena_bytes == 128);
    REQUIRE(plan.lower_bound_bytes == 128);
    REQUIRE(plan.sum_of_buffers_bytes == 128);
  }
  SECTION("only zero-size buffers") {
    const MemoryPlan plan = plan_ok({{0, 0, 0}, {0, 0, 1}}, 64);
    REQUIRE(plan.arena_bytes == 0);
    REQUIRE(plan.lower_bound_bytes == 0);
  }
}

TEST_CASE("one-step lifetimes overlap only on their own step", "[memory_plan]") {
  const std::vector<BufferRequest> requests = {{10, 3, 3}, {20, 3, 3}, {30, 4, 4}};
  const MemoryPlan plan = plan_ok(requests, 1);
  // placed 30 -> 0, 20 -> 0 (step 3 only), 10 -> 20
  REQUIRE(plan.offsets == std::vector<int64_t>{20, 0, 0});
  REQUIRE(plan.arena_bytes == 30);
  REQUIRE(plan.lower_bound_bytes == 30);
}

TEST_CASE("sizes are rounded up to the alignment", "[memory_plan]") {
  const std::vector<BufferRequest> requests = {{1, 0, 0}, {65, 0, 0}};
  const MemoryPlan plan = plan_ok(requests, 64);
  REQUIRE(plan.offsets == std::vector<int64_t>{128, 0});
  REQUIRE(plan.arena_bytes == 192);
  REQUIRE(plan.lower_bound_bytes == 192);
  REQUIRE(plan.sum_of_buffers_bytes == 192);
  REQUIRE(align_bytes(0, 64) == 0);
  REQUIRE(align_bytes(64, 64) == 64);
  REQUIRE(align_bytes(7, 3) == 9);
}

TEST_CASE("malformed requests are errors", "[memory_plan]") {
  auto negative = plan_buffers({{-1, 0, 0}});
  REQUIRE_FALSE(negative);
  REQUIRE(negative.error().code == ErrorCode::invalid_argument);
  REQUIRE(negative.error().message.find("buffer 0 has a negative size") != std::string::npos);
  auto backwards = plan_buffers({{8, 0, 0}, {8, 3, 2}});
  REQUIRE_FALSE(backwards);
  REQUIRE(backwards.error().message.find("buffer 1 ends (step 2) before it starts (step 3)") != std::string::npos);
  REQUIRE_FALSE(plan_buffers({{8, 0, 0}}, 0));
  auto huge = plan_buffers({{int64_t{1} << 62, 0, 0}, {int64_t{1} << 62, 0, 0}});
  REQUIRE_FALSE(huge);
  REQUIRE(huge.error().code == ErrorCode::limit_exceeded);
}

TEST_CASE("verify_memory_plan catches overlaps, misalignment and a short arena", "[memory_plan]") {
  const std::vector<BufferRequest> requests = {{64, 0, 2}, {64, 2, 3}, {64, 3, 4}};
  MemoryPlan plan;
  plan.offsets = {0, 64, 0};
  plan.arena_bytes = 128;
  REQUIRE(verify_memory_plan(requests, plan));

  MemoryPlan clash = plan;
  clash.offsets = {0, 32, 64};  // buffers 0 and 1 share step 2 and bytes [32,64)
  const Status overlap = verify_memory_plan(requests, clash, 32);
  REQUIRE_FALSE(overlap);
  REQUIRE(overlap.message().find("buffers 0 (steps 0..2") != std::string::npos);
  REQUIRE(overlap.message().find("and 1 (steps 2..3") != std::string::npos);

  clash.offsets = {0, 32, 64};
  REQUIRE_FALSE(verify_memory_plan(requests, clash, 64));  // 32 is not 64-aligned
  MemoryPlan short_arena = plan;
  short_arena.arena_bytes = 100;
  REQUIRE_FALSE(verify_memory_plan(requests, short_arena));
  MemoryPlan missing = plan;
  missing.offsets.pop_back();
  REQUIRE_FALSE(verify_memory_plan(requests, missing));
}

TEST_CASE("random request sets get valid plans between the bound and the sum", "[memory_plan]") {
  std::mt19937 rng(20240611);
  const int64_t alignments[] = {1, 8, 64};
  int at_bound = 0;
  const int trials = 400;
  for (int trial = 0; trial < trials; ++trial) {
    const int n = std::uniform_int_distribution<int>(0, 60)(rng);
    const int steps = std::uniform_int_distribution<int>(1, 40)(rng);
    const int64_t alignment = alignments[trial % 3];
    std::vector<BufferRequest> requests;
    for (int i = 0; i < n; ++i) {
      BufferRequest r;
      // a few zero-size buffers, many small ones, some large
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      r.bytes = kind == 0 ? 0 : std::uniform_int_distribution<int64_t>(1, kind < 7 ? 512 : 100000)(rng);
      r.first_step = std::uniform_int_distribution<int>(0, steps - 1)(rng);
      const int span = std::uniform_int_distribution<int>(0, 9)(rng) == 0 ? steps : 4;  // some long-lived
      r.last_step = std::min(steps - 1, r.first_step + std::uniform_int_distribution<int>(0, span)(rng));
      requests.push_back(r);
    }
    INFO("trial " << trial << ", " << n << " buffers, alignment " << alignment);
    int64_t arenas[3] = {};
    for (PlacementStrategy strategy : {PlacementStrategy::greedy_by_size, PlacementStrategy::lowest_offset_first,
                                       PlacementStrategy::best_of_both}) {
      const MemoryPlan plan = plan_ok(requests, alignment, strategy);
      REQUIRE(plan.lower_bound_bytes == brute_force_bound(requests, alignment));
      REQUIRE(plan.arena_bytes >= plan.lower_bound_bytes);
      REQUIRE(plan.arena_bytes <= plan.sum_of_buffers_bytes);
      arenas[static_cast<int>(strategy)] = plan.arena_bytes;
      if (strategy == PlacementStrategy::best_of_both && plan.arena_bytes == plan.lower_bound_bytes) ++at_bound;
    }
    REQUIRE(arenas[2] == std::min(arenas[0], arenas[1]));
  }
  // Both are heuristics, but on random sets the better of the two mostly reaches the bound.
  REQUIRE(at_bound > trials / 2);
}

// ---- Graph level -------------------------------------------------------------------------------

namespace {

ValueId unknown(Graph& g, const std::string& name) { return g.add_value(name, ValueType::unranked(DType::f32)); }

// Every value f32[64] (256 bytes):
//   0: a = Neg(x)   1: b = Relu(a)   2: c = Sigmoid(b)   3: d = Sum(b, c, w)   4: y = Tanh(d)
//   5: e = Abs(y)   (e is read by nobody; y is the graph output, w a weight)
Graph small_graph(SymShape input_shape = {64}) {
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, std::move(input_shape)));
  const ValueId w = g.add_value("w", ValueType::of(DType::f32, {64}));
  g.initializers[w] = Tensor::zeros(DType::f32, {64});
  const ValueId a = unknown(g, "a"), b = unknown(g, "b"), c = unknown(g, "c"), d = unknown(g, "d");
  const ValueId y = unknown(g, "y"), e = unknown(g, "e");
  g.inputs = {x};
  g.outputs = {y};
  g.add_node(Node{"neg", OpKind::Neg, {}, {x}, {a}});
  g.add_node(Node{"relu", OpKind::Relu, {}, {a}, {b}});
  g.add_node(Node{"sigmoid", OpKind::Sigmoid, {}, {b}, {c}});
  g.add_node(Node{"sum", OpKind::Sum, {}, {b, c, w}, {d}});
  g.add_node(Node{"tanh", OpKind::Tanh, {}, {d}, {y}});
  g.add_node(Node{"abs", OpKind::Abs, {}, {y}, {e}});
  return g;
}

Graph inferred(Graph g, DimBindings bindings = {}) {
  ShapeInferenceOptions options;
  options.bindings = std::move(bindings);
  auto result = graph_infer_shapes(g, options);
  REQUIRE(result);
  return g;
}

}  // namespace

TEST_CASE("graph memory: intermediates live from producer to last reader", "[memory_plan]") {
  const Graph g = inferred(small_graph());
  auto plan = plan_graph_memory(g);
  REQUIRE(plan);
  REQUIRE(verify_memory_plan(plan->buffers, plan->memory));
  auto buffer = [&](const char* name) { return plan->value_buffer[static_cast<size_t>(g.find_value(name))]; };
  auto steps = [&](const char* name) {
    const BufferRequest& r = plan->buffers[static_cast<size_t>(buffer(name))];
    return std::pair<int, int>{r.first_step, r.last_step};
  };
  // user buffers and weights stay outside the arena
  REQUIRE(buffer("x") == -1);
  REQUIRE(buffer("y") == -1);
  REQUIRE(buffer("w") == -1);
  REQUIRE(plan->value_offset(g.find_value("y")) == -1);
  REQUIRE(plan->buffers.size() == 5);
  REQUIRE(steps("a") == std::pair<int, int>{0, 1});
  REQUIRE(steps("b") == std::pair<int, int>{1, 3});
  REQUIRE(steps("c") == std::pair<int, int>{2, 3});
  REQUIRE(steps("d") == std::pair<int, int>{3, 4});
  REQUIRE(steps("e") == std::pair<int, int>{5, 5});  // nobody reads it
  // live: {a} {a,b} {b,c} {b,c,d} {d} {e}; placed a, b, c, d, e (all 256 bytes)
  REQUIRE(plan->memory.lower_bound_bytes == 768);
  REQUIRE(plan->memory.arena_bytes == 768);
  REQUIRE(plan->memory.sum_of_buffers_bytes == 1280);
  REQUIRE(plan->intermediate_bytes == 1280);
  REQUIRE(plan->value_offset(g.find_value("a")) == 0);
  REQUIRE(plan->value_offset(g.find_value("b")) == 256);
  REQUIRE(plan->value_offset(g.find_value("c")) == 0);
  REQUIRE(plan->value_offset(g.find_value("d")) == 512);
  REQUIRE(plan->value_offset(g.find_value("e")) == 0);
  REQUIRE(plan->weights_bytes == 256);
  REQUIRE(plan->io_bytes == 512);
  REQUIRE(plan->in_place_values == 0);
}

TEST_CASE("graph memory: in place, an activation takes over its dying input's buffer", "[memory_plan]") {
  const Graph g = inferred(small_graph());
  GraphMemoryOptions options;
  options.in_place = true;
  auto plan = plan_graph_memory(g, options);
  REQUIRE(plan);
  REQUIRE(verify_memory_plan(plan->buffers, plan->memory));
  auto buffer = [&](const char* name) { return plan->value_buffer[static_cast<size_t>(g.find_value(name))]; };
  // relu overwrites a (read last by relu); sigmoid may not overwrite b (sum reads it later);
  // tanh writes the graph output and abs reads it: neither is in the arena.
  REQUIRE(plan->in_place_values == 1);
  REQUIRE(buffer("b") == buffer("a"));
  REQUIRE(buffer("c") != buffer("b"));
  REQUIRE(plan->buffers.size() == 4);
  const BufferRequest& ab = plan->buffers[static_cast<size_t>(buffer("a"))];
  REQUIRE(ab.first_step == 0);
  REQUIRE(ab.last_step == 3);
  REQUIRE(plan->memory.lower_bound_bytes == 768);  // step 3 still holds b, c and d
  REQUIRE(plan->memory.arena_bytes == 768);
  REQUIRE(plan->intermediate_bytes == 1280);
  REQUIRE(plan->memory.sum_of_buffers_bytes == 1024);
}

TEST_CASE("graph memory: in place halves a conv-activation style peak", "[memory_plan]") {
  // a = Neg(x); b = Relu(a); y = GlobalAveragePool(b): the peak is a and b together.
  Graph g;
  const ValueId x = g.add_value("x", ValueType::of(DType::f32, {1, 4, 8, 8}));
  const ValueId a = unknown(g, "a"), b = unknown(g, "b"), y = unknown(g, "y");
  g.inputs = {x};
  g.outputs = {y};
  g.add_node(Node{"neg", OpKind::Neg, {}, {x}, {a}});
  g.add_node(Node{"relu", OpKind::Relu, {}, {a}, {b}});
  g.add_node(Node{"pool", OpKind::GlobalAveragePool, {}, {b}, {y}});
  g = inferred(std::move(g));
  auto plain = plan_graph_memory(g);
  REQUIRE(plain);
  REQUIRE(plain->memory.lower_bound_bytes == 2048);
  REQUIRE(plain->memory.arena_bytes == 2048);
  GraphMemoryOptions options;
  options.in_place = true;
  auto in_place = plan_graph_memory(g, options);
  REQUIRE(in_place);
  REQUIRE(in_place->memory.lower_bound_bytes == 1024);
  REQUIRE(in_place->memory.arena_bytes == 1024);
  REQUIRE(in_place->value_offset(a) == in_place->value_offset(b));
}

TEST_CASE("graph memory: symbolic dims must be bound, order must be topological", "[memory_plan]") {
  SECTION("an unbound batch is an error naming the value") {
    const Graph g = inferred(small_graph({Dim::named("batch"), 64}));
    auto plan = plan_graph_memory(g);
    REQUIRE_FALSE(plan);
    REQUIRE(plan.error().code == ErrorCode::invalid_argument);
    REQUIRE(plan.error().message.find("value 'a'") != std::string::npos);
  }
  SECTION("binding the batch gives concrete sizes") {
    const Graph g = inferred(small_graph({Dim::named("batch"), 64}), {{"batch", 2}});
    auto plan = plan_graph_memory(g);
    REQUIRE(plan);
    REQUIRE(plan->memory.arena_bytes == 3 * 512);
  }
  SECTION("a reader before its producer") {
    Graph g = inferred(small_graph());
    std::swap(g.nodes[2], g.nodes[3]);  // sum now reads c before sigmoid writes it
    auto plan = plan_graph_memory(g);
    REQUIRE_FALSE(plan);
    REQUIRE(plan.error().code == ErrorCode::invalid_graph);
    REQUIRE(plan.error().message.find("node 'sum' reads 'c'") != std::string::npos);
  }
}

TEST_CASE("graph memory: values folded at compile time are constants", "[memory_plan]") {
  const Graph g = inferred(small_graph());
  std::unordered_map<ValueId, Tensor> constants;
  constants[g.find_value("e")] = Tensor::zeros(DType::f32, {64});
  GraphMemoryOptions options;
  options.constant_values = &constants;
  auto plan = plan_graph_memory(g, options);
  REQUIRE(plan);
  REQUIRE(plan->buffers.size() == 4);
  REQUIRE(plan->value_buffer[static_cast<size_t>(g.find_value("e"))] == -1);
}
