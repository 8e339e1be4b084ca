#!/usr/bin/env python3
"""lumen against ONNX Runtime on one ONNX model, in alternating pairs of long runs.

scripts/bench_cpu.py compares medians of short measurements round by round; on a machine whose
speed drifts within seconds a model of ~10 ms an execute (the digits ViT) gets per-round ratios
from 0.7 to 1.4, and a median of a few rounds settles little. This script times longer stretches
instead, alternating: per pair, ONNX Runtime executes the model RUNS times in this process (mean
time of an execute, after three warm-up runs), then `lumen run MODEL --inputs IN --runs RUNS
--no-search --json` does (mean of its execute phase, its cold first execute included: a handicap
for lumen), and the pair's ratio is lumen / ORT. It prints each pair and the median and range of
the ratios (below 1: lumen is faster). A benchmark, not a test.

    .venv-bench/bin/python scripts/bench_pairs.py data/onnx/digits_vit.onnx \\
        data/onnx/digits_vit.inputs.safetensors --threads 1 --runs 200 --pairs 7

Needs onnxruntime and numpy (scripts/bench-cpu.sh installs them into .venv-bench) and a release
build of lumen (`cargo build --release`; --lumen names another binary).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cpu import ROOT, read_safetensors  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="an ONNX model lumen imports")
    parser.add_argument("inputs", help="a safetensors file of its inputs, by graph input name")
    parser.add_argument("--threads", type=int, default=1, help="threads of both engines")
    parser.add_argument("--runs", type=int, default=200, help="executes per side of a pair")
    parser.add_argument("--pairs", type=int, default=7, help="pairs of runs")
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    parser.add_argument("--lumen", default=os.path.join(target, "release", "lumen"),
                        help="the lumen binary (default: $CARGO_TARGET_DIR or target/, release)")
    args = parser.parse_args()
    if args.threads < 1 or args.runs < 1 or args.pairs < 1:
        sys.exit("error: --threads, --runs and --pairs must be at least 1")
    if not os.path.isfile(args.lumen):
        sys.exit(f"error: {args.lumen} not found: run `cargo build --release` first (or --lumen)")
    try:
        feed = read_safetensors(args.inputs)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: cannot read the inputs {args.inputs} as safetensors: {e}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
        for _ in range(3):
            session.run(None, feed)
    except Exception as e:  # onnxruntime raises its own exception types for every failure
        message = " ".join(str(e).split())
        sys.exit(f"error: onnxruntime cannot run {args.model} on {args.inputs}: {message}")
    command = [args.lumen, "run", args.model, "--inputs", args.inputs, "--threads",
               str(args.threads), "--runs", str(args.runs), "--no-search", "--json"]
    print(f"onnxruntime {ort.__version__}; {args.threads} thread(s); {args.runs} executes a "
          f"side; {args.pairs} pairs")
    ratios = []
    for pair in range(args.pairs):
        start = time.perf_counter()
        for _ in range(args.runs):
            session.run(None, feed)
        ort_ms = (time.perf_counter() - start) / args.runs * 1e3
        try:
            done = subprocess.run(command, capture_output=True, text=True)
        except OSError as e:
            sys.exit(f"error: cannot start {args.lumen}: {e}")
        if done.returncode != 0:
            why = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
            sys.exit(f"error: lumen failed: {why[0]}")
        try:
            seconds = json.loads(done.stdout)["phases"]["execute"]["seconds"]
        except (ValueError, KeyError, TypeError):
            sys.exit(f"error: {args.lumen} printed no lumen run --json report")
        lumen_ms = seconds / args.runs * 1e3
        ratios.append(lumen_ms / ort_ms)
        print(f"pair {pair + 1}/{args.pairs}: ORT {ort_ms:.3f} ms, lumen {lumen_ms:.3f} ms "
              f"(means), lumen/ORT {ratios[-1]:.3f}", flush=True)
    print(f"lumen/ORT: median {statistics.median(ratios):.3f}, range {min(ratios):.3f} to "
          f"{max(ratios):.3f} over {len(ratios)} pairs")


if __name__ == "__main__":
    main()
