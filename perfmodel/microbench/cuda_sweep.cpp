#include "perfmodel/microbench/cuda_sweep.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "kernels/device/device_plugin.h"
#include "perfmodel/microbench/device_timing.h"
#include "perfmodel/microbench/kernel_sweep.h"

namespace kiln::perf {
namespace {

// A batch-64 copy of a batch-32 shape is swept when its tensors (fp32) stay under this: the host
// builds, fills and copies them for every point, which is most of a GPU point's cost.
constexpr double kMaxBatch64Bytes = 256.0 * (1 << 20);

double element_bytes(DevicePrecision p) { return p == DevicePrecision::fp16 || p == DevicePrecision::bf16 ? 2 : 4; }

std::string size_name(int64_t bytes) {
  return bytes >= (int64_t{1} << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

DeviceEngineOptions engine_options(const CudaBenchDevice& device, DevicePrecision precision) {
  DeviceEngineOptions options;
  options.precision = precision;
  options.device_index = device.device_index;
  return options;
}

// Shape inference, the CUDA pipeline's fusions, lowering: what `kiln compile --device cuda` does.
Result<Plan> compile_for_cuda(Graph g, const std::string& what) {
  PassRunOptions options;
  options.check_numerics = false;
  auto records = run_passes(g, cuda_pipeline(), options);
  if (!records) return records.status().with_context(what + ": compiling: ");
  return graph_to_plan(g);
}

Tensor filled(Shape shape, float value) {
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  std::fill(t.data<float>(), t.data<float>() + t.numel(), value);
  return t;
}

// One shape's plan and inputs, shared by its precisions' points (measured one after the other):
// building a graph with millions of random weights and compiling it is most of a point's host time.
struct CompiledShape {
  std::string key;
  Plan plan;
  std::vector<Tensor> inputs;
};

Status compile_shape(const SweepShape& shape, CompiledShape& out) {
  const std::string key = sweep_key(shape);
  if (out.key == key) return Status::ok();
  out.key.clear();
  KILN_ASSIGN(plan, cuda_sweep_plan(shape, &out.inputs));
  out.plan = std::move(plan);
  out.key = key;
  return Status::ok();
}

// A one-op graph over graph inputs: `inputs` shapes in, `op` out (optionally one constant input last).
Graph one_op_graph(const std::string& name, OpKind op, const std::vector<Shape>& inputs, const Tensor* constant) {
  Graph g;
  g.name = name;
  std::vector<ValueId> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueId id = g.add_value("x" + std::to_string(i), ValueType::of(DType::f32, sym_shape_from(inputs[i])));
    g.inputs.push_back(id);
    args.push_back(id);
  }
  if (constant) {
    const ValueId id = g.add_value("w", ValueType::of(DType::f32, sym_shape_from(constant->shape())));
    g.initializers[id] = *constant;
    args.push_back(id);
  }
  const ValueId out = g.add_value("y", ValueType::unranked(DType::f32));
  g.add_node(Node{name, op, {}, std::move(args), {out}});
  g.outputs.push_back(out);
  return g;
}

bool every_step(const EngineStep&) { return true; }

int64_t bandwidth_planes(int64_t bytes) { return bytes / 12 / 1024; }  // [1, planes, 32, 32] float32, three tensors

}  // namespace

Result<Plan> cuda_sweep_plan(const SweepShape& shape, std::vector<Tensor>* inputs) {
  Graph g = sweep_graph(shape);
  if (inputs) {
    inputs->clear();
    uint32_t seed = 11;
    for (ValueId in : g.inputs) inputs->push_back(sweep_random_tensor(sym_shape_concrete(g.value(in).type.shape), seed++));
  }
  return compile_for_cuda(std::move(g), sweep_key(shape));
}

Result<Plan> cuda_peak_plan(int64_t size) {
  // Small non-zero values: no denormals, nothing a library could shortcut, no fp16 overflow.
  const Tensor weights = filled({size, size}, 0.01f);
  return compile_for_cuda(one_op_graph("matmul", OpKind::MatMul, {Shape{size, size}}, &weights), "peak matmul");
}

Result<Plan> cuda_bandwidth_plan(int64_t bytes) {
  const Shape shape{1, bandwidth_planes(bytes), 32, 32};
  return compile_for_cuda(one_op_graph("add", OpKind::Add, {shape, shape}, nullptr), "bandwidth add");
}

Result<Plan> cuda_host_link_plan(int64_t batch) {
  return compile_for_cuda(one_op_graph("host_link", OpKind::GlobalAveragePool, {Shape{batch, 3, 224, 224}}, nullptr), "host link");
}

Result<CudaBenchDevice> cuda_bench_device_open(int device_index) {
  KILN_ASSIGN(backend, cuda_backend_open(device_index));
  CudaBenchDevice device;
  device.backend = backend;
  device.device_index = device_index;
  device.probe = backend->probe(device_index);
  device.fingerprint = fingerprint_cuda(device.probe);
  return device;
}

std::string cuda_precision_dtype(DevicePrecision precision) {
  switch (precision) {
    case DevicePrecision::fp32: return "f32";
    case DevicePrecision::tf32: return "tf32";
    case DevicePrecision::fp16: return "f16";
    case DevicePrecision::bf16: return "bf16";
  }
  return "f32";
}

std::vector<SweepShape> cuda_sweep_shapes(bool quick) {
  std::vector<SweepShape> grid = sweep_grid(quick);
  // Fusions of the CPU pipeline, not the GPU's.
  std::erase_if(grid, [](const SweepShape& s) { return s.op == SweepOp::depth_first || s.op == SweepOp::concat_affine; });
  // A GPU takes larger batches in its stride: batch 64 beside the grid's 1/8/32 where cheap.
  if (!quick) {
    const size_t n = grid.size();
    for (size_t i = 0; i < n; ++i) {
      SweepShape s = grid[i];
      if (s.op == SweepOp::gemm || s.batch != 32) continue;
      s.batch = 64;
      if (sweep_bytes(s, 4) <= kMaxBatch64Bytes) grid.push_back(s);
    }
    // And the work a core's cap leaves out: layers a GPU runs at batch 64 with up to 30 GMACs.
    std::set<std::string> keys;
    for (const SweepShape& s : grid) keys.insert(sweep_key(s));
    for (const SweepShape& s : sweep_device_large_grid())
      if (sweep_bytes(s, 4) <= kMaxBatch64Bytes && keys.insert(sweep_key(s)).second) grid.push_back(s);
  }
  // Round-robin over the ops (each in grid order, its batch-64 copies and large points last): a sweep stopped by a
  // time limit still has points of every op.
  std::map<SweepOp, std::vector<SweepShape>> by_op;
  for (const SweepShape& s : grid) by_op[s.op].push_back(s);
  std::vector<SweepShape> out;
  for (size_t round = 0; out.size() < grid.size(); ++round)
    for (const auto& [op, shapes] : by_op)
      if (round < shapes.size()) out.push_back(shapes[round]);
  return out;
}

std::vector<BenchPoint> cuda_sweep_points(const CudaBenchDevice& device, const std::vector<DevicePrecision>& precisions,
                                          bool quick) {
  DevicePointTiming timing;
  if (quick) timing = {1, 3, 5, 2, 0.02};
  auto cache = std::make_shared<CompiledShape>();
  DeviceBackend* backend = device.backend;
  std::vector<BenchPoint> points;
  for (const SweepShape& shape : cuda_sweep_shapes(quick))
    for (DevicePrecision precision : precisions) {
      BenchPoint p;
      p.record = sweep_record(shape, cuda_precision_dtype(precision), 1, element_bytes(precision));
      p.record.backend = "cuda";
      const DeviceEngineOptions options = engine_options(device, precision);
      p.measure = [cache, shape, backend, options, timing](Measurement& m) -> Status {
        if (Status compiled = compile_shape(shape, *cache); !compiled) return compiled.with_context(m.dtype + " ");
        return device_point_measure(*backend, cache->plan, cache->inputs, options, sweep_is_op_step, timing, m);
      };
      points.push_back(std::move(p));
    }
  return points;
}

std::vector<BenchPoint> cuda_peak_points(const CudaBenchDevice& device, const std::vector<DevicePrecision>& precisions,
                                         bool quick) {
  // Large enough that cuBLASLt's tiles fill every SM many times over (a few ms in fp32 on an H100).
  const int64_t size = quick ? 1024 : 4096;
  DevicePointTiming timing;
  if (quick) timing = {1, 3, 5, 2, 0.02};
  DeviceBackend* backend = device.backend;
  std::vector<BenchPoint> points;
  for (DevicePrecision precision : precisions) {
    BenchPoint p;
    Measurement& m = p.record;
    m.kind = kKindPeak;
    m.op = "matmul";
    m.key = "matmul " + std::to_string(size) + "x" + std::to_string(size) + "x" + std::to_string(size);
    m.dtype = cuda_precision_dtype(precision);
    m.threads = 1;
    m.batch = 1;
    m.m = m.n = m.k = size;
    m.macs = static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
    m.bytes = static_cast<double>(size * size) * 3 * element_bytes(precision);
    m.backend = "cuda";
    const DeviceEngineOptions options = engine_options(device, precision);
    p.measure = [size, backend, options, timing](Measurement& out) -> Status {
      KILN_ASSIGN(plan, cuda_peak_plan(size));
      return device_point_measure(*backend, plan, {filled({size, size}, 0.01f)}, options, every_step, timing, out);
    };
    points.push_back(std::move(p));
  }
  return points;
}

std::vector<BenchPoint> cuda_bandwidth_points(const CudaBenchDevice& device, bool quick) {
  // Bytes moved per pass (two inputs read, one output written): from L2-resident to 5x the
  // largest L2 (50 MB on an H100), where the last is DRAM's streaming bandwidth.
  std::vector<int64_t> sizes = quick ? std::vector<int64_t>{1 << 20, 16 << 20}
                                     : std::vector<int64_t>{1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20};
  DevicePointTiming timing;
  if (quick) timing = {1, 3, 5, 2, 0.02};
  DeviceBackend* backend = device.backend;
  const DeviceEngineOptions options = engine_options(device, DevicePrecision::fp32);
  std::vector<BenchPoint> points;
  for (int64_t bytes : sizes) {
    const int64_t planes = bandwidth_planes(bytes);
    BenchPoint p;
    Measurement& m = p.record;
    m.kind = kKindBandwidth;
    m.op = "add";
    m.key = "add " + size_name(bytes);
    m.dtype = "f32";
    m.threads = 1;
    m.working_set_bytes = planes * 1024 * 12;
    m.bytes = static_cast<double>(m.working_set_bytes);
    m.backend = "cuda";
    p.measure = [bytes, planes, backend, options, timing](Measurement& out) -> Status {
      const Shape shape{1, planes, 32, 32};
      KILN_ASSIGN(plan, cuda_bandwidth_plan(bytes));
      KILN_TRY(device_point_measure(*backend, plan, {Tensor::zeros(DType::f32, shape), Tensor::zeros(DType::f32, shape)}, options,
                                    every_step, timing, out));
      out.throughput = static_cast<double>(out.working_set_bytes) / (out.median_ms * 1e6);  // GB/s
      return Status::ok();
    };
    points.push_back(std::move(p));
  }
  for (int64_t batch : quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 8, 64}) {
    BenchPoint p;
    Measurement& m = p.record;
    m.kind = kKindHostLink;
    m.op = "global_avgpool";
    m.key = "host_link b" + std::to_string(batch);
    m.dtype = "f32";
    m.threads = 1;
    m.batch = batch;
    m.in_c = m.out_c = 3;
    m.in_h = m.in_w = 224;
    m.out_h = m.out_w = 1;
    m.bytes = 4.0 * static_cast<double>(batch) * (3 * 224 * 224 + 3);
    m.backend = "cuda";
    p.measure = [batch, backend, options, timing](Measurement& out) -> Status {
      KILN_ASSIGN(plan, cuda_host_link_plan(batch));
      return device_host_link_measure(*backend, plan, {filled({batch, 3, 224, 224}, 0.5f)}, options, timing, out);
    };
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace kiln::perf
