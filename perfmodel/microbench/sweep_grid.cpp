#include "perfmodel/microbench/sweep_grid.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "perfmodel/measurement.h"

namespace kiln::perf {
namespace {

constexpr uint32_t kGridSeed = 20261124;  // fixed: every machine measures the same points

// Work caps per point (multiply-accumulates), so one point takes at most tens of milliseconds on
// one core and the grid's small end still has enough work to time.
constexpr double kMaxMacs = 1.2e9;
constexpr double kMinMacs = 2e5;
// A device's large-work points: above twice a core's cap (the batch-64 copies of capped batch-32
// shapes reach it), up to the work of the largest layers models run at batch 64 (a 3x3 conv of
// 64 channels at 56x56 is 7.4 GMACs there).
constexpr double kMaxDeviceMacs = 3e10;
constexpr int64_t kDeviceBatch = 64;

const std::vector<int64_t> kChannels = {16, 32, 64, 128, 256, 512, 1024, 2048};
const std::vector<int64_t> kSpatial = {7, 14, 28, 56, 112};
const std::vector<int64_t> kBatches = {1, 8, 32};
constexpr size_t kZooGemmPoints = 48;  // as many as the gemm grid's
constexpr size_t kExtraMaxPoolPoints = 24;  // three per channel count of kChannels
constexpr size_t kLayerNormPoints = 30;

// Takes `count` shapes from `all`, round-robin over the strata `stratum` names (each shuffled
// with the grid seed), so every kernel/stride/batch combination appears before any repeats.
template <typename StratumFn>
std::vector<SweepShape> sample(std::vector<SweepShape> all, size_t count, StratumFn stratum) {
  std::mt19937 rng(kGridSeed);
  std::map<std::string, std::vector<SweepShape>> strata;
  for (const SweepShape& s : all) strata[stratum(s)].push_back(s);
  for (auto& [name, shapes] : strata) std::shuffle(shapes.begin(), shapes.end(), rng);
  std::vector<SweepShape> out;
  for (size_t round = 0; out.size() < count; ++round) {
    bool any = false;
    for (auto& [name, shapes] : strata)
      if (round < shapes.size() && out.size() < count) {
        out.push_back(shapes[round]);
        any = true;
      }
    if (!any) break;
  }
  return out;
}

// A pool's, Add's or Concat's elements: enough to time (1e4) and at most 5e7 (200 MB of float32).
bool elements_in_budget(double elements) { return elements >= 1e4 && elements <= 5e7; }

bool in_budget(const SweepShape& s) {
  const double macs = sweep_macs(s);
  return macs >= kMinMacs && macs <= kMaxMacs;
}

bool in_device_budget(const SweepShape& s) {
  const double macs = sweep_macs(s);
  return macs > 2 * kMaxMacs && macs <= kMaxDeviceMacs;
}

using ShapeFilter = bool (*)(const SweepShape&);

std::vector<SweepShape> conv_candidates(const std::vector<int64_t>& batches = kBatches, ShapeFilter keep = in_budget) {
  std::vector<SweepShape> out;
  for (int64_t k : {1, 3, 5, 7})
    for (int64_t stride : {1, 2})
      for (int64_t b : batches)
        for (int64_t c : kChannels)
          for (int64_t ratio_x2 : {1, 2, 4, 8})  // out = in x {0.5, 1, 2, 4}
            for (int64_t hw : kSpatial) {
              const int64_t out_c = c * ratio_x2 / 2;
              if (out_c < 16 || out_c > 2048) continue;
              // Large kernels appear on few channels in real networks (stems, early stages).
              if (k >= 5 && c > 256) continue;
              if (hw == 7 && stride == 2) continue;
              SweepShape s{SweepOp::conv, b, c, out_c, hw, hw, k, stride, k / 2};
              if (keep(s)) out.push_back(s);
            }
  return out;
}

std::vector<SweepShape> depthwise_candidates() {
  std::vector<SweepShape> out;
  for (int64_t k : {3, 5, 7})
    for (int64_t stride : {1, 2})
      for (int64_t b : kBatches)
        for (int64_t c : {16, 32, 64, 128, 256, 512, 1024})
          for (int64_t hw : kSpatial) {
            if (hw == 7 && stride == 2) continue;
            SweepShape s{SweepOp::depthwise_conv, b, c, c, hw, hw, k, stride, k / 2};
            if (in_budget(s)) out.push_back(s);
          }
  return out;
}

// Inverted-residual layers with channel counts off the power-of-two grid: multiples of 8 that are
// not multiples of 16 (and 16 itself), expanded and projected x6 by 1x1 convs, and the depthwise
// 3x3/5x5 on the expanded channels. oneDNN computes channels in 16-lane blocks, so a 24-channel
// output costs what 32 do, and thin 1x1 convs run far below the grid's GMAC/s: the power-of-two
// grid priced such layers 20-60% too cheap (docs/perfmodel-next.md, 2026-11-27).
std::vector<SweepShape> thin_channel_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches)
    for (int64_t c : {16, 24, 40, 56, 72, 88, 104, 120})
      for (int64_t hw : kSpatial) {
        const int64_t wide = 6 * c;
        for (const SweepShape& s : {SweepShape{SweepOp::conv, b, c, wide, hw, hw, 1, 1, 0},
                                    SweepShape{SweepOp::conv, b, wide, c, hw, hw, 1, 1, 0}})
          if (in_budget(s)) out.push_back(s);
        for (int64_t k : {3, 5})
          for (int64_t stride : {1, 2}) {
            if (hw == 7 && stride == 2) continue;
            const SweepShape s{SweepOp::depthwise_conv, b, wide, wide, hw, hw, k, stride, k / 2};
            if (in_budget(s)) out.push_back(s);
          }
      }
  return out;
}

