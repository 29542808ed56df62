#include "perfmodel/predictor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "perfmodel/microbench/weight_reuse.h"
#include "perfmodel/thread_pairs.h"

namespace kiln::perf {
namespace {

std::string group_key(const std::string& op, const std::string& dtype, int threads) {
  return op + "|" + dtype + "|" + std::to_string(threads);
}

// Symmetric relative error (max(r, 1/r) - 1 of the ratio r), capped at 1 so that points timed
// while the cores were shared (10x slower, or impossibly fast) do not pull the fit.
double robust_loss(const RooflineParams& p, const std::vector<Measurement>& pts) {
  double loss = 0;
  for (const Measurement& m : pts) {
    const double r = roofline_ms(p, m.macs, m.bytes) / m.median_ms;
    loss += std::min(std::max(r, 1.0 / r) - 1.0, 1.0);
  }
  return loss;
}

std::vector<double> log_grid(double lo, double hi, int n) {
  std::vector<double> v;
  if (!(lo > 0) || !(hi > lo)) return {std::max(lo, hi)};
  for (int i = 0; i < n; ++i) v.push_back(lo * std::pow(hi / lo, static_cast<double>(i) / (n - 1)));
  return v;
}

// The log-space features the neighbours are found in.
std::vector<double> raw_features(const Measurement& m) {
  const auto l = [](double x) { return std::log(std::max(x, 0.0) + 1.0); };
  const double channels_in = m.op == "gemm" ? static_cast<double>(m.k) : static_cast<double>(m.in_c);
  const double channels_out = m.op == "gemm" ? static_cast<double>(m.n) : static_cast<double>(m.out_c);
  // Lanes wasted on channels short of oneDNN's 16-lane blocks (24 channels compute as 32): such
  // layers run far below their neighbours in MACs and bytes, and aligned layers must not be priced
  // from them.
  const auto waste = [](double c) { return c > 0 ? std::ceil(c / 16.0) * 16.0 / c - 1.0 : 0.0; };
  return {l(m.macs), l(m.bytes), l(static_cast<double>(m.batch)), l(channels_in), l(channels_out),
          l(static_cast<double>(m.out_h * m.out_w)), static_cast<double>(m.kernel_h), static_cast<double>(m.stride),
          waste(channels_in), waste(channels_out)};
}

// The group's extent in work and batch, recovered from its standardized features (0: log(MACs + 1),
// 2: log(batch + 1); raw_features) so that a fit read from the cache gets it the same way.
void set_group_extent(LatencyPredictor::Group& g) {
  const auto raw = [&](size_t i, size_t j) { return std::exp(g.features[i][j] * g.scale[j] + g.mean[j]) - 1.0; };
  std::set<int64_t> batches;
  g.max_macs = 0;
  for (size_t i = 0; i < g.features.size(); ++i) {
    g.max_macs = std::max(g.max_macs, raw(i, 0));
    batches.insert(static_cast<int64_t>(std::llround(raw(i, 2))));
  }
  g.batches.assign(batches.begin(), batches.end());
}

void group_prepare(LatencyPredictor::Group& g, const std::vector<Measurement>& pts, double min_bytes_per_ms) {
  g.params = roofline_fit(pts, min_bytes_per_ms);
  std::vector<std::vector<double>> raw;
  for (const Measurement& m : pts) raw.push_back(raw_features(m));
  const size_t d = raw.empty() ? 0 : raw[0].size();
  g.mean.assign(d, 0);
  g.scale.assign(d, 1);
  for (size_t j = 0; j < d; ++j) {
    double s = 0, s2 = 0;
    for (const auto& r : raw) s += r[j], s2 += r[j] * r[j];
    const double n = static_cast<double>(raw.size());
    g.mean[j] = s / n;
    const double var = s2 / n - g.mean[j] * g.mean[j];
    g.scale[j] = var > 1e-12 ? std::sqrt(var) : 1.0;
  }
  g.features.clear();
  g.residual.clear();
  for (size_t i = 0; i < pts.size(); ++i) {
    std::vector<double> f(d);
    for (size_t j = 0; j < d; ++j) f[j] = (raw[i][j] - g.mean[j]) / g.scale[j];
    g.features.push_back(std::move(f));
    g.residual.push_back(std::log(pts[i].median_ms / roofline_ms(g.params, pts[i].macs, pts[i].bytes)));
  }
  set_group_extent(g);
}

// Inverse-distance weighted mean of the k nearest training residuals.
double knn_residual(const LatencyPredictor::Group& g, const Measurement& m, int k) {
  if (g.features.empty()) return 0;
  const std::vector<double> raw = raw_features(m);
  std::vector<std::pair<double, size_t>> dist;
  for (size_t i = 0; i < g.features.size(); ++i) {
    double d2 = 0;
    for (size_t j = 0; j < raw.size(); ++j) {
      const double x = (raw[j] - g.mean[j]) / g.scale[j] - g.features[i][j];
      d2 += x * x;
    }
    dist.emplace_back(std::sqrt(d2), i);
  }
  const size_t n = std::min(dist.size(), static_cast<size_t>(std::max(k, 1)));
  std::partial_sort(dist.begin(), dist.begin() + static_cast<std::ptrdiff_t>(n), dist.end());
  double wsum = 0, rsum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = 1.0 / (dist[i].first + 0.05);
    wsum += w;
    rsum += w * g.residual[dist[i].second];
  }
  return rsum / wsum;
}

// A batched layer with more work than any of its group's points, priced as that many batches of
// the largest measured batch that brings it within them. The sweep caps a point's work
// (sweep_grid.cpp's kMaxMacs), so a batch-32 layer of a real network (ResNet-50's 3x3 convs:
// 3.7 GMACs) has no neighbour of its size, and the nearest points in the features are small-channel,
// large-image shapes far below its rate (ResNet-18 int8 at batch 32: priced 116 ms, 70 measured).
// A conv's time is linear in batch there: the models' own times grow 4x from batch 8 to 32.
struct BatchSplit {
  Measurement part;
  double parts = 1;
};

bool splits_by_batch(const std::string& op) {
  return op.starts_with("conv") || op.starts_with("depthwise_conv") || op.starts_with("depth_first") ||
         op == "maxpool" || op == "avgpool";
}

BatchSplit split_by_batch(const LatencyPredictor::Group& g, const Measurement& m) {
  BatchSplit split{m, 1};
  if (!splits_by_batch(m.op) || m.batch <= 1 || g.features.empty() || m.macs <= g.max_macs) return split;
  for (auto b = g.batches.rbegin(); b != g.batches.rend(); ++b) {
    if (*b >= m.batch || *b < 1) continue;
    const double share = static_cast<double>(*b) / static_cast<double>(m.batch);
    if (m.macs * share > g.max_macs && *b > 1) continue;
    split.part.batch = *b;
    split.part.macs = m.macs * share;
    split.part.bytes = m.bytes * share;
    split.parts = 1.0 / share;
    break;
  }
  return split;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double share_within(const std::vector<double>& errors, double bound) {
  if (errors.empty()) return 0;
  return static_cast<double>(std::count_if(errors.begin(), errors.end(), [&](double e) { return e <= bound; })) /
         static_cast<double>(errors.size());
}

// The border suffix of a sweep point's op (kFromPlainSuffix, kFromFloatSuffix, kSiluSuffix,
// kResidualSuffix, kFromSignedSuffix), or "".
std::string border_suffix(const std::string& op) {
  for (const char* suffix : {kFromPlainSuffix, kFromFloatSuffix, kSiluSuffix, kResidualSuffix, kFromSignedSuffix})
    if (op.ends_with(suffix)) return suffix;
  return "";
}

}  // namespace

Measurement conversion_features(const std::string& dtype, int threads, int64_t batch, int64_t channels, int64_t h,
                                int64_t w, double median_ms) {
  Measurement c;
  c.kind = kKindKernel;
  c.op = "convert";
  c.dtype = dtype;
  c.threads = threads;
  c.batch = batch;
  c.in_c = c.out_c = channels;
  c.in_h = c.out_h = h;
  c.in_w = c.out_w = w;
  c.macs = static_cast<double>(batch * channels * h * w);
  c.bytes = c.macs * (4.0 + dtype_element_bytes(dtype));
  c.median_ms = median_ms;
  return c;
}

Measurement row_conversion_features(const std::string& dtype, int threads, int64_t rows, int64_t columns, double median_ms) {
  Measurement c = conversion_features(dtype, threads, 1, columns, rows, 1, median_ms);
  c.op = kRowConversionOp;
  return c;
}

Measurement epilogue_features(const std::string& dtype, int threads, int64_t batch, int64_t channels, int64_t h,
                              int64_t w, double ops_per_element, double median_ms) {
  Measurement c = conversion_features(dtype, threads, batch, channels, h, w, median_ms);
  c.op = "epilogue";
  c.kernel_h = c.kernel_w = static_cast<int64_t>(ops_per_element);
  c.bytes = c.macs * dtype_element_bytes(dtype);
  c.macs *= ops_per_element;
  return c;
}

Measurement residual_features(const std::string& dtype, int threads, int64_t batch, int64_t channels, int64_t h, int64_t w,
                              double median_ms) {
  Measurement c = conversion_features(dtype, threads, batch, channels, h, w, median_ms);
  c.op = "residual";
  c.bytes = c.macs * dtype_element_bytes(dtype);
  return c;
}

Measurement signed_input_features(const Measurement& interior, double median_ms) {
  Measurement c = interior;
  c.op = interior.op + kSignedInputGroupSuffix;
  c.key.clear();
  c.median_ms = median_ms;
  return c;
}

double roofline_ms(const RooflineParams& p, double macs, double bytes) {
  const double compute = p.macs_per_ms > 0 ? macs / p.macs_per_ms : 0.0;
  const double memory = p.bytes_per_ms > 0 ? bytes / p.bytes_per_ms : 0.0;
  return p.overhead_ms + std::max(compute, memory);
}

// Coarse grid over (compute, bandwidth, overhead) spanning what the points achieved, then two
// finer grids around the best; the loss is robust_loss.
RooflineParams roofline_fit(const std::vector<Measurement>& pts, double min_bytes_per_ms) {
  RooflineParams best;
  if (pts.empty()) return best;
  double c_lo = std::numeric_limits<double>::max(), c_hi = 0, b_lo = c_lo, b_hi = 0, t_min = c_lo;
  for (const Measurement& m : pts) {
    const double c = m.macs / m.median_ms, b = m.bytes / m.median_ms;
    c_lo = std::min(c_lo, c), c_hi = std::max(c_hi, c);
    b_lo = std::min(b_lo, b), b_hi = std::max(b_hi, b);
    t_min = std::min(t_min, m.median_ms);
  }
  // A kernel moves its bytes at least as fast as a plain streaming read from DRAM: a lower
  // bandwidth would only stand in for some other inefficiency (left to the residual correction).
  b_lo = std::max(b_lo, min_bytes_per_ms);
  b_hi = std::max(b_hi, b_lo * 1.01);
  std::vector<double> cs = log_grid(c_lo, c_hi * 2, 20), bs = log_grid(b_lo, b_hi * 2, 20),
                      os = log_grid(t_min * 1e-3, t_min, 11);
  bs.push_back(0);
  os.push_back(0);
  double best_loss = std::numeric_limits<double>::max();
  const auto search = [&](const std::vector<double>& c_grid, const std::vector<double>& b_grid, const std::vector<double>& o_grid) {
    for (double c : c_grid)
      for (double b : b_grid)
        for (double o : o_grid) {
          const RooflineParams p{o, c, b};
          const double loss = robust_loss(p, pts);
          if (loss < best_loss) best_loss = loss, best = p;
        }
  };
  search(cs, bs, os);
  for (double step : {1.25, 1.06}) {
    const RooflineParams centre = best;
    const auto around = [&](double x) {
      std::vector<double> v;
      for (int i = -3; i <= 3; ++i) v.push_back(x * std::pow(step, i));
      if (x == centre.bytes_per_ms)
        for (double& b : v) b = std::max(b, min_bytes_per_ms);
      return x > 0 ? v : std::vector<double>{0};
    };
    std::vector<double> o_grid = around(centre.overhead_ms);
    if (centre.overhead_ms > 0) o_grid.push_back(0);
    search(around(centre.macs_per_ms), around(centre.bytes_per_ms), o_grid);
  }
  return best;
}

namespace {

// The table of the nearest measured thread count at or above `threads`, else of the largest measured.
template <typename Table>
const Table& nearest_threads_at_or_above(const std::map<int, Table>& by_threads, int threads) {
  auto it = by_threads.lower_bound(threads);
  if (it == by_threads.end()) it = std::prev(it);
  return it->second;
}

// The weight_reuse rows as tables: per (dtype, threads), each point's time over the one-copy
// point's, per byte of one copy's weights, at the point's working set (every copy's weights).
std::map<std::string, std::map<int, std::vector<std::pair<double, double>>>> weight_refetch_tables(const std::vector<Measurement>& rows) {
  std::map<std::string, std::map<int, std::vector<std::pair<double, double>>>> raw;  // (working set, ms)
  std::map<std::string, std::map<int, double>> copy_bytes;
  for (const Measurement& m : rows) {
    if (m.kind != kKindWeightReuse || !(m.median_ms > 0) || m.working_set_bytes <= 0 || measured_under_load(m)) continue;
    raw[m.dtype][m.threads].emplace_back(static_cast<double>(m.working_set_bytes), m.median_ms);
    copy_bytes[m.dtype][m.threads] = weight_reuse_copy_bytes(m);
  }
  std::map<std::string, std::map<int, std::vector<std::pair<double, double>>>> tables;
  for (auto& [dtype, by_threads] : raw)
    for (auto& [threads, points] : by_threads) {
      std::sort(points.begin(), points.end());
      const double bytes = copy_bytes[dtype][threads];
      // The first point is the sweep's own condition (one copy) only if it holds one copy's weights.
      if (points.size() < 2 || !(bytes > 0) || points.front().first > bytes * 1.01) continue;
      std::vector<std::pair<double, double>>& table = tables[dtype][threads];
      for (const auto& [working_set, ms] : points)
        table.emplace_back(working_set, std::max(0.0, ms - points.front().second) / bytes);
      // Further away is never cheaper: a dip is noise, pooled with its neighbours (adjacent violators).
      std::vector<std::pair<double, int>> pools;  // (mean, points)
      for (const auto& [working_set, cost] : table) {
        pools.emplace_back(cost, 1);
        while (pools.size() > 1 && pools[pools.size() - 2].first > pools.back().first) {
          const auto [mean, n] = pools.back();
          pools.pop_back();
          auto& [prev_mean, prev_n] = pools.back();
          prev_mean = (prev_mean * prev_n + mean * n) / (prev_n + n);
          prev_n += n;
        }
      }
      size_t i = 0;
      for (const auto& [mean, n] : pools)
        for (int j = 0; j < n; ++j) table[i++].second = mean;
    }
  return tables;
}

}  // namespace

Result<LatencyPredictor> LatencyPredictor::fit(const std::vector<Measurement>& rows, const FitOptions& options) {
  LatencyPredictor p;
  p.neighbours_ = options.neighbours;
  std::vector<Measurement> kernels, quiet;
  for (const Measurement& m : rows) {
    if (m.kind == kKindBandwidth && m.working_set_bytes > 0 && m.median_ms > 0)
      p.bandwidth_[m.threads].emplace_back(static_cast<double>(m.working_set_bytes), static_cast<double>(m.working_set_bytes) / m.median_ms);
    if (m.kind != kKindKernel || m.op.empty() || !(m.median_ms > 0) || !(m.macs > 0)) continue;
    kernels.push_back(m);
    if (!measured_under_load(m)) quiet.push_back(m);
  }
  KILN_REQUIRE(!kernels.empty(), invalid_argument,
               "the store has no kernel-sweep measurements for this target: run `kiln bench-target` (or import a profile)");
  // Points measured before kiln ran them as it does now (int8 conv points whose producer wrote s8,
  // int8 gemm points timed as oneDNN's repacking matmul, bf16/int8 max pools on oneDNN's
  // pools): once a group has quiet points keyed the current way, its older points are dropped;
  // alone, they still price the group.
  const auto is_current = [](const Measurement& m) { return m.key.starts_with(current_key_prefix(m.op, m.dtype)); };
  std::set<std::string> has_current_points;
  for (const Measurement& m : quiet)
    if (!current_key_prefix(m.op, m.dtype).empty() && is_current(m)) has_current_points.insert(group_key(m.op, m.dtype, m.threads));
  const auto superseded = [&](const Measurement& m) {
    return !is_current(m) && has_current_points.count(group_key(m.op, m.dtype, m.threads));
  };
  const size_t before_superseded = kernels.size();
  std::erase_if(kernels, superseded);
  std::erase_if(quiet, superseded);
  p.summary_.points_superseded = static_cast<int>(before_superseded - kernels.size());
  for (auto& [threads, table] : p.bandwidth_) std::sort(table.begin(), table.end());
  p.weight_refetch_ = weight_refetch_tables(rows);
  p.summary_.points_loaded = static_cast<int>(kernels.size() - quiet.size());
  // Loaded points are dropped unless that leaves under a third of the sweep: a profile taken
  // entirely on a shared machine is still the best there is, and the summary says so.
  if (!options.keep_loaded && quiet.size() * 3 >= kernels.size()) {
    // A group whose every point was loaded is then priced from another thread count or dtype
    // (kernel_ms): said in the summary, so a plan can tell which figures stand on which points.
    std::map<std::string, int> loaded_only;
    std::set<std::string> has_quiet;
    for (const Measurement& m : quiet) has_quiet.insert(group_key(m.op, m.dtype, m.threads));
    for (const Measurement& m : kernels)
      if (!has_quiet.count(group_key(m.op, m.dtype, m.threads))) ++loaded_only[m.op + " " + m.dtype + " t" + std::to_string(m.threads)];
    for (const auto& [group, n] : loaded_only) p.summary_.groups_only_loaded.push_back(group + " (" + std::to_string(n) + ")");
    kernels = std::move(quiet);
  } else {
    p.summary_.loaded_kept = p.summary_.points_loaded > 0;
  }
  p.summary_.points_repaired = repair_contradicting_thread_pairs(kernels);
  p.summary_.points_used = static_cast<int>(kernels.size());
  for (const auto& [t, table] : p.bandwidth_) p.summary_.bandwidth_points += static_cast<int>(table.size());
  for (const auto& [dtype, by_threads] : p.weight_refetch_)
    for (const auto& [t, table] : by_threads) p.summary_.weight_reuse_points += static_cast<int>(table.size());

  // Border points (a conv reading plain float32, reading float32 into bf16/int8, with a fused SiLU
  // or a fused residual sum) are not kernels of their own: what they cost beyond the interior
  // kernel's prediction is fitted below as the groups "convert", "convert_precision", "epilogue"
  // and "residual".
  std::map<std::string, std::vector<Measurement>> by_group;
  std::vector<Measurement> border;
  for (const Measurement& m : kernels) {
    if (!border_suffix(m.op).empty()) border.push_back(m);
    else by_group[group_key(m.op, m.dtype, m.threads)].push_back(m);
  }

  std::vector<double> err_roof, err_knn, err_chosen;
  const auto fit_group = [&](const std::vector<Measurement>& pts) {
    GroupSummary gs;
    gs.op = pts[0].op, gs.dtype = pts[0].dtype, gs.threads = pts[0].threads;
    const double dram = p.dram_bytes_per_ms(gs.threads);
    gs.points = static_cast<int>(pts.size());
    // 5-fold held-out: every fifth point (in store order, which is the sweep's sampled order).
    std::vector<double> group_roof, group_knn;
    if (pts.size() >= 10) {
      for (size_t fold = 0; fold < 5; ++fold) {
        std::vector<Measurement> train, test;
        for (size_t i = 0; i < pts.size(); ++i) (i % 5 == fold ? test : train).push_back(pts[i]);
        Group g;
        group_prepare(g, train, dram);
        for (const Measurement& m : test) {
          const double roof = roofline_ms(g.params, m.macs, m.bytes);
          const double knn = roof * std::exp(knn_residual(g, m, p.neighbours_));
          group_roof.push_back(std::abs(roof / m.median_ms - 1));
          group_knn.push_back(std::abs(knn / m.median_ms - 1));
        }
      }
    }
    gs.heldout_roofline = group_roof.empty() ? -1 : median(group_roof);
    gs.heldout_knn = group_knn.empty() ? -1 : median(group_knn);
    gs.use_knn = options.method == "knn" ||
                 (options.method == "auto" && !group_knn.empty() && gs.heldout_knn < gs.heldout_roofline);
    err_roof.insert(err_roof.end(), group_roof.begin(), group_roof.end());
    err_knn.insert(err_knn.end(), group_knn.begin(), group_knn.end());
    const std::vector<double>& chosen = gs.use_knn ? group_knn : group_roof;
    err_chosen.insert(err_chosen.end(), chosen.begin(), chosen.end());
    Group g;
    g.op = gs.op, g.dtype = gs.dtype, g.threads = gs.threads;
    g.use_knn = gs.use_knn;
    group_prepare(g, pts, dram);
    gs.params = g.params;
    p.groups_[group_key(gs.op, gs.dtype, gs.threads)] = std::move(g);
    p.summary_.groups.push_back(gs);
  };
  for (const auto& [key, pts] : by_group) fit_group(pts);
  std::map<std::string, std::vector<Measurement>> conversions;
  for (const Measurement& b : border) {
    const std::string suffix = border_suffix(b.op);
    Measurement interior = b;
    interior.op = b.op.substr(0, b.op.size() - suffix.size());
    // Floored at a small share of the point: an interior kernel predicted slightly slow must not
    // leave a zero or negative time for the part measured.
    const double extra_ms = std::max(b.median_ms - p.kernel_ms(interior).ms, 0.02 * b.median_ms);
    Measurement c = suffix == kSiluSuffix         ? epilogue_features(b.dtype, b.threads, b.batch, b.out_c, b.out_h, b.out_w, 2.0, extra_ms)
                    : suffix == kResidualSuffix   ? residual_features(b.dtype, b.threads, b.batch, b.out_c, b.out_h, b.out_w, extra_ms)
                    : suffix == kFromSignedSuffix ? signed_input_features(interior, extra_ms)
                    : interior.op == "gemm"       ? row_conversion_features(b.dtype, b.threads, b.m, b.k, extra_ms)
                                                  : conversion_features(b.dtype, b.threads, b.batch, b.in_c, b.in_h, b.in_w, extra_ms);
    if (suffix == kFromFloatSuffix && interior.op != "gemm") c.op = "convert_precision";
    conversions[group_key(c.op, c.dtype, c.threads)].push_back(c);
  }
  for (const auto& [key, pts] : conversions) fit_group(pts);
  p.summary_.heldout_median_roofline = median(err_roof);
  p.summary_.heldout_median_knn = median(err_knn);
  p.summary_.heldout_within10_roofline = share_within(err_roof, 0.10);
  p.summary_.heldout_within10_knn = share_within(err_knn, 0.10);
  p.summary_.heldout_median_chosen = median(err_chosen);
  p.summary_.heldout_within10_chosen = share_within(err_chosen, 0.10);
  int knn_groups = 0;
  for (const GroupSummary& g : p.summary_.groups) knn_groups += g.use_knn;
  p.summary_.method = knn_groups == 0                                             ? "roofline"
                      : knn_groups == static_cast<int>(p.summary_.groups.size()) ? "roofline+knn"
                                                                                  : "per group";
  // Per-step overhead: what the smallest elementwise kernel (the sweep's add) costs beyond its bytes.
  double overhead = 0;
  int counted = 0;
  for (const auto& [key, g] : p.groups_)
    if (g.op == "add") overhead += g.params.overhead_ms, ++counted;
  p.summary_.step_overhead_ms = counted ? overhead / counted : 0.002;
  return p;
}

double LatencyPredictor::dram_bytes_per_ms(int threads) const {
  if (bandwidth_.empty()) return 0;
  return nearest_threads_at_or_above(bandwidth_, threads).back().second;  // the largest working set measured
}

double LatencyPredictor::bandwidth_bytes_per_ms(double working_set, int threads) const {
  if (bandwidth_.empty()) return 10e6;  // 10 GB/s: a floor when no bandwidth was measured
  const auto& table = nearest_threads_at_or_above(bandwidth_, threads);
  if (working_set <= table.front().first) return table.front().second;
  if (working_set >= table.back().first) return table.back().second;
  for (size_t i = 1; i < table.size(); ++i)
    if (working_set <= table[i].first) {
      const double t = std::log(working_set / table[i - 1].first) / std::log(table[i].first / table[i - 1].first);
      return std::exp(std::log(table[i - 1].second) * (1 - t) + std::log(table[i].second) * t);
    }
  return table.back().second;
}

double LatencyPredictor::weight_refetch_ms_per_byte(const std::string& dtype, int threads, double working_set) const {
  auto d = weight_refetch_.find(dtype);
  if (d == weight_refetch_.end()) d = weight_refetch_.find("f32");
  if (d == weight_refetch_.end() || d->second.empty()) return 0;
  const auto& table = nearest_threads_at_or_above(d->second, threads);
  if (working_set <= table.front().first) return 0;
  if (working_set >= table.back().first) return table.back().second;
  for (size_t i = 1; i < table.size(); ++i)
    if (working_set <= table[i].first) {  // linear in log(working set)
      const double t = std::log(working_set / table[i - 1].first) / std::log(table[i].first / table[i - 1].first);
      return table[i - 1].second * (1 - t) + table[i].second * t;
    }
  return table.back().second;
}

StepPrediction LatencyPredictor::kernel_ms(const Measurement& m) const {
  // A stem (3 input channels) from the stem points where the profile has them; older profiles price it as a conv.
  if (m.op == "conv" && m.in_c > 0 && m.in_c <= kStemMaxChannels && has_group(kStemConvOp, m.dtype)) {
    Measurement stem = m;
    stem.op = kStemConvOp;
    return kernel_ms(stem);
  }
  // A profile without depth-first points (older, or a CPU without AVX-512): a fused block
  // costs like a convolution of its MACs.
  if (m.op.starts_with("depth_first") && !has_group(m.op, "f32")) {
    Measurement other = m;
    other.op = m.op != "depth_first" && has_group("depth_first", "f32") ? "depth_first" : "conv";
    return kernel_ms(other);
  }
  // The group of this op and dtype with the nearest thread count (pooling and add are measured in
  // f32 only: other dtypes use the f32 group).
  const Group* best = nullptr;
  for (const std::string& dtype : {m.dtype, std::string("f32")}) {
    for (const auto& [key, g] : groups_)
      if (g.op == m.op && g.dtype == dtype &&
          (!best || std::abs(g.threads - m.threads) < std::abs(best->threads - m.threads)))
        best = &g;
    if (best) break;
  }
  if (!best) {
    const double bw = bandwidth_bytes_per_ms(m.bytes, m.threads);
    return {summary_.step_overhead_ms + m.bytes / bw, "bandwidth (no " + m.op + " points)"};
  }
  // A max pool compares as many lanes per instruction as its elements allow: priced from the
  // float32 group, a u8 pool counts a quarter of its window ops, a bf16 one half (ResNet-18 int8's
  // pool at batch 8: 0.8 ms measured, 6.2 priced at float32's compare rate; the sweep pools float32 only).
  Measurement lanes = m;
  if (m.op == "maxpool" && best->dtype != m.dtype) lanes.macs *= dtype_element_bytes(m.dtype) / dtype_element_bytes(best->dtype);
  const auto price = [&](const Group& g, BatchSplit* used = nullptr) {
    const BatchSplit split = split_by_batch(g, lanes);
    double ms = roofline_ms(g.params, split.part.macs, split.part.bytes);
    if (g.use_knn) ms *= std::exp(knn_residual(g, split.part, neighbours_));
    ms *= split.parts;
    if (g.threads != m.threads) ms *= static_cast<double>(g.threads) / static_cast<double>(m.threads);
    if (used) *used = split;
    return ms;
  };
  BatchSplit split;
  double ms = price(*best, &split);
  std::string how = best->op + "/" + best->dtype + "/t" + std::to_string(best->threads) + (best->use_knn ? " roofline+knn" : " roofline");
  if (split.parts > 1)
    how += ", " + std::to_string(std::llround(split.parts)) + " x batch " + std::to_string(split.part.batch) + " (beyond the sweep's largest point)";
  // T threads never take less than 1/T of one thread's time: a group fitted at T threads may
  // promise more (the two-thread "convert" group, differences of two noisy times, priced ConvNeXt-T's
  // Transposes 5x below one thread's; they measure 1.6x faster). Scored on four full runs of the
  // whole-model check: 2-5 more cases within 10% in each.
  if (m.threads > 1 && best->threads == m.threads) {
    for (const auto& [key, g] : groups_)
      if (g.op == best->op && g.dtype == best->dtype && g.threads == 1) {
        const double floor = price(g);
        if (ms < floor) ms = floor, how += ", floor: one thread's price / threads";
      }
  }
  return {ms, how};
}

bool LatencyPredictor::has_group(const std::string& op, const std::string& dtype) const {
  for (const auto& [key, g] : groups_)
    if (g.op == op && g.dtype == dtype) return true;
  return false;
}

bool LatencyPredictor::has_dtype(const std::string& dtype) const {
  for (const auto& [key, g] : groups_)
    if (g.dtype == dtype) return true;
  return false;
}

double LatencyPredictor::epilogue_ms(double ops, int threads) const {
  // The eltwise group's compute rate alone: the epilogue runs on output tiles still in registers
  // or L1, so neither the chain's memory traffic nor its per-step overhead applies.
  const Group* best = nullptr;
  for (const auto& [key, g] : groups_)
    if (g.op == "eltwise" && g.dtype == "f32" && g.params.macs_per_ms > 0 &&
        (!best || std::abs(g.threads - threads) < std::abs(best->threads - threads)))
      best = &g;
  if (!best) return 0;
  return ops / best->params.macs_per_ms * static_cast<double>(best->threads) / static_cast<double>(threads);
}

StepPrediction LatencyPredictor::step_ms(const StepFeatures& f) const {
  if (f.view) return {0.0, "view"};
  // LayerNorm points came later (2026-12-06, session 11): in a profile without them it is priced as a stream.
  const bool unswept = f.m.op == "layernorm" &&
                       std::none_of(groups_.begin(), groups_.end(), [](const auto& g) { return g.second.op == "layernorm"; });
  if (!f.m.op.empty() && !unswept) return kernel_ms(f.m);
  // Leaving a oneDNN format is a transposition, not a stream: the reverse of the conversion a
  // plain-input sweep conv times (ShuffleNetV2 at batch 32: 0.44 ms priced as a stream, 4.0 measured).
  // A Transpose that moves the innermost axis is the same permutation (ConvNeXt's NCHW <-> NHWC at
  // batch 8: 0.21 ms priced as a stream, 2.6 measured).
  if ((f.input_conversion == "from layout" || f.input_conversion == "transpose") && has_group("convert", f.m.dtype)) {
    StepPrediction s = kernel_ms(conversion_features(f.m.dtype, f.m.threads, f.m.batch, f.m.in_c, f.m.in_h, f.m.in_w));
    s.how = f.input_conversion == "transpose" ? "convert (a transposition)" : "convert (from a oneDNN format)";
    return s;
  }
  // Data movement without a sweep counterpart (conversions, concat, slices, elementwise): priced
  // like the sweep's Add, an Engine kernel that streams its bytes, rather than at the raw read
  // bandwidth, which in cache is 3-6x what real copy kernels reach (ShuffleNetV2's concats).
  // The step's own dtype first (a GPU profile sweeps Add in f32 and f16), else any.
  const Group* add = nullptr;
  for (const std::string& dtype : {f.m.dtype, std::string()}) {
    for (const auto& [key, g] : groups_)
      if (g.op == "add" && (dtype.empty() || g.dtype == dtype) &&
          (!add || std::abs(g.threads - f.m.threads) < std::abs(add->threads - f.m.threads)))
        add = &g;
    if (add) break;
  }
  if (add && add->params.bytes_per_ms > 0) {
    double ms = add->params.overhead_ms + f.m.bytes / add->params.bytes_per_ms;
    if (add->threads != f.m.threads) ms *= static_cast<double>(add->threads) / static_cast<double>(f.m.threads);
    return {ms, "add bandwidth"};
  }
  const double bw = bandwidth_bytes_per_ms(f.m.bytes, f.m.threads);
  return {summary_.step_overhead_ms + f.m.bytes / bw, "bandwidth"};
}

PlanPrediction LatencyPredictor::predict(const std::vector<StepFeatures>& steps) const {
  // Weights come from wherever the run leaves them. The sweep repeats one op, so its weights stay
  // in cache; in a model every other layer passes through the caches between two reads of one
  // layer's weights. A step therefore takes at least its weights over the streaming bandwidth at
  // the run's working set (every step's bytes): DRAM once the run outgrows the caches (the
  // classifier of ResNet-50 at batch 1: 0.17 ms predicted from the hot sweep, 0.54 measured,
  // 8 MB of weights at 15 GB/s).
  double working_set = 0;
  for (const StepFeatures& f : steps)
    if (!f.view) working_set += f.m.bytes;
  PlanPrediction p;
  for (const StepFeatures& f : steps) {
    // A fused residual: its own cost from the sweep's residual convs, else its bytes in the step's.
    const bool residual_group = f.residual_elements > 0 && has_group("residual", f.m.dtype);
    StepFeatures with_residual_bytes;
    if (f.residual_elements > 0 && !residual_group) {
      with_residual_bytes = f;
      with_residual_bytes.m.bytes += f.residual_elements * dtype_element_bytes(f.m.dtype);
    }
    StepPrediction s = step_ms(f.residual_elements > 0 && !residual_group ? with_residual_bytes : f);
    if (residual_group && f.m.out_h > 0 && f.m.out_w > 0) {
      s.ms += kernel_ms(residual_features(f.m.dtype, f.m.threads, f.m.batch, f.m.out_c, f.m.out_h, f.m.out_w)).ms;
      s.how += " + fused residual";
    }
    if (f.signed_input && has_group(f.m.op + kSignedInputGroupSuffix, f.m.dtype)) {
      s.ms += kernel_ms(signed_input_features(f.m)).ms;
      s.how += " + signed input";
    }
    if (f.epilogue_ops > 0) {
      // Measured inside kernels where the profile has it (the sweep's SiLU convolutions), else at
      // the eltwise chain's compute rate.
      const std::string dtype = has_group("epilogue", f.m.dtype) ? f.m.dtype : "f32";
      if (has_group("epilogue", dtype) && f.m.out_h > 0 && f.m.out_w > 0) {
        const double elements = static_cast<double>(f.m.batch * f.m.out_c * f.m.out_h * f.m.out_w);
        const Measurement e = epilogue_features(dtype, f.m.threads, f.m.batch, f.m.out_c, f.m.out_h, f.m.out_w,
                                                elements > 0 ? f.epilogue_ops / elements : 2.0);
        s.ms += kernel_ms(e).ms;
      } else {
        s.ms += epilogue_ms(f.epilogue_ops, f.m.threads);
      }
    }
    if (f.m.op == "gemm" && f.input_conversion == "precision") {
      // Profiles before the "rows in " gemm points have no such group: their gemm points read float32 and
      // converted it in the timed step, so the price above has it already.
      if (has_group(kRowConversionOp, f.m.dtype)) {
        s.ms += kernel_ms(row_conversion_features(f.m.dtype, f.m.threads, f.m.m, f.m.k)).ms;
        s.how += " + input precision conversion";
      }
    } else if ((f.input_conversion == "layout" || f.input_conversion == "precision") && !f.view) {
      const Measurement c = conversion_features(f.m.dtype, f.m.threads, f.m.batch, f.m.in_c, f.m.in_h, f.m.in_w);
      if (f.input_conversion == "layout" && has_group("convert", f.m.dtype)) {
        s.ms += kernel_ms(c).ms;
        s.how += " + input layout conversion";
      } else if (f.input_conversion == "precision" && has_group("convert_precision", f.m.dtype)) {
        Measurement cp = c;
        cp.op = "convert_precision";
        s.ms += kernel_ms(cp).ms;
        s.how += " + input precision conversion";
      } else if (f.input_conversion == "precision") {
        StepFeatures pass;  // no such points: an elementwise quantize, priced like any streaming step
        pass.m = c;
        pass.m.op.clear();
        s.ms += step_ms(pass).ms;
        s.how += " + input precision conversion";
      }
    }
    if (!f.view && f.weight_bytes > 0) {
      // The sweep read these weights hot; here the rest of the run passed through the caches since.
      if (const double per_byte = weight_refetch_ms_per_byte(f.m.dtype, f.m.threads, working_set); per_byte > 0) {
        s.ms += f.weight_bytes * per_byte;
        s.how += " + weights refetched";
      }
      const double cold = f.weight_bytes / bandwidth_bytes_per_ms(working_set, f.m.threads);
      if (cold > s.ms) s = {cold, s.how + ", floor: weights streamed"};
    }
    p.steps.push_back(s);
    p.total_ms += s.ms;
  }
  return p;
}

}  // namespace kiln::perf

