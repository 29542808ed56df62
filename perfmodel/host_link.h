// The host <-> device copies of a GPU run, measured: `kiln bench-target --device cuda` times whole
// runs of a plan that takes an image batch in and gives a few values out (host_link points, in its
// bandwidth section), less their device time. A line ms = fixed + bytes / rate fitted to them prices a
// model's inputs and outputs; without such points the GPU model's spec prior does
// (PriorPredictor::host_copy_ms). On an H200 host with 16 cores kiln's chunked, multi-threaded copy
// moved a 38.5 MB batch in about 1.5 ms, where the prior's 8 GB/s says 4.8 (docs/cuda-backend.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "perfmodel/measurement.h"

namespace kiln::perf {

struct HostLinkFit {
  double fixed_ms = 0;      // per run: the synchronization and the launches around the copies
  double bytes_per_ms = 0;  // the copies' rate
  int points = 0;
};

// The fit over `measurements`' host_link points, or nothing when there are none.
std::optional<HostLinkFit> host_link_fit(const std::vector<Measurement>& measurements);
double host_link_ms(const HostLinkFit& fit, double io_bytes);
// "measured: 0.052 ms + 26.1 GB/s (3 points)"
std::string host_link_describe(const HostLinkFit& fit);

}  // namespace kiln::perf
