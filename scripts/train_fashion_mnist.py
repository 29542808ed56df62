#!/usr/bin/python3
"""Train kiln's bundled example model (a small residual CNN) on Fashion-MNIST and export it to ONNX.

Dev-only: regenerates the committed files under examples/fashion-mnist/ (the kiln product never needs
Python). Uses Debian's PyTorch on CPU; the data comes from the Debian package dataset-fashion-mnist.

Usage:
  sudo apt-get install -y dataset-fashion-mnist python3-torch python3-onnx python3-numpy
  /usr/bin/python3 scripts/train_fashion_mnist.py [--epochs 3] [--seed 0] [--threads 2]
                                                   [--data /usr/share/datasets/fashion-mnist]
                                                   [--out examples/fashion-mnist]

Writes to --out:
  model.onnx           opset 13; input "input" float32 [batch,1,28,28] (dynamic batch), output "logits"
                       [batch,10]; BatchNormalization nodes kept (inference form) for kiln's folding pass
  metrics.json         fp32 accuracy on the full 10,000-image test set, epochs, seed, timings, versions
  sample.npz           "input": first 8 test images, normalized, float32 [8,1,28,28]; "labels": int64 [8]
  sample_expected.npz  "logits": the PyTorch logits for sample.npz's input, float32 [8,10]

Normalization (must be applied by whoever feeds the model): x = (pixel / 255 - MEAN) / STD.
"""

import argparse
import gzip
import json
import os
import platform
import sys
import time
import warnings

MEAN = 0.2860
STD = 0.3530
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
OPSET = 13
N_SAMPLE = 8


def die(msg):
    print(f"train_fashion_mnist: {msg}", file=sys.stderr)
    sys.exit(2)


try:
    import numpy as np
    import onnx
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    die(f"{e}. Use Debian's /usr/bin/python3 with python3-torch python3-onnx python3-numpy installed.")


