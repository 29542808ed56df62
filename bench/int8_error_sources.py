#!/usr/bin/python3
"""Where int8's error on the random-weight torchvision models comes from (dev-only: Debian's
python3-torch and python3-torchvision; the models as tests/models/export_torchvision.py builds and
conditions them, BatchNorm folded into the convolutions as kiln folds it).

Two questions, answered in PyTorch so each part can be switched on alone:
 1. Sensitivity of the fp32 model itself: seeded Gaussian noise of 0.4% of the input's standard
    deviation (about what rounding a uniform [-1, 1) input to 8 bits adds) on uniform[-1, 1) and on
    smooth, image-like inputs; cosine and top-1 agreement against the clean output.
 2. Simulated quantization in kiln's scheme (per-channel symmetric s8 weights; per-tensor
    symmetric u8/s8 activations at every Conv/Linear input, min-max calibrated on 16 seeded
    uniform samples): everything, weights only, activations only, and two variants: asymmetric
    (zero-point) activations, and bias correction of the weight error (Nagel et al. 2019).
    `kiln verify --random` on kiln's own int8 plan agrees with the "w8 a8" row to about 0.001 in
    cosine (MobileNetV2: 0.98529 vs 0.9857).
--layers adds, per layer, the error of quantizing that layer alone.

Usage: bench/int8_error_sources.py [--models mobilenet_v2,resnet50] [--samples 32] [--layers]
"""
import argparse
import os
import sys

import numpy as np
import torch
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import export_torchvision as export  # noqa: E402


def fold_batchnorm(module):
    previous = None
    for name, child in list(module.named_children()):
        if isinstance(child, torch.nn.BatchNorm2d) and previous is not None and isinstance(previous, torch.nn.Conv2d):
            s = child.weight / torch.sqrt(child.running_var + child.eps)
            previous.weight.data = previous.weight.data * s[:, None, None, None]
            bias = previous.bias.data if previous.bias is not None else torch.zeros_like(child.running_mean)
            previous.bias = torch.nn.Parameter((bias - child.running_mean) * s + child.bias)
            setattr(module, name, torch.nn.Identity())
        else:
            fold_batchnorm(child)
        previous = child


def compare(out, ref):
    cos = torch.nn.functional.cosine_similarity(out, ref, dim=1).mean().item()
    agree = (out.argmax(1) == ref.argmax(1)).float().mean().item()
    return "cosine %.5f  top-1 agreement %5.1f%%" % (cos, 100 * agree)


def fake_quant_activation(x, lo, hi, asymmetric):
    if asymmetric:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        scale = max(hi - lo, 1e-12) / 255
        zero = round(-lo / scale)
        return (torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero) * scale
    qmin, qmax = (0, 255) if lo >= 0 else (-127, 127)
    scale = max(abs(lo), abs(hi), 1e-12) / qmax
    return torch.clamp(torch.round(x / scale), qmin, qmax) * scale


def fake_quant_weight(w):
    scale = w.abs().reshape(w.shape[0], -1).max(1)[0].clamp(min=1e-12) / 127
    scale = scale.reshape(-1, *([1] * (w.dim() - 1)))
    return torch.round(w / scale).clamp(-127, 127) * scale


class Simulation:
    def __init__(self, model, calibration, test):
        self.model, self.test = model, test
        self.layers = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
        self.ranges, self.means = {}, {}

        def record(m, inputs):
            x = inputs[0]
            lo, hi = float(x.min()), float(x.max())
            old = self.ranges.get(m)
            self.ranges[m] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
            self.means[m] = x.mean(dim=(0, 2, 3)) if x.dim() == 4 else x.mean(0)

        hooks = [m.register_forward_pre_hook(record) for m in self.layers]
        with torch.no_grad():
            model(calibration)
        for h in hooks:
            h.remove()
        self.weights = {m: m.weight.data.clone() for m in self.layers}
        self.biases = {m: None if m.bias is None else m.bias.data.clone() for m in self.layers}
        with torch.no_grad():
            self.reference = model(test)

    def bias_shift(self, m, weight_error):
        mean = self.means[m]
        if weight_error.dim() == 2:
            return weight_error @ mean
        groups, out_channels, per_group = m.groups, weight_error.shape[0], weight_error.shape[1]
        group_of = torch.arange(out_channels) // (out_channels // groups)
        return (weight_error.sum(dim=(2, 3)) * mean.reshape(groups, per_group)[group_of]).sum(1)

    def run(self, weights=True, activations=True, asymmetric=False, bias_correction=False, only=None):
        hooks = []
        for m in self.layers:
            if only is not None and m not in only:
                continue
            if weights:
                m.weight.data = fake_quant_weight(self.weights[m])
                if bias_correction and self.biases[m] is not None:
                    m.bias.data = self.biases[m] - self.bias_shift(m, m.weight.data - self.weights[m])
            if activations:
                lo, hi = self.ranges[m]
                hooks.append(m.register_forward_pre_hook(
                    lambda mod, inputs, lo=lo, hi=hi: (fake_quant_activation(inputs[0], lo, hi, asymmetric),)))
        with torch.no_grad():
            out = self.model(self.test)
        for h in hooks:
            h.remove()
        for m in self.layers:
            m.weight.data = self.weights[m].clone()
            if self.biases[m] is not None:
                m.bias.data = self.biases[m].clone()
        return compare(out, self.reference)


def smooth_images(rng, n):
    low = torch.from_numpy(rng.uniform(0, 1, (n, 3, 28, 28)).astype(np.float32))
    img = torch.nn.functional.interpolate(low, size=224, mode="bilinear", align_corners=False)
    mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    return (img - mean) / std


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="mobilenet_v2,shufflenet_v2_x1_0,resnet50,efficientnet_b0,resnet18")
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--layers", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.models.split(","):
        model = export.build_model(torch, torchvision, name)
        export.condition_model(torch, model)
        model.eval()
        print(f"== {name}", flush=True)
        # 1. The fp32 model's own sensitivity to small input changes.
        rng = np.random.default_rng(1)
        for label, x in (("uniform[-1,1)", torch.from_numpy(rng.uniform(-1, 1, (a.samples, 3, 224, 224)).astype(np.float32))),
                         ("smooth image-like", smooth_images(rng, a.samples))):
            noise = torch.from_numpy(np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)) * 0.004 * float(x.std())
            with torch.no_grad():
                print(f"  fp32, input + 0.4% noise ({label:17s}): {compare(model(x + noise), model(x))}", flush=True)
        # 2. Simulated int8, as kiln quantizes.
        fold_batchnorm(model)
        calibration = torch.from_numpy(np.random.default_rng(7).uniform(-1, 1, (16, 3, 224, 224)).astype(np.float32))
        test = torch.from_numpy(np.random.default_rng(1).uniform(-1, 1, (a.samples, 3, 224, 224)).astype(np.float32))
        sim = Simulation(model, calibration, test)
        print(f"  w8 a8 (kiln's scheme)          : {sim.run()}", flush=True)
        print(f"  w8 only (activations float)    : {sim.run(activations=False)}", flush=True)
        print(f"  a8 only (weights float)        : {sim.run(weights=False)}", flush=True)
        print(f"  w8 a8, asymmetric activations  : {sim.run(asymmetric=True)}", flush=True)
        print(f"  w8 a8, bias correction         : {sim.run(bias_correction=True)}", flush=True)
        if a.layers:
            for i, m in enumerate(sim.layers):
                print(f"  layer {i:3d} alone: {sim.run(only={m})}", flush=True)


if __name__ == "__main__":
    main()
