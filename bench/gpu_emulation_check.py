#!/usr/bin/python3
"""How close `kiln verify --device cuda --emulate` (the GPU plan on this CPU's reference kernels,
values rounded as the CUDA engine stores them: kernels/verify/precision_emulation.h) comes to the
errors a real GPU run had against the same fp32 CPU reference.

For each model and precision it runs the emulation with the arguments bench/gpu_session.sh's
verify stage used on the GPU (`--random 4 --batch 2`, seed 1) and prints the emulated max relative
error and cosine beside the GPU's, read from that stage's verify.jsonl files (the newest row of
each model and precision wins, in the order the files are given). The GPU machine exported its own
copy of the torchvision models from the same seeds (tests/models/export_torchvision.py).

Usage: bench/gpu_emulation_check.py [VERIFY.jsonl ...] [--precisions tf32,fp16,bf16]
                                    [--models resnet18,...] [--kiln build/kiln] [--cache build/model-cache]
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RUNS = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "h100-*", "run*", "verify.jsonl")))


def emulate(kiln, onnx, precision):
    cmd = [kiln, "verify", onnx, "--random", "4", "--batch", "2", "--device", "cuda", "--cuda-precision", precision,
           "--emulate", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]
    report = json.loads(done.stdout)
    return report["outputs"][0], None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("jsonl", nargs="*", default=DEFAULT_RUNS)
    p.add_argument("--precisions", default="tf32,fp16,bf16")
    p.add_argument("--models", default="")
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    p.add_argument("--cache", default=os.path.join(ROOT, "build", "model-cache"))
    args = p.parse_args()
    gpu = {}
    engine = {}
    for path in args.jsonl:
        for line in open(path):
            row = json.loads(line)
            if "error" in row or row.get("max_rel_error") is None:
                continue
            gpu[(row["model"], row["precision"])] = row
            engine[(row["model"], row["precision"])] = os.path.relpath(path, ROOT)
    models = args.models.split(",") if args.models else sorted({m for m, _ in gpu})
    precisions = args.precisions.split(",")
    print("kiln verify --emulate (this CPU) vs the GPU's own run, --random 4 --batch 2, against the fp32 CPU reference")
    print(f"{'model':<20} {'prec':<5} {'GPU max rel':>11} {'emul max rel':>12} {'ratio':>6}  {'GPU 1-cos':>10} {'emul 1-cos':>10}  GPU run")
    ratios = {pr: [] for pr in precisions}
    for model in models:
        onnx = os.path.join(args.cache, model + ".onnx")
        if not os.path.exists(onnx):
            print(f"{model:<20} missing {onnx} (scripts/test.sh exports it)")
            continue
        for precision in precisions:
            measured = gpu.get((model, precision))
            got, error = emulate(args.kiln, onnx, precision)
            if error:
                print(f"{model:<20} {precision:<5} emulation failed: {error}")
                continue
            if not measured:
                print(f"{model:<20} {precision:<5} {'-':>11} {got['max_rel_error']:>12.2e} {'-':>6}  {'-':>10} {1 - got['cosine']:>10.1e}  (no GPU row)")
                continue
            ratio = got["max_rel_error"] / measured["max_rel_error"] if measured["max_rel_error"] > 0 else float("nan")
            if math.isfinite(ratio):
                ratios[precision].append(ratio)
            print(f"{model:<20} {precision:<5} {measured['max_rel_error']:>11.2e} {got['max_rel_error']:>12.2e} {ratio:>6.2f}  "
                  f"{1 - measured['cosine']:>10.1e} {1 - got['cosine']:>10.1e}  {engine[(model, precision)]}")
            sys.stdout.flush()
    for precision, r in ratios.items():
        if r:
            geo = math.exp(sum(math.log(x) for x in r) / len(r))
            print(f"{precision}: emulated / GPU max rel error, geomean {geo:.2f} over {len(r)} (min {min(r):.2f}, max {max(r):.2f})")


if __name__ == "__main__":
    main()
