#!/usr/bin/env python3
"""Make data/digits_vit.safetensors: a small vision transformer trained by PyTorch on the digits.

lumen's second main job (`cargo run --release -- run data/digits_vit.safetensors`) rebuilds
this network with its DSL from the file's metadata, runs the 450 held-out images through it on
its own runtime, and checks its logits and accuracy against the ones PyTorch computed here.

How to run it (from the repository root):

    python3 -m pip install torch==2.15.0 scikit-learn==1.9.1 numpy==2.4.6 safetensors==0.8.0
    python3 data/make_digits_vit.py                  # writes data/digits_vit.safetensors
    python3 data/make_digits_vit.py --width 24 --heads 3 --blocks 1 --ffn 48 --patch 4 \\
        --epochs 60 --out data/digits_vit_small.safetensors    # another architecture

Data: scikit-learn's bundled 8x8 digits, pixels scaled to [0, 1] (divided by 16), split
stratified 75/25 (train_test_split(test_size=0.25, random_state=0, stratify=y)), as the MLP.

Model (what lumen_compiler::programs::vit builds; PyTorch's forward pass is `ViT.forward` below):
    x [B, 64]  -> image [B, 8, 8] -> patches of P x P pixels, row-major over the patch grid:
                  [B, T, P*P] with T = (8/P)^2 (reshape [B, 8/P, P, 8/P, P], permute
                  (0, 1, 3, 2, 4), reshape)
    tokens      = patches @ embed.w [P*P, D] + embed.b [D] + pos [T, D]
    each block i: h = tokens + attention(layer_norm(tokens; blk{i}.ln1.g, .b))
                  tokens = h + ff2(gelu_erf(ff1(layer_norm(h; blk{i}.ln2.g, .b))))
                  attention: separate q, k, v, o projections (blk{i}.{q,k,v,o}.w [D, D], .b
                  [D]), H heads of D/H, softmax(q k^T / sqrt(D/H)) v
                  ff1: blk{i}.ff1.w [D, F], .b [F]; ff2: blk{i}.ff2.w [F, D], .b [D]
    pooled      = layer_norm(tokens; norm.g, norm.b).mean over the T tokens   [B, D]
    logits      = pooled @ head.w [D, C] + head.b [C]
Layer norms use eps 1e-5; weights are stored [in, out] (y = x @ w + b), PyTorch's transposed.

Tensors: the weights above (f32), x [450, 64] f32 (the held-out images), y [450] i64 (labels),
logits [450, C] f32 (PyTorch's forward pass in float64 from the stored f32 weights).
Metadata: architecture = "vit", image = "8x8", patch, width, heads, blocks, ffn, classes,
eps, gelu = "erf", framework = "PyTorch <version>", framework_accuracy (held-out accuracy of
those logits), training settings and package versions.

Training is seeded and single-threaded (torch.set_num_threads(1),
torch.use_deterministic_algorithms(True)), so rerunning with the pinned versions reproduces
the file byte for byte; another PyTorch version or CPU may train to slightly different weights
(the file's own checks still hold: lumen is compared with the logits stored beside them).
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import safetensors
import sklearn
import torch
from safetensors.numpy import load_file
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

EPS = 1e-5


class Block(torch.nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d, eps=EPS)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.ln2 = torch.nn.LayerNorm(d, eps=EPS)
        self.ff1 = torch.nn.Linear(d, ffn)
        self.ff2 = torch.nn.Linear(ffn, d)

    def forward(self, x):
        b, t, d = x.shape
        dh = d // self.heads
        h = self.ln1(x)

        def split(z):
            return z.reshape(b, t, self.heads, dh).permute(0, 2, 1, 3)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, d)
        x = x + self.o(ctx)
        return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))


class ViT(torch.nn.Module):
    def __init__(self, patch, d, heads, blocks, ffn, classes):
        super().__init__()
        self.patch = patch
        self.tokens = (8 // patch) ** 2
        self.embed = torch.nn.Linear(patch * patch, d)
        self.pos = torch.nn.Parameter(0.02 * torch.randn(self.tokens, d))
        self.blocks = torch.nn.ModuleList(Block(d, heads, ffn) for _ in range(blocks))
        self.norm = torch.nn.LayerNorm(d, eps=EPS)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x):
        b, p, g = x.shape[0], self.patch, 8 // self.patch
        patches = x.reshape(b, g, p, g, p).permute(0, 1, 3, 2, 4).reshape(b, self.tokens, p * p)
        h = self.embed(patches) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h).mean(dim=1))


def save_deterministic(tensors, path, metadata):
    """safetensors, byte for byte reproducibly: sorted keys, space-padded JSON header."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    offset, blobs = 0, []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[arr.dtype]
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def lumen_parameters(model):
    """The model's parameters under the names lumen's program declares, as views in lumen's
    [in, out] layout (writing into one writes the parameter)."""
    t = {"embed.w": model.embed.weight.T, "embed.b": model.embed.bias, "pos": model.pos,
         "norm.g": model.norm.weight, "norm.b": model.norm.bias,
         "head.w": model.head.weight.T, "head.b": model.head.bias}
    for i, blk in enumerate(model.blocks):
        for name in ("q", "k", "v", "o", "ff1", "ff2"):
            layer = getattr(blk, name)
            t[f"blk{i}.{name}.w"] = layer.weight.T
            t[f"blk{i}.{name}.b"] = layer.bias
        for name in ("ln1", "ln2"):
            t[f"blk{i}.{name}.g"] = getattr(blk, name).weight
            t[f"blk{i}.{name}.b"] = getattr(blk, name).bias
    return t


