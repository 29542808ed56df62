#!/usr/bin/env python3
"""Joins kiln's GPU bench (bench/cuda_torchvision.sh, JSONL=...) with PyTorch's
(bench/pytorch_cuda.py) and prints one table: per model and batch, kiln's and PyTorch's median
latency on the device alone and end to end, and kiln / PyTorch; then the geometric mean of the
ratios (below 1.0: kiln is faster).

Usage: python3 bench/compare_cuda.py KILN.jsonl TORCH.jsonl [--mode eager]
"""

import argparse
import json
import math


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("torch")
    ap.add_argument("--mode", default="eager")
    args = ap.parse_args()
    kiln = {(r["name"], r["batch"], r["precision"]): r for r in load(args.kiln)}
    torch = {(r["model"], r["batch"], r["precision"]): r for r in load(args.torch) if r.get("mode") == args.mode}
    header = ("model", "prec", "batch", "kiln dev ms", f"torch {args.mode} dev ms", "ratio", "kiln e2e ms", "torch e2e ms",
              "ratio")
    print("%-20s %-5s %5s %12s %20s %7s %12s %13s %7s" % header)
    device_ratios, e2e_ratios = [], []
    for key in sorted(set(kiln) | set(torch), key=lambda k: (k[0], k[2], k[1])):
        k, t = kiln.get(key, {}), torch.get(key, {})
        cells = []
        for field in ("device_median_ms", "median_ms"):
            kv, tv = k.get(field), t.get(field)
            ratio = kv / tv if kv and tv else None
            if ratio:
                (device_ratios if field == "device_median_ms" else e2e_ratios).append(ratio)
            cells.append((kv, tv, ratio))
        fmt = lambda v, w: ("%*.3f" % (w, v)) if isinstance(v, float) else ("%*s" % (w, "-"))
        line = "%-20s %-5s %5d " % (key[0], key[2], key[1])
        line += " ".join([fmt(cells[0][0], 12), fmt(cells[0][1], 20), fmt(cells[0][2], 7),
                          fmt(cells[1][0], 12), fmt(cells[1][1], 13), fmt(cells[1][2], 7)])
        if k.get("error") or t.get("error"):
            line += "   " + (k.get("error") or t.get("error"))
        print(line)
    print("geomean kiln/torch: device %.3f over %d, end to end %.3f over %d" %
          (geomean(device_ratios), len(device_ratios), geomean(e2e_ratios), len(e2e_ratios)))


if __name__ == "__main__":
    main()
