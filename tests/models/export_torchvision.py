#!/usr/bin/python3
"""Export torchvision classification models to ONNX, plus a seeded input and the PyTorch output.

Dev/test-only helper for kiln's model tests (the kiln product never needs Python).

Usage:
  /usr/bin/python3 tests/models/export_torchvision.py --out DIR [--models a,b,c] [--preserve-bn] [--force]

For each model writes:
  DIR/<model>.onnx            (or DIR/<model>_bn.onnx with --preserve-bn: BatchNormalization kept as
                               separate inference-mode nodes instead of being folded into Conv)
  DIR/<model>.input.npy       float32 [2,3,224,224], torch.manual_seed(1) normal (batch 2 exercises the
                               dynamic batch axis)
  DIR/<model>.expected.npy    the PyTorch (eval-mode) output for that input, float32 [2,1000]

Weights are random but deterministic (torch.manual_seed(0) before constructing each model, weights=None):
nothing is downloaded. Stock torchvision init makes a poor numerical reference (BatchNorm running stats are
0/1 and gamma/beta 1/0, so eval-mode activations decay: efficientnet_b0 logits come out ~1e-14, mobilenet_v2
~1e-9; ConvNeXt's layer_scale of 1e-6 hides every block; BN folding becomes a near no-op). So unless
--raw-init is given, each model is then "conditioned", deterministically (seeded generator):
  * BatchNorm: gamma ~ U(0.5, 1.5), beta ~ N(0, 0.1), then running mean/var are calibrated with one
    train-mode pass (momentum=None, BN layers only; dropout/stochastic depth stay off) over a seeded random
    batch [4,3,224,224] (torch.manual_seed(2)), so activations stay O(1) and folding is non-trivial;
  * LayerNorm: gamma ~ U(0.5, 1.5), beta ~ N(0, 0.1); ConvNeXt layer_scale ~ U(0.1, 0.5);
  * Conv2d/Linear biases (zero-initialised by torchvision) ~ N(0, 0.05).

A model whose files all exist already is skipped (build-time cache) unless --force. The input/expected
files are shared by the folded and --preserve-bn exports (same weights, same input).

Exit status: 0 on success, 77 when numpy/torch/torchvision/onnx is missing (a ctest skip), 2 on a usage
error, 1 when an export fails.
"""

import argparse
import os
import sys
import time
import warnings

ALL_MODELS = [
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "efficientnet_b0",
    "squeezenet1_1",
    "shufflenet_v2_x1_0",
    "densenet121",
    "googlenet",
    "convnext_tiny",
]

OPSET = 13
EXIT_MISSING_DEPS = 77  # ctest's SKIP_RETURN_CODE for models_export (tests/models/CMakeLists.txt)
INPUT_SHAPE = (2, 3, 224, 224)


def die(msg, code=2):
    print(f"export_torchvision: {msg}", file=sys.stderr)
    sys.exit(code)


def import_deps():
    missing = []
    mods = {}
    for name in ("numpy", "torch", "torchvision", "onnx"):
        try:
            mods[name] = __import__(name)
        except ImportError as e:  # pragma: no cover - depends on the environment
            missing.append(f"{name} ({e})")
    if missing:
        die(
            "missing Python module(s): " + ", ".join(missing) + "\n"
            "  Use Debian's interpreter (/usr/bin/python3) with python3-torch python3-torchvision "
            "python3-onnx python3-numpy installed (scripts/setup.sh --tests installs them).",
            code=EXIT_MISSING_DEPS,
        )
    return mods["numpy"], mods["torch"], mods["torchvision"], mods["onnx"]


def build_model(torch, torchvision, name):
    torch.manual_seed(0)
    ctor = getattr(torchvision.models, name)
    kwargs = {"weights": None}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    model = ctor(**kwargs)
    model.eval()
    return model


def condition_model(torch, model):
    """Make the random-init model a meaningful numerical reference (see the module docstring)."""
    nn = torch.nn
    g = torch.Generator().manual_seed(1234)

    def uniform_(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=g) * (hi - lo) + lo)

    def normal_(t, std):
        t.copy_(torch.randn(t.shape, generator=g) * std)

    bns = []
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                bns.append(m)
                if m.affine:
                    uniform_(m.weight, 0.5, 1.5)
                    normal_(m.bias, 0.1)
            elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                uniform_(m.weight, 0.5, 1.5)
                normal_(m.bias, 0.1)
            elif isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
                normal_(m.bias, 0.05)  # torchvision zero-inits these: a bias-add bug would be invisible
            if hasattr(m, "layer_scale") and isinstance(m.layer_scale, nn.Parameter):
                uniform_(m.layer_scale, 0.1, 0.5)

    if bns:
        saved = [(m, m.momentum) for m in bns]
        model.eval()
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average: after one batch, exactly that batch's stats
            m.train()
        torch.manual_seed(2)
        calib = torch.randn(4, *INPUT_SHAPE[1:], dtype=torch.float32)
        with torch.no_grad():
            model(calib)
        for m, momentum in saved:
            m.momentum = momentum
    model.eval()
    return len(bns)