def lumen_names(model):
    """The model's parameters under the names lumen's program declares, [in, out] layout."""
    return {k: v.detach().numpy().astype(np.float32) for k, v in lumen_parameters(model).items()}


def main():
    parser = argparse.ArgumentParser(description="Train the digits ViT and write its file.")
    parser.add_argument("--patch", type=int, default=2)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--ffn", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "digits_vit.safetensors"))
    args = parser.parse_args()
    if 8 % args.patch or args.width % args.heads:
        print("error: the patch must divide 8 and the heads the width", file=sys.stderr)
        return 1

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    digits = load_digits()
    x_all = (digits.data / 16.0).astype(np.float32)
    y_all = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x_all, y_all, test_size=0.25, random_state=0, stratify=y_all)
    classes = int(y_all.max()) + 1

    model = ViT(args.patch, args.width, args.heads, args.blocks, args.ffn, classes)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    steps_per_epoch = math.ceil(len(x_train) / 64)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, epochs=args.epochs,
                                                steps_per_epoch=steps_per_epoch)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    start = time.time()
    for _ in range(args.epochs):
        model.train()
        order = torch.randperm(len(xt))
        for s in range(0, len(xt), 64):
            idx = order[s:s + 64]
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    seconds = time.time() - start

    # The reference: PyTorch's forward pass in float64 from the f32 values stored in the file.
    tensors = lumen_names(model)
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.float())
        logits = model.double()(torch.from_numpy(x_test).double()).numpy()
    accuracy = float((logits.argmax(axis=1) == y_test).mean())
    tensors.update({"x": x_test, "y": y_test, "logits": logits.astype(np.float32)})

    metadata = {
        "source": "data/make_digits_vit.py",
        "architecture": "vit",
        "image": "8x8",
        "patch": str(args.patch),
        "width": str(args.width),
        "heads": str(args.heads),
        "blocks": str(args.blocks),
        "ffn": str(args.ffn),
        "classes": str(classes),
        "eps": "1e-5",
        "gelu": "erf",
        "framework": f"PyTorch {torch.__version__.split('+')[0]}",
        "framework_accuracy": f"{accuracy:.6f}",
        "training": f"AdamW(lr=3e-3, weight_decay=0.01), OneCycleLR, batch 64, {args.epochs} "
                    f"epochs, seed {args.seed}, 1 thread",
        "split": "train_test_split(test_size=0.25, random_state=0, stratify=y)",
        "torch": torch.__version__.split("+")[0],
        "numpy": np.__version__,
        "scikit_learn": sklearn.__version__,
        "safetensors": safetensors.__version__,
    }
    save_deterministic(tensors, args.out, metadata)
    back = load_file(args.out)
    assert sorted(back) == sorted(tensors)
    assert all((back[k] == tensors[k]).all() for k in back)
    params = sum(v.size for k, v in tensors.items() if k not in ("x", "y", "logits"))
    correct = int(round(accuracy * len(y_test)))
    print(f"wrote {args.out}: {params} parameters, trained in {seconds:.1f} s")
    print(f"held-out accuracy {accuracy:.6f} ({correct}/{len(y_test)}), max |logit| "
          f"{np.abs(logits).max():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
