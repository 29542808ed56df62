// The fast-path kernel contract. A KernelImpl is one implementation of one op for some dtypes
// on some ISA/device; the ordered list in registry.cpp is searched first to last and the first
// whose supports() says yes is instantiated (reference last, so every op runs somewhere).
// Instances are created once when a compiled plan is loaded (weights prepacked then) and run
// many times; run() does not allocate.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/op_def.h"

namespace kiln {

class Kernel;

// A backend-private memory layout (e.g. a oneDNN blocked format). Only kernels of that backend
// read it; the engine converts it to plain for everyone else with convert_to_plain().
class OpaqueLayout {
 public:
  virtual ~OpaqueLayout() = default;
  virtual std::string_view backend() const = 0;
  virtual size_t bytes() const = 0;
  virtual bool equals(const OpaqueLayout& other) const = 0;
  virtual std::string describe() const = 0;  // e.g. "nChw16c"
  // A kernel copying a value of this layout into plain layout (one input, one output).
  virtual Result<std::unique_ptr<Kernel>> make_to_plain(DType dtype, const Shape& shape) const = 0;
};

// Plain (dense row-major) unless `opaque` is set.
struct Layout {
  std::shared_ptr<const OpaqueLayout> opaque;

  bool plain() const { return opaque == nullptr; }
  bool operator==(const Layout& o) const {
    if (plain() || o.plain()) return plain() == o.plain();
    return opaque->backend() == o.opaque->backend() && opaque->equals(*o.opaque);
  }
  std::string describe() const { return plain() ? "plain" : opaque->describe(); }
};

struct ValueDesc {
  bool present = true;  // false for an absent optional input
  DType dtype = DType::f32;
  Shape shape;
  Layout layout;
  const Tensor* constant = nullptr;  // the value when it is a weight (known when the kernel is built)

  size_t bytes() const {
    return layout.plain() ? static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype) : layout.opaque->bytes();
  }
};

struct KernelBuild {
  OpKind op;
  const Attrs* attrs = nullptr;
  std::string node_name;
  std::vector<ValueDesc> inputs;
  std::vector<ValueDesc> outputs;  // dtype and shape from inference; layout plain on entry
  int threads = 1;
};

struct KernelArgs {
  std::vector<const void*> inputs;  // nullptr for absent inputs
  std::vector<void*> outputs;
  void* scratch = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // The layouts this kernel writes; the engine allocates outputs by these.
  virtual std::vector<Layout> output_layouts() const = 0;
  virtual size_t scratch_bytes() const { return 0; }
  // An input whose buffer output 0 may reuse (same bytes and layout), or -1. When the engine
  // gives both the same buffer, run() must still be correct (e.g. a fused residual the kernel
  // would otherwise copy into its output first is accumulated in place).
  virtual int in_place_input() const { return -1; }
  virtual Status run(const KernelArgs& args) = 0;
};

struct KernelImpl {
  std::string_view name;  // "onednn.conv", "cpu.eltwise_chain.avx512", "reference"
  // std::nullopt when this implementation can run `build`; otherwise why not (for --verbose).
  std::optional<std::string> (*supports)(const KernelBuild& build);
  Result<std::unique_ptr<Kernel>> (*create)(const KernelBuild& build);
};

}  // namespace kiln