// Real layers: the distinct convolutions of torchvision classifiers outside the evaluation set
// (MnasNet, MobileNetV3, RegNet, other ShuffleNetV2 widths, SqueezeNet 1.0; zoo_layers.inc), at each
// grid batch. nn-Meter's remedy for interpolation error: sample the sweep from the distribution of
// the layers models have, not only from a grid. 46 of the evaluation models' 237 distinct layers
// are among them (kernel shapes only; no evaluation model is timed for the fit).
std::vector<SweepShape> zoo_candidates(const std::vector<int64_t>& batches = kBatches, ShapeFilter keep = in_budget) {
  struct Layer {
    SweepOp op;
    int64_t in_c, out_c, hw, kernel, stride;
  };
  static const Layer kLayers[] = {
#include "perfmodel/microbench/zoo_layers.inc"
  };
  std::vector<SweepShape> out;
  for (int64_t b : batches)
    for (const Layer& l : kLayers) {
      // Stems (3 input channels, 224x224) are the border grid's: they read the model's plain input.
      if (l.in_c < 16 || l.hw > 112) continue;
      const SweepShape s{l.op, b, l.in_c, l.out_c, l.hw, l.hw, l.kernel, l.stride, l.kernel / 2};
      if (keep(s)) out.push_back(s);
    }
  return out;
}

std::vector<SweepShape> gemm_candidates() {
  std::vector<SweepShape> out;
  // M up to 4096: MatMuls over pixels or tokens (ConvNeXt's MLPs have M = batch x 56 x 56).
  for (int64_t m : {1, 8, 32, 128, 1024, 4096})
    for (int64_t k : {64, 256, 512, 1024, 2048, 4096})
      for (int64_t n : {64, 256, 512, 1000, 2048, 4096}) {
        SweepShape s{SweepOp::gemm, m};
        s.m = m;
        s.k = k;
        s.n = n;
        if (sweep_macs(s) <= kMaxMacs) out.push_back(s);
      }
  return out;
}

// Real fully connected layers: the nn.Linear layers of torchvision models outside the evaluation
// set (the classifiers of the convolution catalog; ViT-B/16 and /32, Swin-T and -S: their MLPs;
// zoo_gemm_layers.inc), at each grid batch (M = batch x tokens). Their widths (96..3072, 1000, 1280)
// are what models use; the grid above has powers of two, whose leading dimensions alias in the
// caches (128x512->4096 ran at 22 GMAC/s on the AVX2 EPYC where ConvNeXt-T's 196x384->1536 runs
// at 35). Swin's MLP widths and token counts are ConvNeXt-T's (both stage 96..768 channels at
// 56..7 pixels): that model's MatMuls are in the catalog by shape, as 46 of the evaluation
// models' convolutions are in the convolution catalog.
std::vector<SweepShape> zoo_gemm_candidates(const std::vector<int64_t>& batches = kBatches, ShapeFilter keep = in_budget) {
  struct Layer {
    int64_t tokens, k, n;
  };
  static const Layer kLayers[] = {
#include "perfmodel/microbench/zoo_gemm_layers.inc"
  };
  std::vector<SweepShape> out;
  for (int64_t b : batches)
    for (const Layer& l : kLayers) {
      SweepShape s{SweepOp::gemm, b * l.tokens};
      s.m = b * l.tokens;
      s.k = l.k;
      s.n = l.n;
      if (keep(s)) out.push_back(s);
    }
  return out;
}

