// kiln's own ElementwiseChain kernel (kernels/cpu/elementwise_chain.cpp) against the reference
// ElementwiseChain, on every ISA path this CPU has (AVX-512, portable; KILN_CPU_ISA caps the
// choice): ConvNeXt's bias + GELU chain, scale and shift, unary chains, both operand orders of the
// non-commutative ops, scalar / trailing-vector / per-channel / full-shape operands, sizes that
// are not multiples of 16 and larger than one thread's share, in place and not. Programs of exact
// ops must match the reference bit for bit (±0 and infinities included; any NaN for a NaN). The reference
// ElementwiseChain itself is checked against the unfused ops in passes_elementwise_chain_test.cpp.
// Malformed programs are refused by infer with messages naming the attribute.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/isa.h"
#include "kernels/elementwise_program.h"
#include "tests/support/isa_cap.h"
#include "tests/support/plan_builder.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const CpuIsa kPaths[] = {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::portable};

// Attributes of a program given as op names, args (two per op) and scalars.
Attrs program(std::vector<std::string> ops, std::vector<int64_t> args, std::vector<float> scalars = {}) {
  Attrs a;
  a.set("ops", std::move(ops));
  a.set("args", std::move(args));
  if (!scalars.empty()) a.set("scalars", std::move(scalars));
  return a;
}

// An operand for input slot `shape`: a graph input (a value known only when the plan runs) or a
// weight (a constant the kernel sees when it is built).
int operand(Builder& b, const Shape& shape, bool constant, float lo = -1.0f, float hi = 1.0f) {
  return constant ? b.constant(rand_tensor(shape, ++b.seed, lo, hi)) : b.input(shape, lo, hi);
}

struct Case {
  const char* what;
  Shape x;
  std::vector<Shape> operands;  // inputs 1..m
  Attrs program;
  float lo = -2.0f, hi = 2.0f;  // X's range
};

std::vector<Case> cases() {
  return {
      // ConvNeXt: Add(bias [C]) then GELU written out: x = X + b; x * (erf(x / √2) + 1) * 0.5.
      {"bias [384] + GELU on [1,56,56,384]", {1, 56, 56, 384}, {{384}},
       program({"add", "div", "erf", "add", "mul", "mul"}, {0, 1, 5, 2, 6, -1, 7, 3, 5, 8, 9, 4},
               {1.4142135f, 1.0f, 0.5f})},
      {"bias [37] + GELU, odd sizes", {3, 5, 37}, {{1, 1, 37}},
       program({"add", "div", "erf", "add", "mul", "mul"}, {0, 1, 5, 2, 6, -1, 7, 3, 5, 8, 9, 4},
               {1.4142135f, 1.0f, 0.5f})},
      // Layer scale then the residual: X * gamma[C,1,1] + R (NCHW: per-channel runs of H*W).
      {"per-channel scale + full residual", {1, 96, 13, 11}, {{96, 1, 1}, {1, 96, 13, 11}},
       program({"mul", "add"}, {0, 1, 3, 2})},
      {"scale and shift [1,C,1,1], batch 2", {2, 19, 7, 5}, {{1, 19, 1, 1}, {1, 19, 1, 1}},
       program({"mul", "add"}, {0, 1, 3, 2})},
      {"unary chain: relu, sqrt, log, exp, neg, abs, reciprocal, tanh, sigmoid", {1001}, {},
       program({"relu", "sqrt", "add", "log", "exp", "neg", "abs", "reciprocal", "tanh", "sigmoid"},
               {0, -1, 2, -1, 3, 1, 4, -1, 5, -1, 6, -1, 7, -1, 8, -1, 9, -1, 10, -1}, {1.0f})},
      // Both orders of sub and div, with a scalar, a vector and a full operand on either side.
      {"sub/div both orders: c - x, x - v, v / y, y / c", {4, 3, 50}, {{50}},
       program({"sub", "sub", "div", "div", "add"}, {2, 0, 3, 1, 1, 4, 5, 2, 6, 3}, {4.0f}), 0.5f, 2.0f},
      {"max/min/prelu/pow with operands either side", {2, 3, 4, 33}, {{3, 1, 1}, {2, 3, 4, 33}},
       program({"max", "min", "prelu", "pow", "sub", "prelu"}, {0, 1, 2, 4, 0, 3, 6, 3, 7, 5, 8, 1}, {2.0f})},
      {"general pow (x^1.5 on positive x), exp, erf", {777}, {},
       program({"pow", "exp", "erf", "add", "add"}, {0, 1, 0, -1, 0, -1, 2, 3, 5, 4}, {1.5f}), 0.1f, 3.0f},
      // A per-channel operand on a non-4-D shape and one whose runs straddle chunks.
      {"per-row operand [5,1] on [5,1031]", {5, 1031}, {{5, 1}}, program({"sub", "relu"}, {0, 1, 2, -1})},
      {"scalar input operand [1] and a sigmoid", {7, 9, 10}, {{1}}, program({"mul", "sigmoid"}, {0, 1, 2, -1})},
      {"program of scalars first: (2 * 3) + x", {65}, {}, program({"mul", "add"}, {1, 2, 3, 0}, {2.0f, 3.0f})},
  };
}