def check_bn_inference_mode(onnx, model_proto, name):
    """Every BatchNormalization must be inference-mode: one output, no training_mode=1."""
    n_bn = 0
    for node in model_proto.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        n_bn += 1
        outs = [o for o in node.output if o]
        if len(outs) != 1:
            die(f"{name}: BatchNormalization '{node.name}' has {len(outs)} outputs (training mode?)")
        for a in node.attribute:
            if a.name == "training_mode" and onnx.helper.get_attribute_value(a) != 0:
                die(f"{name}: BatchNormalization '{node.name}' has training_mode=1")
    return n_bn


def export_one(np, torch, torchvision, onnx, name, out_dir, preserve_bn, force, raw_init):
    onnx_path = os.path.join(out_dir, f"{name}_bn.onnx" if preserve_bn else f"{name}.onnx")
    input_path = os.path.join(out_dir, f"{name}.input.npy")
    expected_path = os.path.join(out_dir, f"{name}.expected.npy")
    paths = (onnx_path, input_path, expected_path)
    if not force and all(os.path.exists(p) for p in paths):
        print(f"{name}: cached ({os.path.basename(onnx_path)})", flush=True)
        return

    t0 = time.perf_counter()
    model = build_model(torch, torchvision, name)
    if not raw_init:
        condition_model(torch, model)

    torch.manual_seed(1)
    x = torch.randn(*INPUT_SHAPE, dtype=torch.float32)

    with torch.no_grad():
        expected = model(x)
    if isinstance(expected, tuple):  # defensive: e.g. GoogLeNetOutputs namedtuple
        expected = expected[0]
    t_run = time.perf_counter()

    export_kwargs = dict(
        export_params=True,
        opset_version=OPSET,
        input_names=["input"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
        do_constant_folding=True,
    )
    if preserve_bn:
        # With the module in eval() mode, PRESERVE keeps BatchNormalization as a separate node but
        # exports it in inference form (running stats, a single output); TrainingMode.TRAINING would
        # emit the training form with extra outputs.
        export_kwargs["training"] = torch.onnx.TrainingMode.PRESERVE
    else:
        export_kwargs["training"] = torch.onnx.TrainingMode.EVAL
    # PyTorch >= 2.9 defaults to its dynamo exporter (opset 18 idioms, other node names); the
    # TorchScript exporter is the one these tests were written against (Debian's 1.13 has no choice).
    import inspect

    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        export_kwargs["dynamo"] = False

    tmp_path = onnx_path + ".tmp"
    with torch.no_grad(), warnings.catch_warnings():
        # torch warns about constant folding for any PRESERVE export; it only matters when the module
        # is in training mode, and ours is in eval mode.
        warnings.filterwarnings("ignore", message=".*constant folding be turned off.*")
        torch.onnx.export(model, x, tmp_path, **export_kwargs)
    t_export = time.perf_counter()

    proto = onnx.load(tmp_path)
    onnx.checker.check_model(proto)
    n_bn = check_bn_inference_mode(onnx, proto, name)
    if preserve_bn and n_bn == 0 and any(
        isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()
    ):
        die(f"{name}: --preserve-bn export contains no BatchNormalization node")
    os.replace(tmp_path, onnx_path)

    np.save(input_path, x.numpy())
    np.save(expected_path, expected.numpy().astype(np.float32))
    t1 = time.perf_counter()

    size_mb = os.path.getsize(onnx_path) / 1e6
    print(
        f"{name}: {t1 - t0:.1f}s (forward {t_run - t0:.1f}s, export {t_export - t_run:.1f}s) "
        f"-> {os.path.basename(onnx_path)} {size_mb:.1f} MB, {len(proto.graph.node)} nodes, "
        f"output std {float(expected.std()):.3g}"
        + (f", {n_bn} BatchNormalization" if preserve_bn else ""),
        flush=True,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--models", default=",".join(ALL_MODELS),
                    help="comma-separated subset of: " + ",".join(ALL_MODELS))
    ap.add_argument("--preserve-bn", action="store_true",
                    help="keep BatchNormalization nodes (writes <model>_bn.onnx)")
    ap.add_argument("--force", action="store_true", help="re-export even if the files exist")
    ap.add_argument("--raw-init", action="store_true",
                    help="skip the deterministic conditioning step (stock torchvision random init); "
                         "the cache does not record this, so use a separate --out directory")
    args = ap.parse_args()

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in ALL_MODELS]
    if unknown:
        die(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(ALL_MODELS)}")

    np, torch, torchvision, onnx = import_deps()
    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)

    t0 = time.perf_counter()
    for name in models:
        try:
            export_one(np, torch, torchvision, onnx, name, args.out, args.preserve_bn, args.force,
                       args.raw_init)
        except SystemExit:
            raise
        except Exception as e:
            die(f"{name}: export failed: {type(e).__name__}: {e}", code=1)
    print(f"done: {len(models)} model(s) in {time.perf_counter() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