std::vector<SweepShape> pool_candidates(SweepOp op) {
  std::vector<SweepShape> out;
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> windows =  // kernel, stride, pad
      op == SweepOp::maxpool ? std::vector<std::tuple<int64_t, int64_t, int64_t>>{{2, 2, 0}, {3, 2, 1}, {3, 1, 1}}
                             : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{2, 2, 0}, {3, 1, 1}, {3, 2, 1}};
  for (const auto& [k, stride, pad] : op == SweepOp::global_avgpool
                                          ? std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 1, 0}}
                                          : windows)
    for (int64_t b : kBatches)
      for (int64_t c : kChannels)
        for (int64_t hw : kSpatial) {
          if (op != SweepOp::global_avgpool && hw == 7) continue;
          SweepShape s{op, b, c, c, hw, hw, k, stride, pad};
          if (elements_in_budget(static_cast<double>(b * c * hw * hw))) out.push_back(s);
        }
  return out;
}

std::vector<SweepShape> add_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches)
    for (int64_t c : kChannels)
      for (int64_t hw : kSpatial) {
        SweepShape s{SweepOp::add, b, c, c, hw, hw};
        if (elements_in_budget(static_cast<double>(b * c * hw * hw))) out.push_back(s);
      }
  return out;
}

// Channel concatenation of two equal inputs (inception blocks, fire modules, ShuffleNet), each
// from a producer conv so that it arrives in the layout a previous layer leaves.
std::vector<SweepShape> concat_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches)
    for (int64_t c : kChannels)
      for (int64_t hw : kSpatial) {
        SweepShape s{SweepOp::concat, b, c, 2 * c, hw, hw};
        if (elements_in_budget(static_cast<double>(b * 2 * c * hw * hw))) out.push_back(s);
      }
  return out;
}

std::vector<SweepShape> eltwise_candidates() {
  std::vector<SweepShape> out;
  for (int64_t ops : {2, 5})
    for (int64_t b : kBatches)
      for (int64_t c : kChannels)
        for (int64_t hw : kSpatial) {
          SweepShape s{SweepOp::eltwise, b, c, c, hw, hw, ops};
          const double elems = static_cast<double>(b * c * hw * hw);
          if (elems >= 1e4 && elems <= 2e7) out.push_back(s);
        }
  return out;
}

// LayerNorm over the channels of NHWC pixels: transformer and ConvNeXt widths (64..1024, 96..768) at 7..56
// pixels a side, up to 2e7 elements (a point takes milliseconds).
std::vector<SweepShape> layernorm_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches)
    for (int64_t c : {64, 96, 128, 192, 256, 384, 512, 768, 1024})
      for (int64_t hw : {7, 14, 28, 56}) {
        SweepShape s{SweepOp::layernorm, b, c, c, hw, hw};
        const double elems = static_cast<double>(b * c * hw * hw);
        if (elems >= 1e4 && elems <= 2e7) out.push_back(s);
      }
  return out;
}

// The first convolution of an image model, reading its 3 channels (in the layout the convs share; a plain input's
// conversion is the border points' part): 3x3 stride 2 to the widths stems have (16 to 64), and ResNet's 7x7 to
// 64, at 224x224 and every batch within the work cap.
std::vector<SweepShape> stem_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches) {
    for (int64_t c : {16, 24, 32, 48, 64})
      if (SweepShape s{SweepOp::conv, b, 3, c, 224, 224, 3, 2, 1}; in_budget(s)) out.push_back(s);
    if (SweepShape s{SweepOp::conv, b, 3, 64, 224, 224, 7, 2, 3}; in_budget(s)) out.push_back(s);
  }
  return out;
}

// The max pools of other models (the catalog of zoo_layers.inc, bench/zoo_layers.py --pool), at every batch.
// A pool on int8 codes runs at a pace that depends on its channel count (cpu.max_pool_codes works along
// channels), which the grid's 15 points, spread over 16-2048 channels, left to the neighbours of other widths.
std::vector<SweepShape> zoo_pool_candidates() {
  struct Layer {
    int64_t channels, hw, kernel, stride, pad;
  };
  static const Layer kLayers[] = {
#include "perfmodel/microbench/zoo_pool_layers.inc"
  };
  std::vector<SweepShape> out;
  for (int64_t b : kBatches)
    for (const Layer& l : kLayers) {
      const SweepShape s{SweepOp::maxpool, b, l.channels, l.channels, l.hw, l.hw, l.kernel, l.stride, l.pad};
      if (elements_in_budget(static_cast<double>(b * l.channels * l.hw * l.hw))) out.push_back(s);
    }
  return out;
}

std::string channels_stratum(const SweepShape& s) { return std::to_string(s.in_c); }

// A border point's input, which a conversion streams: past ~50 MB of float32 a point would take seconds.
bool border_input_in_budget(const SweepShape& s) { return static_cast<double>(s.batch * s.in_c * s.h * s.w) <= 1.3e7; }