void run_case(const Case& t, CpuIsa isa, bool constant_operands, bool in_place) {
  Builder b;
  int x = b.input(t.x, t.lo, t.hi);
  if (in_place) x = b.op(OpKind::Abs, {}, {x});  // an intermediate that dies at the chain
  std::vector<int> in = {x};
  for (const Shape& s : t.operands) in.push_back(operand(b, s, constant_operands, 0.25f, 1.5f));
  b.output(b.op(OpKind::ElementwiseChain, t.program, in));
  const IsaCap cap(isa);
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.elementwise_chain." + std::string(cpu_isa_name(isa))) == 1);
  REQUIRE(engine->memory().in_place_steps == (in_place ? 1 : 0));
}

}  // namespace

TEST_CASE("the elementwise chain kernel matches the reference on every ISA path", "[cpu][elementwise_chain]") {
  for (CpuIsa isa : kPaths) {
    if (!cpu_isa_available(isa)) {
      WARN("this CPU has no " << cpu_isa_name(isa) << ": path not tested here");
      continue;
    }
    for (const Case& t : cases())
      for (bool constant_operands : {false, true})
        for (bool in_place : {false, true}) {
          INFO(cpu_isa_name(isa) << ": " << t.what << (constant_operands ? ", constant operands" : ", input operands")
                                 << (in_place ? ", in place" : ""));
          run_case(t, isa, constant_operands, in_place);
        }
  }
}

TEST_CASE("exact ops match the reference bit for bit, ±0, infinities and NaN included", "[cpu][elementwise_chain]") {
  constexpr float kInf = std::numeric_limits<float>::infinity(), kNaN = std::numeric_limits<float>::quiet_NaN();
  // X and Z hold every pairing of the special values with each other and with ordinary numbers.
  const std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -3.0f, kInf, -kInf, kNaN, 1e-40f, -1e-40f, 3e38f};
  std::vector<float> xs, zs;
  for (float a : special)
    for (float c : special) {
      xs.push_back(a);
      zs.push_back(c);
    }
  const int64_t n = static_cast<int64_t>(xs.size());
  const Attrs programs[] = {
      program({"max", "min", "max", "min"}, {0, 1, 0, 1, 1, 0, 1, 0}),  // max(x,z) min(x,z) max(z,x) min(z,x)
      program({"relu", "neg", "abs", "reciprocal", "sqrt"}, {0, -1, 2, -1, 3, -1, 0, -1, 1, -1}),
      program({"prelu", "prelu", "add", "sub", "mul", "div"}, {0, 1, 1, 0, 2, 3, 0, 1, 1, 0, 0, 1}),
      program({"pow", "max", "min", "add"}, {0, 2, 1, 3, 0, 4, 5, 6}, {2.0f, -0.0f, 0.0f}),  // x^2, clip-like
  };
  for (CpuIsa isa : kPaths) {
    if (!cpu_isa_available(isa)) continue;
    for (size_t p = 0; p < std::size(programs); ++p) {
      // Every instruction's result is the output once: a program cut after each instruction.
      auto names = *programs[p].get_strings("ops");
      auto args = *programs[p].get_ints("args");
      auto scalars = *programs[p].get_floats("scalars");
      for (size_t len = 1; len <= names.size(); ++len) {
        INFO(cpu_isa_name(isa) << ": program " << p << ", first " << len << " instructions");
        Builder b;
        const int x = b.input({n});
        const int z = b.input({n});
        b.inputs[0] = Tensor::from_values<float>({n}, xs);
        b.inputs[1] = Tensor::from_values<float>({n}, zs);
        const Attrs cut = program({names.begin(), names.begin() + static_cast<long>(len)},
                                  {args.begin(), args.begin() + static_cast<long>(2 * len)}, scalars);
        b.output(b.op(OpKind::ElementwiseChain, cut, {x, z}));
        const IsaCap cap(isa);
        auto engine = Engine::create(b.plan, {2, nullptr});
        REQUIRE(engine);
        REQUIRE(count_kernel(**engine, "cpu.elementwise_chain") == 1);
        auto got = (*engine)->run(b.inputs);
        auto want = execute_reference(b.plan, b.inputs);
        REQUIRE(got);
        REQUIRE(want);
        const float* g = got->at(0).data<float>();
        const float* w = want->outputs.at(0).data<float>();
        for (int64_t i = 0; i < n; ++i) {
          INFO("x = " << xs[static_cast<size_t>(i)] << ", z = " << zs[static_cast<size_t>(i)] << ": got " << g[i]
                      << ", reference " << w[i]);
          REQUIRE((std::memcmp(&g[i], &w[i], sizeof(float)) == 0 || (std::isnan(g[i]) && std::isnan(w[i]))));
        }
      }
    }
  }
}

