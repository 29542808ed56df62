// A kernel whose output holds its input's bytes unchanged, in the layout it is given: the views of
// kernels/cpu/view.cpp (plain, reshaped) and cpu/transpose_view.cpp (NCHW <-> NHWC by layout). It offers
// to run in place, so the engine gives the output the input's buffer wherever the input dies here and the
// step costs nothing; otherwise (the input is read later, or is a graph input or a weight) it is one memcpy.
#pragma once

#include <cstring>

#include "kernels/kernel.h"

namespace kiln::cpu {

class ByteViewKernel final : public Kernel {
 public:
  ByteViewKernel(size_t bytes, Layout out) : bytes_(bytes), out_(std::move(out)) {}
  std::vector<Layout> output_layouts() const override { return {out_}; }
  int in_place_input() const override { return 0; }
  Status run(const KernelArgs& args) override {
    if (bytes_ && args.outputs[0] != args.inputs[0]) std::memcpy(args.outputs[0], args.inputs[0], bytes_);
    return Status::ok();
  }

 private:
  size_t bytes_;
  Layout out_;
};

}  // namespace kiln::cpu