// Conv and depthwise conv reading a plain float32 input: 1x1 and 3x3 over the channel range, and
// stems (3 channels, 3x3/7x7, stride 2, up to 224x224).
std::vector<SweepShape> border_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches) {
    for (int64_t hw : {112, 224})
      for (int64_t k : {3, 7}) {
        SweepShape s{SweepOp::conv, b, 3, k == 7 ? 64 : 32, hw, hw, k, 2, k / 2};
        s.plain_input = true;
        if (in_budget(s)) out.push_back(s);
      }
    for (int64_t c : {16, 32, 64, 128, 256, 512, 1024})
      for (int64_t hw : kSpatial) {
        for (int64_t k : {1, 3}) {
          SweepShape s{SweepOp::conv, b, c, c, hw, hw, k, 1, k / 2};
          s.plain_input = true;
          if (in_budget(s)) out.push_back(s);
        }
        SweepShape d{SweepOp::depthwise_conv, b, c, c, hw, hw, 3, 1, 1};
        d.plain_input = true;
        if (in_budget(d)) out.push_back(d);
      }
  }
  for (int64_t b : kBatches)
    for (int64_t c : {32, 64, 128, 256, 512, 1024})
      for (int64_t hw : {7, 14, 28, 56})
        for (int64_t k : {1, 3}) {
          SweepShape s{SweepOp::conv, b, c, k == 1 ? c / 2 : c / 4, hw, hw, k, 1, k / 2};
          s.float_input = true;
          if (in_budget(s)) out.push_back(s);
        }
  for (int64_t b : kBatches)
    for (int64_t c : {16, 32, 64, 128, 256, 512})
      for (int64_t hw : {7, 14, 28, 56, 112}) {
        for (int64_t k : {1, 3}) {
          SweepShape s{SweepOp::conv, b, c, k == 1 ? c * 4 : c, hw, hw, k, 1, k / 2};
          s.silu = true;
          if (in_budget(s)) out.push_back(s);
        }
        SweepShape d{SweepOp::depthwise_conv, b, c, c, hw, hw, 3, 1, 1};
        d.silu = true;
        if (in_budget(d)) out.push_back(d);
      }
  std::erase_if(out, [](const SweepShape& s) { return !border_input_in_budget(s); });
  return out;
}

// Convs with a fused residual sum: a ResNet bottleneck's 1x1 expansion (x4), a basic block's 3x3
// (same channels), a MobileNetV2 projection (1x1, /6), at the spatial sizes such blocks run at.
std::vector<SweepShape> residual_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches)
    for (int64_t c : {16, 24, 32, 64, 96, 128, 256, 512})
      for (int64_t hw : {7, 14, 28, 56}) {
        for (const SweepShape& base : {SweepShape{SweepOp::conv, b, c, 4 * c, hw, hw, 1, 1, 0}, SweepShape{SweepOp::conv, b, c, c, hw, hw, 3, 1, 1},
                                       SweepShape{SweepOp::conv, b, 6 * c, c, hw, hw, 1, 1, 0}}) {
          SweepShape s = base;
          s.residual = true;
          if (s.out_c >= 16 && s.out_c <= 2048 && in_budget(s)) out.push_back(s);
        }
      }
  return out;
}

// int8 layers reading s8: a MobileNetV2 expansion (1x1, x6) after a linear bottleneck, an
// EfficientNet 1x1 or a ShuffleNetV2 branch after a linear depthwise conv (same channels), a 3x3,
// and depthwise 3x3 convolutions after a SiLU.
std::vector<SweepShape> signed_input_candidates() {
  std::vector<SweepShape> out;
  for (int64_t b : kBatches)
    for (int64_t c : {16, 24, 32, 64, 96, 128, 256, 512})
      for (int64_t hw : {7, 14, 28, 56, 112})
        for (const SweepShape& base : {SweepShape{SweepOp::conv, b, c, 6 * c, hw, hw, 1, 1, 0}, SweepShape{SweepOp::conv, b, c, c, hw, hw, 1, 1, 0},
                                       SweepShape{SweepOp::conv, b, c, c, hw, hw, 3, 1, 1}, SweepShape{SweepOp::depthwise_conv, b, c, c, hw, hw, 3, 1, 1}}) {
          SweepShape s = base;
          s.signed_input = true;
          if (s.out_c <= 2048 && in_budget(s) && border_input_in_budget(s)) out.push_back(s);
        }
  return out;
}

