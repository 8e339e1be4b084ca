#!/usr/bin/env python3
"""The convolution networks scripts/bench_cpu.py times, written in PyTorch and exported to ONNX.

Three networks at their published layer sizes, random weights, written here by hand (no
torchvision, no ultralytics) so that torch is the only extra dependency:

- ResNet-50 as torchvision writes it (v1.5: the stride on each bottleneck's 3x3 conv; 7x7/2
  stem, MaxPool 3x3/2 pad 1, stages of 3/4/6/3 bottlenecks of width 64..512 x4, 1x1 strided
  downsample shortcuts, global average pool, Linear 2048 -> 1000), 224x224;
- MobileNetV2 as torchvision writes it (3x3/2 stem of 32, inverted residuals with expansion 6,
  ReLU6, depthwise 3x3, 1x1 conv to 1280, global average pool, Linear 1280 -> 1000), 224x224;
- a YOLOv8n-size detector (Ultralytics' yolov8.yaml at depth 0.33 and width 0.25: Conv =
  Conv2d + BN(eps 1e-3) + SiLU, C2f blocks with chunk/Split and Concat, SPPF with three 5x5
  stride-1 max pools, nearest 2x upsampling, PAN neck, the Detect head of 80 classes with
  reg_max 16, decoded as Ultralytics exports it: DFL softmax + 1x1 conv, anchors, strides,
  sigmoid class scores, output [N, 84, anchors]), 640x640 by default.

BatchNorm weights are random (gamma around 1, beta around 0) and the running statistics come
from train-mode passes over random batches (momentum None: the exact average), so activations
stay O(1) through 50 layers, as with trained weights; then eval(). Every model is exported by
torch.onnx's TorchScript exporter (dynamo=False) at opset 17 with constant folding on, which
folds every BatchNorm into its Conv (no BatchNormalization node is left), as a user exporting
these models gets them.

`build(kind, batch, size, cache_dir)` writes `<cache_dir>/<kind>_b<batch>_<size>.onnx` and
`.inputs.safetensors` once (seeded: the same bytes each time) and returns the two paths; a later
call finds them there and does not import torch. Run it alone to fill the cache:

    python3 scripts/bench_cnn_models.py [--cache DIR] resnet50:1:224 mobilenetv2:8:224 ...
"""

import argparse
import json
import os
import struct
import sys

# Bump when a model's definition changes: the cached files carry it in their name.
VERSION = 1
OPSET = 17
KINDS = ("resnet50", "mobilenetv2", "yolov8n")


def default_cache():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "lumen-bench", f"cnn-v{VERSION}")


def paths(kind, batch, size, cache_dir):
    stem = os.path.join(cache_dir, f"{kind}_b{batch}_{size}")
    return stem + ".onnx", stem + ".inputs.safetensors"