namespace kiln::perf {

nlohmann::json LatencyPredictor::to_json() const {
  using nlohmann::json;
  json groups = json::array();
  for (const auto& [key, g] : groups_)
    groups.push_back({{"key", key}, {"op", g.op}, {"dtype", g.dtype}, {"threads", g.threads},
                      {"params", {g.params.overhead_ms, g.params.macs_per_ms, g.params.bytes_per_ms}},
                      {"use_knn", g.use_knn}, {"features", g.features}, {"residual", g.residual},
                      {"mean", g.mean}, {"scale", g.scale}});
  json bandwidth = json::array();
  for (const auto& [threads, table] : bandwidth_) bandwidth.push_back({{"threads", threads}, {"table", table}});
  json summary_groups = json::array();
  for (const GroupSummary& g : summary_.groups)
    summary_groups.push_back({{"op", g.op}, {"dtype", g.dtype}, {"threads", g.threads}, {"points", g.points},
                              {"params", {g.params.overhead_ms, g.params.macs_per_ms, g.params.bytes_per_ms}},
                              {"heldout_roofline", g.heldout_roofline}, {"heldout_knn", g.heldout_knn}, {"use_knn", g.use_knn}});
  const FitSummary& s = summary_;
  json weight_refetch = json::array();
  for (const auto& [dtype, by_threads] : weight_refetch_)
    for (const auto& [threads, table] : by_threads)
      weight_refetch.push_back({{"dtype", dtype}, {"threads", threads}, {"table", table}});
  return {{"neighbours", neighbours_}, {"groups", groups}, {"bandwidth", bandwidth}, {"weight_refetch", weight_refetch},
          {"summary", {{"points_used", s.points_used}, {"points_loaded", s.points_loaded}, {"loaded_kept", s.loaded_kept},
                       {"method", s.method}, {"heldout_median", {s.heldout_median_roofline, s.heldout_median_knn, s.heldout_median_chosen}},
                       {"heldout_within10", {s.heldout_within10_roofline, s.heldout_within10_knn, s.heldout_within10_chosen}},
                       {"step_overhead_ms", s.step_overhead_ms}, {"bandwidth_points", s.bandwidth_points}, {"weight_reuse_points", s.weight_reuse_points},
                       {"groups_only_loaded", s.groups_only_loaded}, {"points_superseded", s.points_superseded},
                       {"points_repaired", s.points_repaired}, {"groups", summary_groups}}}};
}

Result<LatencyPredictor> LatencyPredictor::from_json(const nlohmann::json& j) {
  // A cache file is ours, but may be stale or damaged: any shape error is a miss, not a crash.
  try {
    LatencyPredictor p;
    p.neighbours_ = j.at("neighbours").get<int>();
    const auto params = [](const nlohmann::json& a) {
      return RooflineParams{a.at(0).get<double>(), a.at(1).get<double>(), a.at(2).get<double>()};
    };
    for (const nlohmann::json& g : j.at("groups")) {
      Group group;
      group.op = g.at("op").get<std::string>();
      group.dtype = g.at("dtype").get<std::string>();
      group.threads = g.at("threads").get<int>();
      group.params = params(g.at("params"));
      group.use_knn = g.at("use_knn").get<bool>();
      group.features = g.at("features").get<std::vector<std::vector<double>>>();
      group.residual = g.at("residual").get<std::vector<double>>();
      group.mean = g.at("mean").get<std::vector<double>>();
      group.scale = g.at("scale").get<std::vector<double>>();
      KILN_REQUIRE(group.features.size() == group.residual.size() && group.mean.size() == group.scale.size(), parse,
                   "cached fit: group ", g.at("key").get<std::string>(), " is inconsistent");
      for (const auto& f : group.features)
        KILN_REQUIRE(f.size() == group.mean.size(), parse, "cached fit: feature width differs");
      set_group_extent(group);
      p.groups_[g.at("key").get<std::string>()] = std::move(group);
    }
    for (const nlohmann::json& b : j.at("bandwidth"))
      p.bandwidth_[b.at("threads").get<int>()] = b.at("table").get<std::vector<std::pair<double, double>>>();
    for (const nlohmann::json& w : j.at("weight_refetch"))
      p.weight_refetch_[w.at("dtype").get<std::string>()][w.at("threads").get<int>()] =
          w.at("table").get<std::vector<std::pair<double, double>>>();
    const nlohmann::json& s = j.at("summary");
    FitSummary& f = p.summary_;
    f.points_used = s.at("points_used").get<int>();
    f.points_loaded = s.at("points_loaded").get<int>();
    f.loaded_kept = s.at("loaded_kept").get<bool>();
    f.method = s.at("method").get<std::string>();
    const auto& hm = s.at("heldout_median");
    f.heldout_median_roofline = hm.at(0), f.heldout_median_knn = hm.at(1), f.heldout_median_chosen = hm.at(2);
    const auto& hw = s.at("heldout_within10");
    f.heldout_within10_roofline = hw.at(0), f.heldout_within10_knn = hw.at(1), f.heldout_within10_chosen = hw.at(2);
    f.step_overhead_ms = s.at("step_overhead_ms").get<double>();
    f.bandwidth_points = s.at("bandwidth_points").get<int>();
    f.weight_reuse_points = s.at("weight_reuse_points").get<int>();
    f.groups_only_loaded = s.at("groups_only_loaded").get<std::vector<std::string>>();
    f.points_superseded = s.at("points_superseded").get<int>();
    f.points_repaired = s.at("points_repaired").get<int>();
    for (const nlohmann::json& g : s.at("groups"))
      f.groups.push_back({g.at("op").get<std::string>(), g.at("dtype").get<std::string>(), g.at("threads").get<int>(),
                          g.at("points").get<int>(), params(g.at("params")), g.at("heldout_roofline").get<double>(),
                          g.at("heldout_knn").get<double>(), g.at("use_knn").get<bool>()});
    return p;
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::parse, "cached fit: ", e.what());
  }
}

}  // namespace kiln::perf