// MobileNet-style blocks that fuse_depth_first fuses (its own thresholds, so that every point is
// the fused kernel): at most 32 channels outside; the intermediate past the caches (>= 256 KB an
// image and >= 8 MB over the batch; an expansion without projection >= 1 MB an image).
// Full blocks expand x6; blocks without expansion have 32..144 channels in the middle.
std::vector<SweepShape> depth_first_candidates() {
  std::vector<SweepShape> out;
  const auto keep = [&](const SweepShape& s) {
    const int64_t out_hw = sweep_out_h(s) * sweep_out_w(s);
    // The fused intermediates: after the expansion (input plane), after the depthwise (output plane).
    const int64_t image = (s.expand ? std::min(s.h * s.w, out_hw) : out_hw) * s.mid_c * 4;
    const int64_t min_image = s.project ? 256 * 1024 : 1024 * 1024;
    if (image >= min_image && image * s.batch >= 8 * 1024 * 1024 && in_budget(s)) out.push_back(s);
  };
  for (int64_t b : kBatches)
    for (int64_t hw : {28, 56, 112})
      for (int64_t stride : {1, 2})
        for (int64_t c : {16, 24, 32}) {
          for (int64_t out_c : {16, 24, 32}) {
            SweepShape s{SweepOp::depth_first, b, c, out_c, hw, hw, 3, stride, 1};
            s.mid_c = 6 * c;
            keep(s);
          }
          SweepShape lone{SweepOp::depth_first, b, c, 6 * c, hw, hw, 3, stride, 1};
          lone.mid_c = 6 * c;
          lone.project = false;
          keep(lone);
          for (int64_t mid : {32, 64, 96, 144}) {
            SweepShape dw{SweepOp::depth_first, b, mid, c, hw, hw, 3, stride, 1};
            dw.mid_c = mid;
            dw.expand = false;
            keep(dw);
          }
        }
  return out;
}

std::vector<SweepShape> concat_affine_candidates() {
  std::vector<SweepShape> out;
  for (int64_t inputs : {2, 4, 8, 16, 32})
    for (int64_t b : kBatches)
      for (int64_t c : {16, 32, 64, 128})
        for (int64_t hw : {7, 14, 28, 56}) {
          SweepShape s{SweepOp::concat_affine, b, c, c * inputs, hw, hw, inputs};
          const double elems = static_cast<double>(b * s.out_c * hw * hw);
          if (elems >= 1e4 && elems <= 2e7) out.push_back(s);
        }
  return out;
}

// A gemm's rows by factors of 8: one row (a classifier at batch 1), 8.., 64.., 512.., 4096...
std::string rows_stratum(const SweepShape& s) { return std::to_string(static_cast<int>(std::log2(static_cast<double>(s.m)) / 3)); }

std::string window_stratum(const SweepShape& s) {
  return std::to_string(s.kernel) + "/" + std::to_string(s.stride) + "/" + std::to_string(s.batch);
}

}  // namespace

std::string sweep_op_name(SweepOp op) {
  switch (op) {
    case SweepOp::conv: return "conv";
    case SweepOp::depthwise_conv: return "depthwise_conv";
    case SweepOp::gemm: return "gemm";
    case SweepOp::maxpool: return "maxpool";
    case SweepOp::avgpool: return "avgpool";
    case SweepOp::global_avgpool: return "global_avgpool";
    case SweepOp::add: return "add";
    case SweepOp::concat: return "concat";
    case SweepOp::eltwise: return "eltwise";
    case SweepOp::depth_first: return "depth_first";
    case SweepOp::concat_affine: return "concat_affine";
    case SweepOp::layernorm: return "layernorm";
  }
  return "?";
}

bool sweep_op_has_precisions(SweepOp op) {
  return op == SweepOp::conv || op == SweepOp::depthwise_conv || op == SweepOp::gemm || op == SweepOp::maxpool ||
         op == SweepOp::concat || op == SweepOp::concat_affine || op == SweepOp::layernorm;
}

int64_t sweep_out_h(const SweepShape& s) {
  if (s.op == SweepOp::gemm) return 0;
  if (s.op == SweepOp::global_avgpool) return 1;
  if (s.op == SweepOp::add || s.op == SweepOp::concat || s.op == SweepOp::eltwise || s.op == SweepOp::concat_affine ||
      s.op == SweepOp::layernorm)
    return s.h;
  return (s.h + 2 * s.pad - s.kernel) / s.stride + 1;
}

int64_t sweep_out_w(const SweepShape& s) {
  if (s.op == SweepOp::gemm) return 0;
  if (s.op == SweepOp::global_avgpool) return 1;
  if (s.op == SweepOp::add || s.op == SweepOp::concat || s.op == SweepOp::eltwise || s.op == SweepOp::concat_affine ||
      s.op == SweepOp::layernorm)
    return s.w;
  return (s.w + 2 * s.pad - s.kernel) / s.stride + 1;
}

