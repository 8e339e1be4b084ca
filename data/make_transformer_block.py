#!/usr/bin/env python3
"""Make data/transformer_block.safetensors: PyTorch's outputs for lumen's `transformer` program.

lumen's built-in `transformer` program (lumen_compiler::programs::transformer) is a stack of
pre-LN encoder blocks. This script builds the same network with PyTorch's own
nn.TransformerEncoderLayer (norm_first=True, the tanh GELU, no dropout, eps 1e-5), random
weights, runs a random batch through it in float64, and stores the weights, the batch and
PyTorch's outputs. A Rust test (crates/runtime/tests/transformer_fixture.rs) builds the
program with the DSL, runs it on lumen's CPU runtime and checks its outputs against these
within 1e-4. A plain NumPy re-derivation of the same block is checked against PyTorch here
too, so the file pins the formulas, not just one library's reading of them.

How to run it (from the repository root):

    python3 -m pip install torch==2.15.0 numpy==2.4.6 safetensors==0.8.0
    python3 data/make_transformer_block.py     # writes data/transformer_block.safetensors

Sizes: batch 2, seq 8, width 32, heads 4, FFN 64, 2 blocks (the metadata says so too).

Tensors (f32; weights are [in, out], y = x @ w + b; names as lumen's program declares them):
    x                                [2, 8, 32]  the input batch
    blk{i}.ln1.g, blk{i}.ln1.b       [32]        norm1 weight and bias
    blk{i}.{q,k,v}.w                 [32, 32]    in_proj_weight's three slices, transposed
    blk{i}.{q,k,v}.b                 [32]        in_proj_bias's three slices
    blk{i}.o.w, blk{i}.o.b           [32, 32], [32]   out_proj
    blk{i}.ln2.g, blk{i}.ln2.b       [32]        norm2
    blk{i}.ff1.w, blk{i}.ff1.b       [32, 64], [64]   linear1
    blk{i}.ff2.w, blk{i}.ff2.b       [64, 32], [32]   linear2
    y                                [2, 8, 32]  PyTorch's output, computed in float64 from
                                                 the f32 values stored here, rounded to f32
Every parameter (layer-norm gains and biases and attention biases included, which PyTorch
initialises to constants) is drawn from torch.manual_seed(0), so every formula is exercised.
The file is written byte for byte reproducibly with the pinned versions.
"""

import json
import math
import os
import struct
import sys

import numpy as np
import safetensors
import torch
from safetensors.numpy import load_file

BATCH, SEQ, WIDTH, HEADS, FFN, BLOCKS = 2, 8, 32, 4, 64, 2
EPS = 1e-5


def save_deterministic(tensors, path, metadata):
    """Writes the safetensors format byte-for-byte reproducibly: 8-byte little-endian header
    length, a JSON header with sorted keys padded with spaces to 8 bytes, then the
    little-endian tensor data in key order."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name], dtype=np.float32)
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x, g, b):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * g + b


def numpy_block(x, t, i):
    """The same pre-LN block, written out in NumPy (float64)."""
    p = lambda name: t[f"blk{i}.{name}"].astype(np.float64)  # noqa: E731
    h = layer_norm(x, p("ln1.g"), p("ln1.b"))
    b, s, d = h.shape
    dh = d // HEADS

    def heads(z):
        return z.reshape(b, s, HEADS, dh).transpose(0, 2, 1, 3)

    q, k, v = (heads(h @ p(f"{n}.w") + p(f"{n}.b")) for n in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
    x = x + ctx @ p("o.w") + p("o.b")
    h = layer_norm(x, p("ln2.g"), p("ln2.b"))
    return x + gelu_tanh(h @ p("ff1.w") + p("ff1.b")) @ p("ff2.w") + p("ff2.b")


def main():
    out_path = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "transformer_block.safetensors"
    )
    torch.manual_seed(0)
    layers = [
        torch.nn.TransformerEncoderLayer(
            d_model=WIDTH,
            nhead=HEADS,
            dim_feedforward=FFN,
            dropout=0.0,
            activation=lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
            layer_norm_eps=EPS,
            batch_first=True,
            norm_first=True,
        )
        for _ in range(BLOCKS)
    ]
    tensors = {}
    with torch.no_grad():
        for i, layer in enumerate(layers):
            # Constant-initialised parameters get random values too.
            for param in (layer.norm1.weight, layer.norm2.weight):
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            for param in (layer.norm1.bias, layer.norm2.bias, layer.self_attn.in_proj_bias,
                          layer.self_attn.out_proj.bias):
                param.copy_(0.1 * torch.randn_like(param))
            # Store f32 values; the float64 run below uses exactly these.
            for param in layer.parameters():
                param.copy_(param.float())
            wq, wk, wv = layer.self_attn.in_proj_weight.chunk(3)
            bq, bk, bv = layer.self_attn.in_proj_bias.chunk(3)
            named = {
                "ln1.g": layer.norm1.weight, "ln1.b": layer.norm1.bias,
                "q.w": wq.T, "q.b": bq, "k.w": wk.T, "k.b": bk, "v.w": wv.T, "v.b": bv,
                "o.w": layer.self_attn.out_proj.weight.T, "o.b": layer.self_attn.out_proj.bias,
                "ln2.g": layer.norm2.weight, "ln2.b": layer.norm2.bias,
                "ff1.w": layer.linear1.weight.T, "ff1.b": layer.linear1.bias,
                "ff2.w": layer.linear2.weight.T, "ff2.b": layer.linear2.bias,
            }
            for name, value in named.items():
                tensors[f"blk{i}.{name}"] = value.detach().numpy().astype(np.float32)
        x = torch.randn(BATCH, SEQ, WIDTH).float()
        tensors["x"] = x.numpy().astype(np.float32)

        h = x.double()
        for layer in layers:
            layer.double().eval()
            h = layer(h)
        y64 = h.numpy()

    ref = tensors["x"].astype(np.float64)
    for i in range(BLOCKS):
        ref = numpy_block(ref, tensors, i)
    numpy_err = float(np.abs(ref - y64).max())
    assert numpy_err < 1e-10, f"NumPy and PyTorch disagree by {numpy_err:e}"
    tensors["y"] = y64.astype(np.float32)

    metadata = {
        "source": "data/make_transformer_block.py",
        "model": "torch.nn.TransformerEncoderLayer(norm_first=True, activation=tanh GELU, "
        "dropout=0, layer_norm_eps=1e-5, batch_first=True) x 2",
        "batch": str(BATCH), "seq": str(SEQ), "width": str(WIDTH), "heads": str(HEADS),
        "ffn": str(FFN), "blocks": str(BLOCKS),
        "numpy_vs_torch_max_abs": f"{numpy_err:.3e}",
        "torch": torch.__version__.split("+")[0],
        "numpy": np.__version__,
        "safetensors": safetensors.__version__,
    }
    save_deterministic(tensors, out_path, metadata)
    back = load_file(out_path)
    assert sorted(back) == sorted(tensors)
    assert all((back[k] == tensors[k]).all() for k in back)
    print(f"wrote {out_path}: {len(tensors)} tensors, max |y| {np.abs(y64).max():.3f}, "
          f"NumPy vs PyTorch {numpy_err:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
