#!/usr/bin/python3
"""int8 accuracy of kiln beside ONNX Runtime on the same quantization (dev-only; needs numpy and
bench/peers/node_modules/onnxruntime-node).

For each model: one seeded input batch (uniform in [-1, 1), like `kiln verify --random`), the fp32
reference from ONNX Runtime on the original model, then against it:
  kiln int8   the compiled plan (`kiln compile --passes default+quantize_int8 --calibration-random N`)
  ORT QDQ     ONNX Runtime on `kiln export` of the same quantization
  ORT QDQ+    ONNX Runtime on `kiln export --qdq-every-output` (every int8 output quantized)
  kiln QDQ    with --kiln-qdq: kiln's reference executor on the same export as ORT QDQ
Prints cosine similarity (all outputs flattened), top-1 agreement and the largest error relative to
the reference's largest magnitude; for the QDQ rows also cosine and top-1 agreement with kiln int8
itself (the export's fidelity: same scales at the same places, so only float rounding differs). If
kiln int8 and ORT QDQ agree, the error is the quantization scheme's, not kiln's kernels'.

Usage: bench/int8_peer_accuracy.py [--models a,b] [--samples 32] [--calibration 16] [--threads 2] [--kiln-qdq]
                                   [--kiln build/kiln] [--cache build/model-cache]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def metrics(y, ref):
    a, b = y.ravel().astype(np.float64), ref.ravel().astype(np.float64)
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    agree = float(np.mean(y.reshape(len(y), -1).argmax(1) == ref.reshape(len(ref), -1).argmax(1)))
    rel = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
    return cosine, agree, rel


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"int8_peer_accuracy: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--calibration", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kiln-qdq", action="store_true",
                   help="also run the QDQ export on kiln's reference executor (row 'kiln QDQ'; slow)")
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    p.add_argument("--cache", default=os.path.join(ROOT, "build", "model-cache"))
    args = p.parse_args()
    ort_run = ["node", os.path.join(ROOT, "bench", "peers", "ort_run.js")]
    threads = ["--threads", str(args.threads)]
    print(f"{args.samples} seeded samples (uniform [-1, 1), seed {args.seed}); calibration: {args.calibration} "
          f"seeded random samples; reference: ONNX Runtime fp32 on the original model")
    print(f"{'model':<20} {'run':<10} {'cosine':>9} {'top-1 agree':>12} {'max rel err':>12}"
          f"  {'vs kiln int8: cosine':>20} {'top-1':>6}")
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            model = os.path.join(args.cache, name + ".onnx")
            if not os.path.exists(model):
                print(f"{name}: {model} missing (tests/models/export_torchvision.py --out {args.cache})", file=sys.stderr)
                continue
            x = np.random.default_rng(args.seed).uniform(-1, 1, (args.samples, 3, 224, 224)).astype(np.float32)
            xin = os.path.join(work, "x.npy")
            np.save(xin, x)
            ref_file = os.path.join(work, "ref.npy")
            run(ort_run + [model, xin, ref_file] + threads)
            ref = np.load(ref_file)
            quant = ["--batch", str(args.samples), "--passes", "default+quantize_int8",
                     "--calibration-random", str(args.calibration)]
            plan = os.path.join(work, "int8.kiln")
            run([args.kiln, "compile", model, "-o", plan] + quant)
            out = os.path.join(work, "int8.npz")
            run([args.kiln, "run", plan, "-i", xin, "-o", out] + threads)
            with np.load(out) as z:
                rows = [("kiln int8", z[z.files[0]])]
            for label, extra in (("ORT QDQ", []), ("ORT QDQ+", ["--qdq-every-output"])):
                qdq = os.path.join(work, "qdq.onnx")
                run([args.kiln, "export", model, "-o", qdq] + quant + extra)
                y_file = os.path.join(work, "y.npy")
                run(ort_run + [qdq, xin, y_file] + threads)
                rows.append((label, np.load(y_file)))
                if not extra and args.kiln_qdq:
                    # The same QDQ file on kiln's reference executor: float arithmetic throughout, so its
                    # agreement with kiln int8 is the export's fidelity without ORT's integer kernels.
                    y_npz = os.path.join(work, "y_ref.npz")
                    run([args.kiln, "run", qdq, "-i", xin, "-o", y_npz])
                    with np.load(y_npz) as z:
                        rows.append(("kiln QDQ", z[z.files[0]]))
            for label, y in rows:
                cosine, agree, rel = metrics(y, ref)
                line = f"{name:<20} {label:<10} {cosine:9.5f} {100 * agree:11.1f}% {rel:12.4f}"
                if label != "kiln int8":
                    to_kiln, agree_kiln, _ = metrics(y, rows[0][1])
                    line += f"  {to_kiln:20.5f} {100 * agree_kiln:5.1f}%"
                print(line, flush=True)


if __name__ == "__main__":
    main()