double sweep_macs(const SweepShape& s) {
  const double b = static_cast<double>(s.batch);
  const double out_hw = static_cast<double>(sweep_out_h(s) * sweep_out_w(s));
  switch (s.op) {
    case SweepOp::conv: return b * out_hw * static_cast<double>(s.out_c * s.in_c * s.kernel * s.kernel);
    case SweepOp::depthwise_conv: return b * out_hw * static_cast<double>(s.out_c * s.kernel * s.kernel);
    case SweepOp::gemm: return static_cast<double>(s.m) * static_cast<double>(s.k) * static_cast<double>(s.n);
    case SweepOp::maxpool:
    case SweepOp::avgpool: return b * out_hw * static_cast<double>(s.out_c * s.kernel * s.kernel);
    case SweepOp::global_avgpool:
    case SweepOp::layernorm:  // its elements: a mean, a variance and the normalization over each
    case SweepOp::add: return b * static_cast<double>(s.in_c * s.h * s.w);
    case SweepOp::concat:
    case SweepOp::concat_affine: return b * static_cast<double>(s.out_c * s.h * s.w);
    case SweepOp::eltwise: return b * static_cast<double>(s.in_c * s.h * s.w * s.kernel);
    case SweepOp::depth_first:
      return (s.expand ? b * static_cast<double>(s.h * s.w * s.in_c * s.mid_c) : 0.0) +
             b * out_hw * static_cast<double>(s.mid_c * (s.kernel * s.kernel + (s.project ? s.out_c : 0)));
  }
  return 0;
}

double sweep_bytes(const SweepShape& s, double element_bytes) {
  const double b = static_cast<double>(s.batch);
  const double in = b * static_cast<double>(s.in_c * s.h * s.w);
  const double out = b * static_cast<double>(s.out_c * sweep_out_h(s) * sweep_out_w(s));
  switch (s.op) {
    case SweepOp::conv:
      return element_bytes * (in + out + static_cast<double>(s.out_c * s.in_c * s.kernel * s.kernel)) + 4.0 * static_cast<double>(s.out_c);
    case SweepOp::depthwise_conv:
      return element_bytes * (in + out + static_cast<double>(s.out_c * s.kernel * s.kernel)) + 4.0 * static_cast<double>(s.out_c);
    case SweepOp::gemm:  // a float_input gemm writes float32 (its output leaves the graph); the others, in their dtype
      return element_bytes * static_cast<double>(s.m * s.k + s.k * s.n) +
             (s.float_input ? 4.0 : element_bytes) * static_cast<double>(s.m * s.n) + 4.0 * static_cast<double>(s.n);
    case SweepOp::add: return element_bytes * 3 * in;
    case SweepOp::concat:
    case SweepOp::concat_affine: return element_bytes * 2 * out;
    case SweepOp::eltwise: return element_bytes * 2 * in;
    case SweepOp::layernorm: return element_bytes * 2 * in + 8.0 * static_cast<double>(s.in_c);  // + scale and bias
    case SweepOp::depth_first:  // its border and its weights and biases: the intermediates stay in cache
      return element_bytes * (in + out + static_cast<double>(s.mid_c * s.kernel * s.kernel + s.mid_c) +
                              (s.expand ? static_cast<double>(s.mid_c * s.in_c + s.mid_c) : 0.0) +
                              (s.project ? static_cast<double>(s.mid_c * s.out_c + s.out_c) : 0.0));
    default: return element_bytes * (in + out);
  }
}

std::string sweep_record_op(const SweepShape& s) {
  if (s.plain_input) return sweep_op_name(s.op) + kFromPlainSuffix;
  if (s.float_input) return sweep_op_name(s.op) + kFromFloatSuffix;
  if (s.silu) return sweep_op_name(s.op) + kSiluSuffix;
  if (s.residual) return sweep_op_name(s.op) + kResidualSuffix;
  if (s.signed_input) return sweep_op_name(s.op) + kFromSignedSuffix;
  if (s.op == SweepOp::conv && s.in_c <= kStemMaxChannels) return kStemConvOp;
  if (s.op == SweepOp::depth_first && !s.expand) return "depth_first_dw";
  if (s.op == SweepOp::depth_first && !s.project) return "depth_first_expand";
  return sweep_op_name(s.op);
}

std::vector<std::string> sweep_record_ops() {
  std::set<std::string> ops;
  for (const std::vector<SweepShape>& grid : {sweep_grid(false), sweep_border_grid(false), sweep_device_large_grid()})
    for (const SweepShape& s : grid) ops.insert(sweep_record_op(s));
  return {ops.begin(), ops.end()};
}

