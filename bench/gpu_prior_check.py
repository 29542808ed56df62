#!/usr/bin/python3
"""How far kiln's GPU latency predictions are from its measured CUDA runs: the spec prior
(perfmodel/prior_predictor.h), or a GPU profile measured by `kiln bench-target --device cuda`.

Reads a `kiln bench --device cuda --json` JSONL (bench/cuda_torchvision.sh; one object per model,
batch and precision, with device_median_ms and median_ms) and, for each line, asks
`kiln predict MODEL --target TARGET --precision P --batch B --json` (no GPU needed). TARGET is a
prior's id, or a profile's id with --db naming the store it was imported into (`kiln bench-target
--import gpu_profile.json`). With --cuda-plan the model is first compiled with the CUDA pipeline
(`kiln compile --device cuda`, what the GPU runs) and that plan is priced, instead of the CPU plan
`kiln predict` compiles. Prints predicted vs measured device and end-to-end time and the share
within ±10% / ±25% / ±50%.

Usage: bench/gpu_prior_check.py [JSONL] [--target nvidia-h100-sxm] [--db STORE] [--cuda-plan]
                                [--kiln build/kiln] [--cache build/model-cache]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("jsonl", nargs="?", default=os.path.join(ROOT, "bench", "results", "h100-2026-11-26", "kiln_bench.jsonl"))
    p.add_argument("--target", default="nvidia-h100-sxm")
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    p.add_argument("--cache", default=os.path.join(ROOT, "build", "model-cache"))
    p.add_argument("--db", help="benchmark store holding the target's profile (default: kiln's)")
    p.add_argument("--cuda-plan", action="store_true", help="price the plan compiled with the CUDA pipeline")
    args = p.parse_args()
    rows = [json.loads(line) for line in open(args.jsonl) if line.strip()]
    plans = tempfile.TemporaryDirectory()
    print(f"{args.target} ({'CUDA' if args.cuda_plan else 'CPU'} plan) vs measured ({os.path.relpath(args.jsonl, ROOT)})")
    print(f"{'model':<20} {'prec':<5} {'batch':>5} {'dev meas':>9} {'dev pred':>9} {'err':>6}  {'e2e meas':>9} {'e2e pred':>9} {'err':>6}")
    errors = {"device": [], "e2e": []}
    for r in rows:
        model = os.path.join(args.cache, r["name"] + ".onnx")
        if not os.path.exists(model):
            print(f"{r['name']}: {model} missing", file=sys.stderr)
            continue
        command = [args.kiln, "predict", model, "--target", args.target, "--precision", r["precision"], "--batch", str(r["batch"]),
                   "--json"] + (["--db", args.db] if args.db else [])
        if args.cuda_plan:
            plan = os.path.join(plans.name, f"{r['name']}.b{r['batch']}.kiln")
            if not os.path.exists(plan):
                made = subprocess.run([args.kiln, "compile", model, "--device", "cuda", "--batch", str(r["batch"]), "-o", plan],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if made.returncode != 0:
                    sys.exit(f"kiln compile failed: {made.stderr.strip()}")
            command[2] = plan
            del command[7:9]  # a .kiln carries its batch
        out = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if out.returncode != 0:
            sys.exit(f"kiln predict failed: {out.stderr.strip()}")
        pred = json.loads(out.stdout)
        dev_err = pred["predicted_device_ms"] / r["device_median_ms"] - 1
        e2e_err = pred["predicted_median_ms"] / r["median_ms"] - 1
        errors["device"].append(dev_err)
        errors["e2e"].append(e2e_err)
        print(f"{r['name']:<20} {r['precision']:<5} {r['batch']:>5} {r['device_median_ms']:9.3f} {pred['predicted_device_ms']:9.3f} "
              f"{100 * dev_err:+5.0f}%  {r['median_ms']:9.3f} {pred['predicted_median_ms']:9.3f} {100 * e2e_err:+5.0f}%", flush=True)
    for what, errs in errors.items():
        if not errs:
            continue
        errs_abs = sorted(abs(e) for e in errs)
        median = errs_abs[len(errs_abs) // 2]
        print(f"{what}: median |error| {100 * median:.1f}%, within ±10% {sum(e <= 0.10 for e in errs_abs)}/{len(errs)}, "
              f"within ±25% {sum(e <= 0.25 for e in errs_abs)}/{len(errs)}, within ±50% {sum(e <= 0.5 for e in errs_abs)}/{len(errs)}")


if __name__ == "__main__":
    main()
