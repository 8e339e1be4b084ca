#!/usr/bin/env python3
"""Times lumen's `transformer` program against ONNX Runtime on the CPU, side by side.

The same network (pre-LN encoder blocks, separate Q/K/V projections, tanh GELU, eps 1e-5) is
built in PyTorch (nn.TransformerEncoderLayer, norm_first=True), exported to ONNX and run by
ONNX Runtime with all its graph optimisations (attention, layer-norm and GELU fusions), on one
thread and on every core; lumen runs `lumen compare transformer --profile` (its single-threaded
CPU runtime, the fused candidate's median over --trials executes). Rounds alternate between
the two so machine noise hits both alike; the ratio is computed per round and its median
reported (lumen / ORT: below 1 means lumen is faster).

How to run it (from the repository root):

    python3 -m pip install torch==2.15.0 onnxruntime==1.32.0 onnx==1.23.2 onnxscript
    cargo build --release
    python3 scripts/bench_transformer_ort.py [--rounds 7] [--trials 50] [--batch 2 --seq 16
        --width 64 --heads 4 --ffn 256 --layers 2]

Weights are random in both (timing does not depend on them); the correctness of lumen's
transformer against PyTorch is data/make_transformer_block.py's and the tests' business.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch


def build_model(width, heads, ffn, layers):
    torch.manual_seed(0)
    blocks = [
        torch.nn.TransformerEncoderLayer(
            d_model=width,
            nhead=heads,
            dim_feedforward=ffn,
            dropout=0.0,
            activation=lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
            layer_norm_eps=1e-5,
            batch_first=True,
            norm_first=True,
        )
        for _ in range(layers)
    ]
    return torch.nn.Sequential(*blocks).eval()


def export(model, x, path):
    # The fused inference kernel (aten::_native_multi_head_attention) has no ONNX form: export
    # the plain attention ops, which ORT's own optimiser fuses again.
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)


def ort_session(path, threads):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_median_ms(session, x, trials):
    feed = {"x": x}
    for _ in range(5):
        session.run(None, feed)
    times = []
    for _ in range(trials):
        t = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def lumen_median_ms(lumen, args):
    cmd = [lumen, "compare", "transformer", "--profile", "--trials", str(args.trials), "--json",
           "--batch", str(args.batch), "--seq", str(args.seq), "--width", str(args.width),
           "--heads", str(args.heads), "--ffn", str(args.ffn), "--layers", str(args.layers)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    fused = next(c for c in report["candidates"] if c["label"] == "fused")
    return fused["median_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lumen", default=os.path.join("target", "release", "lumen"))
    args = parser.parse_args()
    if not os.path.exists(args.lumen):
        print(f"error: {args.lumen} not found: run `cargo build --release` first", file=sys.stderr)
        return 1

    model = build_model(args.width, args.heads, args.ffn, args.layers)
    x = torch.randn(args.batch, args.seq, args.width)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "transformer.onnx")
        export(model, x, path)
        one = ort_session(path, 1)
        every = ort_session(path, os.cpu_count() or 1)
        xn = x.numpy().astype(np.float32)
        with torch.no_grad():
            want = model(x).numpy()
        got = one.run(None, {"x": xn})[0]
        print(f"ORT {ort.__version__} vs PyTorch {torch.__version__}: max |diff| "
              f"{np.abs(got - want).max():.2e}")
        sizes = (f"batch {args.batch}, seq {args.seq}, width {args.width}, heads {args.heads}, "
                 f"ffn {args.ffn}, {args.layers} blocks")
        print(f"transformer: {sizes}; {args.rounds} interleaved rounds of {args.trials} trials")
        print(f"{'round':>5} {'lumen ms':>9} {'ORT 1t ms':>9} {'ORT all ms':>10} "
              f"{'lumen/ORT 1t':>12} {'lumen/ORT all':>13}")
        ratios_one, ratios_all = [], []
        for r in range(args.rounds):
            lumen = lumen_median_ms(args.lumen, args)
            t1 = ort_median_ms(one, xn, args.trials)
            ta = ort_median_ms(every, xn, args.trials)
            ratios_one.append(lumen / t1)
            ratios_all.append(lumen / ta)
            print(f"{r:>5} {lumen:>9.4f} {t1:>9.4f} {ta:>10.4f} {lumen / t1:>12.3f} "
                  f"{lumen / ta:>13.3f}")
        print(f"median lumen/ORT: {statistics.median(ratios_one):.3f} on one thread "
              f"(min {min(ratios_one):.3f}, max {max(ratios_one):.3f}), "
              f"{statistics.median(ratios_all):.3f} against ORT on {os.cpu_count()} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