std::string sweep_key(const SweepShape& s) {
  if (s.plain_input || s.float_input || s.silu || s.residual || s.signed_input) {
    SweepShape interior = s;
    interior.plain_input = interior.float_input = interior.silu = interior.residual = interior.signed_input = false;
    return (s.plain_input ? "plain " : s.float_input ? "f32in " : s.silu ? "silu " : s.residual ? "sum " : "s8in ") + sweep_key(interior);
  }
  if (s.copies > 1) {
    SweepShape one = s;
    one.copies = 1;
    return sweep_key(one) + " x" + std::to_string(s.copies);
  }
  const std::string hw = std::to_string(s.h) + "x" + std::to_string(s.w);
  const std::string b = " b" + std::to_string(s.batch);
  const std::string window = " k" + std::to_string(s.kernel) + " s" + std::to_string(s.stride);
  switch (s.op) {
    case SweepOp::conv: return "conv" + window + " " + std::to_string(s.in_c) + "->" + std::to_string(s.out_c) + " " + hw + b;
    case SweepOp::depthwise_conv: return "dwconv" + window + " " + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::gemm:
      return "gemm " + std::to_string(s.m) + "x" + std::to_string(s.k) + "->" + std::to_string(s.n);
    case SweepOp::maxpool: return "maxpool" + window + " " + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::avgpool: return "avgpool" + window + " " + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::global_avgpool: return "gap " + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::add: return "add " + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::concat: return "concat 2x" + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::concat_affine: return "concat_affine " + std::to_string(s.kernel) + "x" + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::layernorm: return "layernorm " + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::eltwise: return std::string(s.kernel == 5 ? "gelu " : "silu ") + std::to_string(s.in_c) + " " + hw + b;
    case SweepOp::depth_first:
      return "dfconv" + window + " " + (s.expand ? std::to_string(s.in_c) + "->" : "") + std::to_string(s.mid_c) +
             (s.project ? "->" + std::to_string(s.out_c) : "") + " " + hw + b;
  }
  return "?";
}

std::vector<SweepShape> sweep_grid(bool quick) {
  if (quick) {
    SweepShape gemm{SweepOp::gemm, 1};
    gemm.m = 1;
    gemm.k = 256;
    gemm.n = 128;
    return {
        {SweepOp::conv, 1, 16, 16, 14, 14, 3, 1, 1},
        {SweepOp::conv, 1, 32, 64, 14, 14, 1, 2, 0},
        {SweepOp::depthwise_conv, 1, 32, 32, 14, 14, 3, 1, 1},
        gemm,
        {SweepOp::maxpool, 1, 16, 16, 14, 14, 2, 2, 0},
        {SweepOp::avgpool, 1, 16, 16, 14, 14, 3, 1, 1},
        {SweepOp::global_avgpool, 1, 64, 64, 7, 7, 0, 1, 0},
        {SweepOp::add, 1, 16, 16, 14, 14},
    };
  }
  std::vector<SweepShape> grid;
  const auto append = [&](std::vector<SweepShape> part) { grid.insert(grid.end(), part.begin(), part.end()); };
  append(sample(conv_candidates(), 120, window_stratum));
  append(sample(depthwise_candidates(), 36, window_stratum));
  append(sample(gemm_candidates(), 48, [](const SweepShape& s) { return std::to_string(s.m); }));
  append(sample(pool_candidates(SweepOp::maxpool), 15, window_stratum));
  append(sample(pool_candidates(SweepOp::avgpool), 12, window_stratum));
  append(sample(pool_candidates(SweepOp::global_avgpool), 9, window_stratum));
  append(sample(add_candidates(), 9, [](const SweepShape& s) { return std::to_string(s.batch); }));
  append(sample(concat_candidates(), 12, [](const SweepShape& s) { return std::to_string(s.batch); }));
  append(sample(eltwise_candidates(), 16, [](const SweepShape& s) { return std::to_string(s.kernel) + "/" + std::to_string(s.batch); }));
  append(sample(concat_affine_candidates(), 24, [](const SweepShape& s) { return std::to_string(s.kernel); }));
  append(sample(depth_first_candidates(), 36, [](const SweepShape& s) {
    return std::to_string(s.expand) + std::to_string(s.project) + "/" + std::to_string(s.stride) + "/" + std::to_string(s.batch);
  }));
  // Last, so that a profile taken before them keeps every point and only these are measured.
  append(sample(thin_channel_candidates(), 48, [](const SweepShape& s) {
    return sweep_op_name(s.op) + (s.in_c < s.out_c ? "+" : "-") + window_stratum(s);
  }));
  // After them, for the same reason, the real layers; shapes already in the grid are not measured
  // twice. (A set of keys: comparing every candidate's key with every grid shape's took 7 s under ASan.)
  std::set<std::string> in_grid;
  for (const SweepShape& g : grid) in_grid.insert(sweep_key(g));
  const auto append_unseen = [&](const std::vector<SweepShape>& candidates, size_t count, auto stratum) {
    std::vector<SweepShape> unseen;
    for (const SweepShape& s : candidates)
      if (!in_grid.count(sweep_key(s))) unseen.push_back(s);
    const std::vector<SweepShape> part = sample(std::move(unseen), count, stratum);
    for (const SweepShape& s : part) in_grid.insert(sweep_key(s));
    append(part);
  };
  append_unseen(zoo_candidates(), 120, [](const SweepShape& s) { return sweep_op_name(s.op) + window_stratum(s); });
  // And after those the fully connected layers of other models, by rows (one row: classifiers at
  // batch 1; then each factor of 8).
  append_unseen(zoo_gemm_candidates(), kZooGemmPoints, rows_stratum);
  // And after those, LayerNorms (since 2026-12-06, session 11: priced as a stream before, about half their time).
  append(sample(layernorm_candidates(), kLayerNormPoints, [](const SweepShape& s) { return std::to_string(s.batch); }));
  // And after those the stems on their 3 channels (since 2026-12-07, session 13: the grid's convs start at 16 input
  // channels, and oneDNN runs 3-channel ones at a tenth of that rate: ShuffleNetV2's 3->24 3x3 s2 at batch 8, one
  // thread, 0.95 ms priced, 2.42 measured in float32).
  append(stem_candidates());
  // And after those more max pools (since 2026-12-07, session 17): other models' own, then the grid's by channel count.
  // SqueezeNet's three int8 pools at batch 8 were priced 1.10 ms against 0.58 measured.
  append_unseen(zoo_pool_candidates(), 100, window_stratum);
  append_unseen(pool_candidates(SweepOp::maxpool), kExtraMaxPoolPoints, channels_stratum);
  return grid;
}

