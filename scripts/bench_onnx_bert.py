#!/usr/bin/env python3
"""Imports, plans and runs a BERT-style encoder of over 10 million parameters from ONNX, and
times lumen against ONNX Runtime on the same model, side by side.

The encoder is data/make_onnx_fixtures.py's BertTiny (token and position embeddings by Gather,
an additive attention mask, post-LN blocks with LayerNormalization and erf-GELU, a pooled tanh
head) at BERT-small-like sizes: vocabulary 30522, width 256, 4 heads, FFN 1024, 4 layers,
sequence 128 (11.2M parameters). PyTorch exports it with torch.onnx (opset 17); onnxruntime
(all graph optimisations off) gives the reference outputs; then, per round, alternating:

- `lumen run MODEL.onnx --inputs ... --expect ... --no-search --json`: the report's load
  (read + import), graph_compile, prepare and execute phases and the max abs error;
- ONNX Runtime on one thread and on every core, all graph optimisations on, timing the same
  number of executes.

It prints each phase's median over the rounds and lumen's execute time over ORT's (below 1
means lumen is faster), median of the per-round ratios.

How to run it (from the repository root):

    python3 -m pip install torch==2.15.0 onnxruntime==1.32.0 onnx==1.23.2 onnxscript \\
        numpy==2.4.6 safetensors==0.8.0
    cargo build --release
    python3 scripts/bench_onnx_bert.py [--rounds 3] [--runs 10] [--layers 4 --width 256 ...]
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
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "data"))
from make_onnx_fixtures import BertTiny  # noqa: E402


def export(args, directory):
    torch.manual_seed(0)
    model = BertTiny(vocab=args.vocab, seq=args.seq, d=args.width, heads=args.heads,
                     ffn=args.ffn, layers=args.layers).eval()
    params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(1, args.vocab, (args.batch, args.seq))
    ids[-1, args.seq * 3 // 4:] = 0
    mask = (ids != 0).float()
    path = os.path.join(directory, "bert.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                          output_names=["hidden", "pooled"], opset_version=17, dynamo=False)
    inputs = {"input_ids": ids.numpy().astype(np.int64),
              "attention_mask": mask.numpy().astype(np.float32)}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    expect = dict(zip(["hidden", "pooled"], session.run(["hidden", "pooled"], inputs)))
    save_file(inputs, os.path.join(directory, "inputs.safetensors"))
    save_file(expect, os.path.join(directory, "expect.safetensors"))
    return path, params, inputs


def run_lumen(args, directory):
    cmd = [args.lumen, "run", os.path.join(directory, "bert.onnx"),
           "--inputs", os.path.join(directory, "inputs.safetensors"),
           "--expect", os.path.join(directory, "expect.safetensors"),
           "--no-search", "--runs", str(args.runs), "--json"]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"lumen failed: {done.stderr.strip()}")
    report = json.loads(done.stdout)
    phases = {k: v["seconds"] for k, v in report["phases"].items()}
    phases["load"] = report["load_seconds"]
    phases["execute_mean"] = report["execute_seconds_mean"]
    phases["wall"] = wall
    return phases, report


def time_ort(path, inputs, threads, runs):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    t = time.perf_counter()
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    setup = time.perf_counter() - t
    session.run(None, inputs)  # warm-up
    t = time.perf_counter()
    for _ in range(runs):
        session.run(None, inputs)
    return setup, (time.perf_counter() - t) / runs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=10, help="executes per round")
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--lumen", default=os.path.join(ROOT, "target", "release", "lumen"))
    args = p.parse_args()
    if not os.path.exists(args.lumen):
        sys.exit(f"{args.lumen} not found: run `cargo build --release` first")
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as directory:
        path, params, inputs = export(args, directory)
        size = os.path.getsize(path)
        print(f"model: BERT-style encoder, {params / 1e6:.2f}M parameters, {size / 1e6:.1f} MB "
              f"ONNX; batch {args.batch} x seq {args.seq}, width {args.width}, {args.layers} "
              f"layers; {args.rounds} rounds of {args.runs} executes", flush=True)
        rows, ratios1, ratiosn, err = [], [], [], None
        for r in range(args.rounds):
            phases, report = run_lumen(args, directory)
            err = report["max_abs_err"]
            _, ort1 = time_ort(path, inputs, 1, args.runs)
            _, ortn = time_ort(path, inputs, cores, args.runs)
            phases["ort_1"], phases[f"ort_{cores}"] = ort1, ortn
            ratios1.append(phases["execute_mean"] / ort1)
            ratiosn.append(phases["execute_mean"] / ortn)
            rows.append(phases)
            print(f"round {r + 1}/{args.rounds}: lumen wall {phases['wall']:.2f} s, execute "
                  f"{phases['execute_mean'] * 1e3:.1f} ms; ORT {ort1 * 1e3:.1f} ms (1 thread), "
                  f"{ortn * 1e3:.1f} ms ({cores} threads)", flush=True)
    med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    print(f"\nlumen, median of {args.rounds} rounds (max abs error against onnxruntime: {err:.2e})")
    for key, what in [("load", "read + import the ONNX file"),
                      ("graph_compile", "HLIR -> LLIR -> slab plan"),
                      ("prepare", "slab allocation, weight upload"),
                      ("execute_mean", "one execute"),
                      ("wall", "whole command (process start to exit)")]:
        print(f"  {key:<14} {med[key] * 1e3:10.1f} ms   {what}")
    print(f"ONNX Runtime one execute: {med['ort_1'] * 1e3:.1f} ms (1 thread), "
          f"{med[f'ort_{cores}'] * 1e3:.1f} ms ({cores} threads)")
    print(f"lumen / ORT execute: {statistics.median(ratios1):.2f}x (1 thread), "
          f"{statistics.median(ratiosn):.2f}x ({cores} threads); below 1 means lumen is faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
