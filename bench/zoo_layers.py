#!/usr/bin/python3
# Dev-only (Debian's PyTorch): lists the convolution layers of torchvision classifiers that are NOT
# in the performance model's evaluation set (tests/models/export_torchvision.py's nine), as the
# sweep's shapes, for perfmodel/microbench/zoo_layers.inc: nn-Meter's remedy for interpolation error
# is to sample the kernel sweep from the distribution of real layers. With --eval it lists the
# evaluation models' layers instead, to count how many of them the catalog contains exactly.
# With --gemm it lists fully connected layers instead (nn.Linear: tokens per image, K, N), of the
# catalog and of vision transformers (ViT, Swin), for perfmodel/microbench/zoo_gemm_layers.inc.
# With --pool it lists max pools instead (channels, h (= w), kernel, stride, pad), for
# perfmodel/microbench/zoo_pool_layers.inc.
# Usage: bench/zoo_layers.py [--eval] [--gemm | --pool] > FILE
import sys

import torch
import torchvision

CATALOG = ["mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3", "mobilenet_v3_small", "mobilenet_v3_large",
           "shufflenet_v2_x0_5", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0", "squeezenet1_0",
           "regnet_x_400mf", "regnet_y_400mf", "regnet_x_800mf", "regnet_y_800mf"]
# Fully connected layers: the convolution catalog's classifiers, and transformers' MLPs and projections.
GEMM_CATALOG = CATALOG + ["vit_b_16", "vit_b_32", "swin_t", "swin_s"]
EVAL = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0",
        "densenet121", "googlenet", "convnext_tiny"]


def run_hooked(name, module_type, hook):
    """Runs torchvision's `name` (random weights) on one zero 224x224 image with `hook` on every `module_type`."""
    model = getattr(torchvision.models, name)(weights=None).eval()
    for m in model.modules():
        if isinstance(m, module_type):
            m.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))


def layers(name):
    found = set()

    def hook(module, inputs, _output):
        x = inputs[0]
        k, s, p, d = module.kernel_size, module.stride, module.padding, module.dilation
        if k[0] != k[1] or s[0] != s[1] or d != (1, 1) or x.shape[2] != x.shape[3]:
            return
        cin, cout, g = module.in_channels, module.out_channels, module.groups
        if g == 1:
            op = "conv"
        elif g == cin == cout:
            op = "depthwise_conv"
        else:
            return  # grouped convolutions are not a sweep op
        if p[0] != k[0] // 2:
            return  # the sweep pads k/2
        found.add((op, cin, cout, x.shape[2], k[0], s[0]))

    run_hooked(name, torch.nn.Conv2d, hook)
    return found


def linear_layers(name):
    """(tokens per image, K, N) of every nn.Linear the model calls on one 224x224 image."""
    found = set()

    def hook(module, inputs, _output):
        x = inputs[0]
        k = x.shape[-1]
        found.add((x.numel() // k, k, module.out_features))

    run_hooked(name, torch.nn.Linear, hook)
    return found


def pool_layers(name):
    """(channels, h, kernel, stride, pad) of every square nn.MaxPool2d the model calls on one 224x224 image."""
    found = set()

    def hook(module, inputs, _output):
        x = inputs[0]
        k, s, p = (module.kernel_size, module.stride, module.padding)
        k, s, p = (v if isinstance(v, int) else v[0] for v in (k, s, p))
        if x.shape[2] == x.shape[3]:
            found.add((x.shape[1], x.shape[2], k, s, p))

    run_hooked(name, torch.nn.MaxPool2d, hook)
    return found


def print_catalog(collect, catalog, what, flag, row_format):
    """The distinct shapes `collect` finds in each model (the evaluation set with --eval), one C++ row each."""
    evaluation = "--eval" in sys.argv
    models = EVAL if evaluation else catalog
    shapes = set()
    for name in models:
        shapes |= collect(name)
    print("// %s of %s" % (what, ", ".join(models)))
    print("// (bench/zoo_layers.py%s%s)" % (flag, " --eval" if evaluation else ""))
    for row in sorted(shapes):
        print(row_format % row)


def main():
    if "--gemm" in sys.argv:
        print_catalog(linear_layers, GEMM_CATALOG, "tokens per image, K, N: the distinct fully connected layers (nn.Linear)",
                      " --gemm", "{%d, %d, %d},")
    elif "--pool" in sys.argv:
        print_catalog(pool_layers, CATALOG, "channels, h (= w), kernel, stride, pad: the distinct max pools (nn.MaxPool2d)",
                      " --pool", "{%d, %d, %d, %d, %d},")
    else:
        print_catalog(layers, CATALOG, "op, in_c, out_c, h (= w), kernel, stride: the distinct 224x224 layers", "",
                      "{SweepOp::%s, %d, %d, %d, %d, %d},")


main()