std::vector<SweepShape> sweep_device_large_grid() {
  const std::vector<int64_t> batch = {kDeviceBatch};
  std::vector<SweepShape> grid = sample(conv_candidates(batch, in_device_budget), 48, window_stratum);
  std::set<std::string> in_grid;
  for (const SweepShape& g : grid) in_grid.insert(sweep_key(g));
  std::vector<SweepShape> zoo;
  for (const SweepShape& s : zoo_candidates(batch, in_device_budget))
    if (!in_grid.count(sweep_key(s))) zoo.push_back(s);
  for (const SweepShape& s : sample(std::move(zoo), 24, [](const SweepShape& s) { return sweep_op_name(s.op) + window_stratum(s); }))
    grid.push_back(s);
  for (const SweepShape& s : sample(zoo_gemm_candidates(batch, in_device_budget), 16,
                                    [](const SweepShape& s) { return std::to_string(s.k) + "/" + std::to_string(s.n); }))
    grid.push_back(s);
  return grid;
}

std::vector<SweepShape> sweep_border_grid(bool quick) {
  if (quick) {
    SweepShape s{SweepOp::conv, 1, 16, 16, 14, 14, 1, 1, 0};
    s.plain_input = true;
    return {s};
  }
  std::vector<SweepShape> grid = sample(border_candidates(), 78, [](const SweepShape& s) {
    return std::to_string(s.float_input) + std::to_string(s.silu) + "/" + std::to_string(s.op == SweepOp::conv) + "/" + std::to_string(s.kernel) + "/" +
           std::to_string(s.batch);
  });
  // Last, so that a profile taken before them keeps every point and only these are measured.
  const std::vector<SweepShape> residual = sample(residual_candidates(), 36, [](const SweepShape& s) {
    return std::to_string(s.kernel) + (s.in_c < s.out_c ? "+" : s.in_c > s.out_c ? "-" : "=") + std::to_string(s.batch);
  });
  grid.insert(grid.end(), residual.begin(), residual.end());
  // And after those, for the same reason, int8 convolutions reading s8.
  const std::vector<SweepShape> signed_input = sample(signed_input_candidates(), 40, [](const SweepShape& s) {
    return sweep_op_name(s.op) + std::to_string(s.kernel) + "/" + std::to_string(s.batch);
  });
  grid.insert(grid.end(), signed_input.begin(), signed_input.end());
  // And last, bf16/int8 gemms converting a float32 A in their own step (a classifier after its pooling; the
  // interior gemm points read a producer's rows), among the grid's and the zoo's shapes, by rows.
  std::vector<SweepShape> gemms = gemm_candidates();
  for (const SweepShape& s : zoo_gemm_candidates()) gemms.push_back(s);
  for (SweepShape& s : gemms) s.float_input = true;
  const std::vector<SweepShape> float_gemms = sample(std::move(gemms), 32, rows_stratum);
  grid.insert(grid.end(), float_gemms.begin(), float_gemms.end());
  return grid;
}

}  // namespace kiln::perf