def cached(kind, batch, size, cache_dir):
    return all(os.path.exists(p) for p in paths(kind, batch, size, cache_dir))


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        blob = array.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        chunks.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def _models():
    """The torch modules, defined on first use so that importing this file needs no torch."""
    import torch
    from torch import nn

    # ---- ResNet-50 (torchvision.models.resnet50's layout)

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, width, stride, downsample):
            super().__init__()
            out = width * self.expansion
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + idt)

    class ResNet50(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin, stages = 64, []
            for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
                layers = []
                for i in range(blocks):
                    s = stride if i == 0 else 1
                    down = None
                    if s != 1 or cin != width * 4:
                        down = nn.Sequential(nn.Conv2d(cin, width * 4, 1, s, bias=False),
                                             nn.BatchNorm2d(width * 4))
                    layers.append(Bottleneck(cin, width, s, down))
                    cin = width * 4
                stages.append(nn.Sequential(*layers))
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2048, classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    # ---- MobileNetV2 (torchvision.models.mobilenet_v2's layout)

    def conv_bn_relu6(cin, cout, k, s, groups=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            hidden = cin * t
            self.use_res = stride == 1 and cin == cout
            layers = [conv_bn_relu6(cin, hidden, 1, 1)] if t != 1 else []
            layers += [conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                       nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            layers, cin = [conv_bn_relu6(3, 32, 3, 2)], 32
            for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                               (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
                for i in range(n):
                    layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            layers.append(conv_bn_relu6(cin, 1280, 1, 1))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out")

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(torch.flatten(x, 1))

    # ---- YOLOv8n (ultralytics/cfg/models/v8/yolov8.yaml, scale n: depth 0.33, width 0.25)

    class Conv(nn.Module):
        def __init__(self, cin, cout, k=1, s=1):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.03)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class YBottleneck(nn.Module):
        def __init__(self, c, shortcut):
            super().__init__()
            self.cv1, self.cv2, self.add = Conv(c, c, 3), Conv(c, c, 3), shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C2f(nn.Module):
        def __init__(self, cin, cout, n, shortcut):
            super().__init__()
            self.c = cout // 2
            self.cv1 = Conv(cin, 2 * self.c, 1)
            self.cv2 = Conv((2 + n) * self.c, cout, 1)
            self.m = nn.ModuleList(YBottleneck(self.c, shortcut) for _ in range(n))

        def forward(self, x):
            # Ultralytics' forward_split (the same as its chunk(2, 1)): one Split node.
            y = list(self.cv1(x).split((self.c, self.c), 1))
            y.extend(m(y[-1]) for m in self.m)
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, cin, cout, k=5):
            super().__init__()
            c = cin // 2
            self.cv1, self.cv2 = Conv(cin, c, 1), Conv(c * 4, cout, 1)
            self.m = nn.MaxPool2d(k, 1, k // 2)

        def forward(self, x):
            y = [self.cv1(x)]
            y.extend(self.m(y[-1]) for _ in range(3))
            return self.cv2(torch.cat(y, 1))

    class Detect(nn.Module):
        """Ultralytics' Detect head in export mode: boxes decoded (DFL, anchors, strides)."""

        def __init__(self, nc, ch, strides, size):
            super().__init__()
            self.nc, self.reg_max = nc, 16
            c2, c3 = max(16, ch[0] // 4, self.reg_max * 4), max(ch[0], min(nc, 100))
            self.cv2 = nn.ModuleList(nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3),
                                                   nn.Conv2d(c2, 4 * self.reg_max, 1)) for c in ch)
            self.cv3 = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3),
                                                   nn.Conv2d(c3, nc, 1)) for c in ch)
            self.dfl = nn.Conv2d(self.reg_max, 1, 1, bias=False).requires_grad_(False)
            self.dfl.weight.data[:] = torch.arange(self.reg_max, dtype=torch.float).view(
                1, self.reg_max, 1, 1)
            anchors, stride_t = [], []
            for s in strides:
                h = w = size // s
                sy, sx = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5,
                                        indexing="ij")
                anchors.append(torch.stack((sx, sy), -1).view(-1, 2))
                stride_t.append(torch.full((h * w, 1), float(s)))
            self.register_buffer("anchors", torch.cat(anchors).transpose(0, 1).unsqueeze(0))
            self.register_buffer("strides", torch.cat(stride_t).transpose(0, 1))

        def forward(self, xs):
            # Static shapes (Ultralytics' export at a fixed size): Reshape by constants.
            b = int(xs[0].shape[0])
            x = [torch.cat((self.cv2[i](xs[i]), self.cv3[i](xs[i])), 1) for i in range(len(xs))]
            x = torch.cat([xi.view(b, 4 * self.reg_max + self.nc, -1) for xi in x], 2)
            box, cls = x.split((4 * self.reg_max, self.nc), 1)
            a = int(box.shape[2])
            dist = self.dfl(box.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1))
            lt, rb = dist.view(b, 4, a).split((2, 2), 1)
            x1y1, x2y2 = self.anchors - lt, self.anchors + rb
            dbox = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * self.strides
            return torch.cat((dbox, cls.sigmoid()), 1)

    class YOLOv8n(nn.Module):
        def __init__(self, size, nc=80):
            super().__init__()
            self.b0, self.b1 = Conv(3, 16, 3, 2), Conv(16, 32, 3, 2)
            self.b2, self.b3 = C2f(32, 32, 1, True), Conv(32, 64, 3, 2)
            self.b4, self.b5 = C2f(64, 64, 2, True), Conv(64, 128, 3, 2)
            self.b6, self.b7 = C2f(128, 128, 2, True), Conv(128, 256, 3, 2)
            self.b8, self.b9 = C2f(256, 256, 1, True), SPPF(256, 256, 5)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.h12, self.h15 = C2f(384, 128, 1, False), C2f(192, 64, 1, False)
            self.h16, self.h18 = Conv(64, 64, 3, 2), C2f(192, 128, 1, False)
            self.h19, self.h21 = Conv(128, 128, 3, 2), C2f(384, 256, 1, False)
            self.detect = Detect(nc, (64, 128, 256), (8, 16, 32), size)

        def forward(self, x):
            p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
            p4 = self.b6(self.b5(p3))
            p5 = self.b9(self.b8(self.b7(p4)))
            h12 = self.h12(torch.cat((self.up(p5), p4), 1))
            h15 = self.h15(torch.cat((self.up(h12), p3), 1))
            h18 = self.h18(torch.cat((self.h16(h15), h12), 1))
            h21 = self.h21(torch.cat((self.h19(h18), p5), 1))
            return self.detect([h15, h18, h21])

    return {"resnet50": lambda size: ResNet50(), "mobilenetv2": lambda size: MobileNetV2(),
            "yolov8n": YOLOv8n}


def make(kind, batch, size, cache_dir):
    """Builds, calibrates and exports one model with its seeded input; see the module docs."""
    import numpy as np
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    model = _models()[kind](size)
    # Random BN affine weights, then running statistics averaged over train-mode passes.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.2, 0.2)
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(2):
            calib = torch.rand(2, 3, size, size) if kind == "yolov8n" else torch.randn(
                2, 3, size, size)
            model(calib)
    model.eval()
    rng = np.random.default_rng(batch * 1000 + size)
    if kind == "yolov8n":
        x = rng.random((batch, 3, size, size), dtype=np.float32)  # images in [0, 1)
        names = (["images"], ["output0"])
    else:
        x = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
        names = (["x"], ["logits"])
    onnx_path, inputs_path = paths(kind, batch, size, cache_dir)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = onnx_path + f".tmp{os.getpid()}"
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(x),), tmp, input_names=names[0],
                          output_names=names[1], opset_version=OPSET, do_constant_folding=True,
                          dynamo=False)
    write_safetensors(inputs_path, {names[0][0]: x})
    os.replace(tmp, onnx_path)
    return onnx_path, inputs_path


def build(kind, batch, size, cache_dir=None):
    """The (model, inputs) paths of `kind` at `batch` x 3 x `size` x `size`, made if missing."""
    if kind not in KINDS:
        raise ValueError(f"unknown model {kind!r} (known: {', '.join(KINDS)})")
    cache_dir = cache_dir or default_cache()
    if cached(kind, batch, size, cache_dir):
        return paths(kind, batch, size, cache_dir)
    return make(kind, batch, size, cache_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=None, help=f"default: {default_cache()}")
    parser.add_argument("models", nargs="+", help="KIND:BATCH:SIZE, KIND one of " + ", ".join(KINDS))
    args = parser.parse_args()
    for spec in args.models:
        kind, batch, size = spec.split(":")
        print(*build(kind, int(batch), int(size), args.cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
