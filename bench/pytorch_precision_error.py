#!/usr/bin/env python3
"""PyTorch's own reduced-precision error on kiln's torchvision test models: the yardstick for
`kiln verify --device cuda --cuda-precision fp16|bf16`.

Dev/bench-only (kiln never needs Python). The models are built exactly as
tests/models/export_torchvision.py builds the ONNX files kiln verifies (seeded random weights,
then conditioned), so both frameworks are measured on the same weights. For each model: the
fp32 output on the GPU (TF32 off) on a seeded normal input, then the model cast to each
precision (PyTorch's usual whole-model cast: weights and activations in that type; tf32: the
float32 model with TF32 allowed in cuDNN and matmuls, as kiln's tf32), compared
with kiln verify's figures: cosine, max_rel_error = max|diff| / max|fp32|, top-1 agreement.
One JSON object per line.

Usage: python3 bench/pytorch_precision_error.py [--models a,b] [--precisions fp16,bf16,tf32] [--batch 2] [--samples 4]
"""

import argparse
import copy
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
import export_torchvision  # noqa: E402  (build_model, condition_model: the exported weights)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(export_torchvision.ALL_MODELS))
    ap.add_argument("--precisions", default="fp16,bf16")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to try the script without a GPU")
    args = ap.parse_args()
    import torch
    import torchvision

    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        print("pytorch_precision_error: no CUDA device visible to PyTorch", file=sys.stderr)
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    for name in args.models.split(","):
        model = export_torchvision.build_model(torch, torchvision, name)
        export_torchvision.condition_model(torch, model)
        model = model.to(dev).eval()
        torch.manual_seed(1)
        x = torch.randn(args.samples, 3, 224, 224, dtype=torch.float32)
        with torch.inference_mode():
            ref = torch.cat([model(b.to(dev)).float() for b in x.split(args.batch)]).double()
            for precision in args.precisions.split(","):
                if precision == "tf32":
                    torch.backends.cuda.matmul.allow_tf32 = True
                    torch.backends.cudnn.allow_tf32 = True
                    got = torch.cat([model(b.to(dev)).float() for b in x.split(args.batch)]).double()
                    torch.backends.cuda.matmul.allow_tf32 = False
                    torch.backends.cudnn.allow_tf32 = False
                else:
                    low = copy.deepcopy(model).to(dtypes[precision])  # .to() casts in place: the fp32 model stays
                    got = torch.cat([low(b.to(dev).to(dtypes[precision])).float() for b in x.split(args.batch)]).double()
                    del low
                diff = (got - ref).abs().max().item()
                cosine = torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0).item()
                agree = (got.argmax(1) == ref.argmax(1)).double().mean().item()
                print(json.dumps({"model": name, "precision": precision, "framework": f"torch {torch.__version__}",
                                  "cosine": cosine, "max_rel_error": diff / ref.abs().max().item(),
                                  "top1_agreement": agree}), flush=True)
        del model
        if dev == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
