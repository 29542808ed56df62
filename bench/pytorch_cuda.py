#!/usr/bin/env python3
"""PyTorch on an NVIDIA GPU over the torchvision set: the peer of bench/cuda_torchvision.sh.

Dev/bench-only (kiln itself never needs Python). Random-weight torchvision models (weights=None,
torch.manual_seed(0)), eval mode, torch.inference_mode, NCHW, cudnn.benchmark on (PyTorch's best
eager convolution choice). Two times per configuration, as kiln bench --device cuda reports them:
  device_median_ms  input already on the GPU in the model's dtype, output left there; CUDA events
                    around each forward (what GPU frameworks usually quote);
  median_ms         host to host: a float32 host tensor copied in, cast, forward, output copied
                    back to the host as float32; wall clock (kiln bench's end-to-end figure).
One JSON object per line.

Usage: python3 bench/pytorch_cuda.py [--models a,b] [--batches 1,64] [--precision fp16|bf16|fp32]
                                     [--mode eager|compile|compile-reduce-overhead ...] [--iters 50] [--warmup 10]
"""

import argparse
import json
import statistics
import sys
import time

MODELS = [
    "resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0",
    "densenet121", "googlenet", "convnext_tiny",
]


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def build(torch, torchvision, name):
    torch.manual_seed(0)
    kwargs = {"weights": None}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    return getattr(torchvision.models, name)(**kwargs).eval()


def time_one(torch, model, batch, dtype, iters, warmup):
    device_x = torch.randn(batch, 3, 224, 224, device="cuda").to(dtype)
    host_x = torch.randn(batch, 3, 224, 224, dtype=torch.float32).pin_memory()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.inference_mode():
        for _ in range(warmup):
            model(device_x)
        torch.cuda.synchronize()
        device_ms = []
        for _ in range(iters):
            start.record()
            model(device_x)
            stop.record()
            stop.synchronize()
            device_ms.append(start.elapsed_time(stop))
        host_ms = []
        for i in range(warmup + iters):
            t0 = time.perf_counter()
            y = model(host_x.to("cuda", non_blocking=True).to(dtype)).float().cpu()
            t1 = time.perf_counter()
            if i >= warmup:
                host_ms.append((t1 - t0) * 1e3)
    return device_ms, host_ms, tuple(y.shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--precision", default="fp16", choices=["fp16", "bf16", "fp32"])
    ap.add_argument("--mode", action="append", choices=["eager", "compile", "compile-reduce-overhead"])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    import torch
    import torchvision

    if not torch.cuda.is_available():
        print("pytorch_cuda: no CUDA device visible to PyTorch", file=sys.stderr)
        return 77
    torch.backends.cudnn.benchmark = True
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[args.precision]
    gpu = torch.cuda.get_device_name(0)
    for name in args.models.split(","):
        base = build(torch, torchvision, name).cuda().to(dtype)
        for mode in args.mode or ["eager"]:
            model = base
            if mode != "eager":
                model = torch.compile(base, mode="reduce-overhead" if mode == "compile-reduce-overhead" else "default")
            for batch in (int(b) for b in args.batches.split(",")):
                row = {"model": name, "batch": batch, "precision": args.precision, "mode": mode, "gpu": gpu,
                       "torch": torch.__version__}
                try:
                    t0 = time.perf_counter()
                    device_ms, host_ms, shape = time_one(torch, model, batch, dtype, args.iters, args.warmup)
                    row.update(device_median_ms=statistics.median(device_ms), device_p90_ms=percentile(device_ms, 0.9),
                               median_ms=statistics.median(host_ms), p90_ms=percentile(host_ms, 0.9),
                               output_shape=list(shape), seconds=round(time.perf_counter() - t0, 1))
                except Exception as e:  # a mode that fails here is reported, not fatal
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                print(json.dumps(row), flush=True)
        del base
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