TEST_CASE("operands the kernel cannot walk go to the reference kernel", "[cpu][elementwise_chain]") {
  // [2,1,5] on [2,3,5]: kept axes 0 and 2 are not one run, so neither fast path reads it.
  Builder b;
  const int x = b.input({2, 3, 5});
  b.output(b.op(OpKind::ElementwiseChain, program({"add", "relu"}, {0, 1, 2, -1}), {x, b.weight({2, 1, 5})}));
  auto engine = check(b);
  REQUIRE(count_kernel(*engine, "cpu.elementwise_chain") == 0);
  REQUIRE(count_kernel(*engine, "reference") == 1);
}

TEST_CASE("infer refuses malformed programs and names the attribute", "[cpu][elementwise_chain]") {
  const ValueType x = ValueType::of(DType::f32, {2, 3, 4});
  const ValueType vec = ValueType::of(DType::f32, {4});
  const ValueType wide = ValueType::of(DType::f32, {5, 3, 4});
  const ValueType ints = ValueType::of(DType::i32, {4});
  struct Bad {
    const char* what;
    Attrs attrs;
    std::vector<const ValueType*> inputs;
    const char* message;
  };
  const Bad bad[] = {
      {"an unknown op", program({"add", "cube"}, {0, 1, 2, -1}), {&x, &vec}, "attribute 'ops': unknown op 'cube' at instruction 1"},
      {"a register defined later", program({"add", "mul"}, {0, 3, 2, 2}), {&x, &vec},
       "attribute 'args': instruction 0 (add) reads register 3 but only registers 0..1 are defined before it"},
      {"a negative register", program({"neg"}, {-1, -1}), {&x}, "attribute 'args': instruction 0 (neg) reads register -1"},
      {"a unary op with a second register", program({"erf"}, {0, 0}), {&x},
       "attribute 'args': instruction 0 (erf) is unary, so its second register must be -1"},
      {"args of the wrong length", program({"add", "relu"}, {0, 1, 2}), {&x, &vec},
       "attribute 'args' must hold two registers per instruction: 2 ops need 4 values, got 3"},
      {"no instructions", program({}, {}), {&x}, "attribute 'ops' is empty"},
      {"an operand that widens the output", program({"add"}, {0, 1}), {&x, &wide},
       "input 1 has shape [5,3,4], which does not broadcast to X's shape [2,3,4]"},
      {"an int32 operand", program({"add"}, {0, 1}), {&x, &ints}, "input 1"},
  };
  for (const Bad& t : bad) {
    INFO(t.what);
    InferContext ctx;
    ctx.attrs = &t.attrs;
    ctx.inputs = t.inputs;
    ctx.values.assign(t.inputs.size(), nullptr);
    const Status s = op_def(OpKind::ElementwiseChain).infer(ctx);
    REQUIRE_FALSE(s);
    INFO(s.message());
    REQUIRE(s.message().find(t.message) != std::string::npos);
  }
  // The same program well formed is accepted, and the output keeps X's shape.
  InferContext ok;
  const Attrs good = program({"add", "relu"}, {0, 1, 2, -1});
  ok.attrs = &good;
  ok.inputs = {&x, &vec};
  ok.values = {nullptr, nullptr};
  REQUIRE(op_def(OpKind::ElementwiseChain).infer(ok));
  REQUIRE(ok.outputs.at(0).shape == x.shape);
}

TEST_CASE("program attributes round-trip and names match ops", "[cpu][elementwise_chain]") {
  for (size_t i = 0; i < kChainOpCount; ++i) {
    const auto op = static_cast<ChainOp>(i);
    REQUIRE(chain_op_from_name(chain_op_name(op)) == op);
  }
  ElementwiseProgram p;
  p.operands = 1;
  p.scalars = {0.5f};
  p.code = {{ChainOp::add, 0, 1}, {ChainOp::erf, 3, -1}, {ChainOp::mul, 4, 2}};
  Attrs a;
  elementwise_program_to_attrs(p, a);
  auto back = elementwise_program_from_attrs(a, 2);
  REQUIRE(back);
  REQUIRE(back->scalars == p.scalars);
  REQUIRE(back->code.size() == 3);
  REQUIRE(back->code[1].op == ChainOp::erf);
  REQUIRE(back->code[2].a == 4);
  REQUIRE(back->output_register() == 5);
}
