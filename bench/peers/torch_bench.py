#!/usr/bin/env python3
"""PyTorch peer for kiln's benchmarks (dev-only; the kiln product never needs Python).

Times a torchvision classifier in eval mode, eager and after torch.jit.optimize_for_inference,
the way `kiln bench --json` times a compiled plan (seeded inputs, warm-up, then the median, p90
and min of timed runs), and prints the same JSON fields.

Usage: python3 bench/peers/torch_bench.py MODEL --batch N [--threads T] [--iters K] [--warmup W]
                                          [--mode eager|optimized]
MODEL is a torchvision name (resnet18, resnet50, mobilenet_v2, efficientnet_b0, ...); weights
are random (nothing is downloaded), which does not change the time of dense kernels.
Exit status 77 when torch/torchvision is missing.
"""
import argparse
import json
import sys
import time

try:
    import torch
    import torchvision
except ImportError as e:
    print(f"torch_bench: {e}", file=sys.stderr)
    sys.exit(77)


def percentile(sorted_ms, p):
    return sorted_ms[min(round(p * (len(sorted_ms) - 1)), len(sorted_ms) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--mode", choices=["eager", "optimized"], default="optimized")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    started = time.perf_counter()
    model = getattr(torchvision.models, args.model)(weights=None).eval()
    x = torch.rand(args.batch, 3, 224, 224, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.inference_mode() if args.mode == "eager" else torch.no_grad():
        if args.mode == "optimized":
            model = torch.jit.optimize_for_inference(torch.jit.trace(model, x))
        ready_ms = (time.perf_counter() - started) * 1e3
        t0 = time.perf_counter()
        model(x)
        first_run_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(args.warmup):
            model(x)
        ms = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    median = percentile(ms, 0.5)
    print(json.dumps({
        "runtime": f"pytorch {torch.__version__} ({args.mode})", "model": args.model, "batch": args.batch,
        "threads": args.threads, "iters": args.iters, "warmup": args.warmup, "median_ms": median,
        "p90_ms": percentile(ms, 0.9), "min_ms": ms[0], "throughput_per_s": args.batch * 1000 / median,
        "ready_ms": ready_ms, "first_run_ms": first_run_ms,
    }, indent=2))


if __name__ == "__main__":
    main()