def read_idx(path):
    """Reads a (gzipped) IDX file: magic 0x00000803 (images, uint8 [n,rows,cols]) or 0x00000801 (labels)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    if (magic >> 8) != 0x08 or ndim not in (1, 3):
        raise ValueError(f"{path}: not a uint8 IDX file (magic {magic:#010x})")
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: expected {dims} elements, found {arr.size}")
    return arr.reshape(dims)


def find_file(data_dir, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    die(f"{stem}(.gz) not found in {data_dir}: install it with `apt-get install -y dataset-fashion-mnist`"
        " or pass --data DIR")


def load_split(data_dir, prefix):
    images = read_idx(find_file(data_dir, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find_file(data_dir, f"{prefix}-labels-idx1-ubyte"))
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        die(f"{prefix}: unexpected shapes {images.shape} / {labels.shape}")
    return images, labels.astype(np.int64)


def normalize(images_u8):
    """uint8 [n,28,28] -> float32 [n,1,28,28], (pixel/255 - MEAN) / STD."""
    x = images_u8.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    return x[:, None, :, :].astype(np.float32)


class ResidualBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + x)


class FashionNet(nn.Module):
    """conv3x3(1->16)+BN+ReLU, residual block(16), maxpool 2, conv3x3(16->32)+BN+ReLU, maxpool 2,
    flatten (32*7*7), linear -> 10."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(16)
        self.block = ResidualBlock(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.block(x)
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        return self.fc(x)


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            logits = model(x[i:i + batch])
            correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    return correct / x.shape[0]


def check_exported(path, n_bn_modules):
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    g = proto.graph
    assert [i.name for i in g.input] == ["input"], [i.name for i in g.input]
    assert [o.name for o in g.output] == ["logits"], [o.name for o in g.output]
    dims = [d.dim_param or d.dim_value for d in g.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 1, 28, 28], dims
    bns = [n for n in g.node if n.op_type == "BatchNormalization"]
    if len(bns) != n_bn_modules:
        raise RuntimeError(f"expected {n_bn_modules} BatchNormalization nodes, found {len(bns)}")
    for n in bns:
        outs = [o for o in n.output if o]
        training = [a for a in n.attribute if a.name == "training_mode" and a.i != 0]
        if len(outs) != 1 or training:
            raise RuntimeError(f"BatchNormalization {n.name} is in training mode")
    return proto


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default=os.path.join(here, "..", "examples", "fashion-mnist"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    train_u8, train_y = load_split(args.data, "train")
    test_u8, test_y = load_split(args.data, "t10k")
    x_train = torch.from_numpy(normalize(train_u8))
    y_train = torch.from_numpy(train_y)
    x_test = torch.from_numpy(normalize(test_u8))
    y_test = torch.from_numpy(test_y)
    print(f"data: train {tuple(x_train.shape)}, test {tuple(x_test.shape)}; "
          f"train mean/std after normalization {float(x_train.mean()):.4f}/{float(x_train.std()):.4f}")

    model = FashionNet()
    n_params = sum(p.numel() for p in model.parameters())
    steps_per_epoch = (x_train.shape[0] + args.batch - 1) // args.batch
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                steps_per_epoch=steps_per_epoch)
    gen = torch.Generator().manual_seed(args.seed)

    t_train0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        t0 = time.perf_counter()
        perm = torch.randperm(x_train.shape[0], generator=gen)
        total_loss = 0.0
        for i in range(steps_per_epoch):
            idx = perm[i * args.batch:(i + 1) * args.batch]
            xb, yb = x_train[idx], y_train[idx]
            # Light augmentation: random horizontal flip (Fashion-MNIST items are roughly mirror-symmetric).
            flip = torch.rand(xb.shape[0], generator=gen) < 0.5
            xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total_loss += float(loss) * xb.shape[0]
        acc = evaluate(model, x_test, y_test)
        print(f"epoch {epoch + 1}/{args.epochs}: loss {total_loss / x_train.shape[0]:.4f}, "
              f"test acc {acc * 100:.2f}%, {time.perf_counter() - t0:.1f}s", flush=True)
    train_seconds = time.perf_counter() - t_train0

    model.eval()
    test_acc = evaluate(model, x_test, y_test)

    # Export. The module is in eval() mode, so TrainingMode.PRESERVE keeps each BatchNorm as its own
    # inference-form BatchNormalization node (running stats, one output) instead of folding it into the
    # preceding Conv the way TrainingMode.EVAL + constant folding does.
    onnx_path = os.path.join(out, "model.onnx")
    dummy = x_test[:2]
    t0 = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*constant folding be turned off.*")
        torch.onnx.export(
            model, dummy, onnx_path,
            export_params=True,
            opset_version=OPSET,
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
            do_constant_folding=True,
            training=torch.onnx.TrainingMode.PRESERVE,
        )
    export_seconds = time.perf_counter() - t0
    n_bn = sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    proto = check_exported(onnx_path, n_bn)
    model_bytes = os.path.getsize(onnx_path)

    sample_x = normalize(test_u8[:N_SAMPLE])
    sample_y = test_y[:N_SAMPLE].astype(np.int64)
    with torch.no_grad():
        sample_logits = model(torch.from_numpy(sample_x)).numpy().astype(np.float32)
    np.savez(os.path.join(out, "sample.npz"), input=sample_x, labels=sample_y)
    np.savez(os.path.join(out, "sample_expected.npz"), logits=sample_logits)

    metrics = {
        "dataset": "Fashion-MNIST (Debian package dataset-fashion-mnist)",
        "test_images": int(x_test.shape[0]),
        "test_accuracy_fp32": round(test_acc, 4),
        "test_correct": int(round(test_acc * x_test.shape[0])),
        "epochs": args.epochs,
        "batch_size": args.batch,
        "optimizer": f"AdamW lr={args.lr} wd=1e-4, OneCycle; random horizontal flip",
        "seed": args.seed,
        "threads": args.threads,
        "training_seconds": round(train_seconds, 1),
        "export_seconds": round(export_seconds, 2),
        "parameters": int(n_params),
        "model_bytes": int(model_bytes),
        "onnx_opset": OPSET,
        "onnx_nodes": {op: sum(n.op_type == op for n in proto.graph.node)
                       for op in sorted({n.op_type for n in proto.graph.node})},
        "normalization": {"scale": "pixel / 255", "mean": MEAN, "std": STD},
        "sample_labels": sample_y.tolist(),
        "sample_predictions": sample_logits.argmax(1).tolist(),
        "classes": CLASSES,
        "torch_version": torch.__version__,
        "onnx_version": onnx.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
    }
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
        f.write("\n")

    print(f"test accuracy (fp32, {x_test.shape[0]} images): {test_acc * 100:.2f}%")
    print(f"training {train_seconds:.1f}s, export {export_seconds:.2f}s, {n_params} parameters, "
          f"model.onnx {model_bytes} bytes, {n_bn} BatchNormalization nodes")
    print(f"wrote {onnx_path}, metrics.json, sample.npz, sample_expected.npz in {out}")


if __name__ == "__main__":
    main()
