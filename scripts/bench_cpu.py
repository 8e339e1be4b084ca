#!/usr/bin/env python3
"""Times lumen's CPU runtime against ONNX Runtime and a bare GEMM call, side by side.

Every workload is one ONNX model (written with onnx.helper, no PyTorch needed, or the digits
ViT fixture PyTorch exported) and one safetensors file of inputs, and BOTH engines run that same file on the same inputs: lumen through
its ONNX importer (`lumen run MODEL.onnx --inputs IN.safetensors --json`, the median execute of
the report's `execute_seconds_median`), ONNX Runtime (CPUExecutionProvider, all graph
optimisations, `intra_op_num_threads` = the thread count) in this process. The workloads:

- the digits MLP (data/digits_mlp.safetensors, 64 -> 128 -> 64 -> 10, relu) at batch 1, 450 and
  4096 (the file's 450 images sliced, or repeated to 4096 rows);
- linear-relu `relu(x [M,K] @ w [K,N] + b [N])` at 512x2048x512 and 2048x2048x2048;
- the built-in transformer's network at its default sizes (`lumen compile transformer`: 2 pre-LN
  encoder blocks, batch 2, seq 16, width 64, 4 heads, FFN 256, separate Q/K/V projections,
  tanh GELU, layer-norm eps 1e-5), written in ONNX operator for operator;
- the digits ViT as PyTorch exported it (data/onnx/digits_vit.onnx, made by
  data/make_onnx_fixtures.py) on its 450 held-out images: a real model with erf-GELU and 1,800
  attention heads per block.

Per round, for each workload and each thread count (1, then every core), in turn: lumen fused
(`--fuse`), lumen unfused (`--no-fuse`), ONNX Runtime, and the bare GEMM (the runtime's GEMM
library called on the workload's matmul shapes with nothing else: `cargo run --example
bare_gemm`, on as many threads as lumen). Rounds interleave so machine
noise hits every engine alike; each cell is the median of the per-round medians, and each ratio
the median of the per-round ratios (below 1: lumen is faster). Weights are random where the
workload has no file (timing does not depend on them). Before timing, lumen's outputs are checked
against ONNX Runtime's (`--expect`), so both compute the same thing.

It is a benchmark, not a test: `scripts/bench-cpu.sh` installs what it needs into .venv-bench and
runs it. Flags: --rounds N (default 5), --quick (fewer executes per measurement), --only NAME
(substring of a workload's name), --lumen PATH, --bare PATH, --check-args (check the others and
exit: bench-cpu.sh runs it before building, so a bad flag fails at once).
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 20  # Gelu (tanh) is an operator from opset 20 on


# ---- safetensors, read and written by hand (the format: u64 header length, JSON header, data)

def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    kinds = {"F32": np.float32, "I64": np.int64, "I32": np.int32}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=kinds[info["dtype"]]).reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        blob = array.tobytes()
        header[name] = {"dtype": kinds[array.dtype], "shape": list(array.shape),
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


# ---- the workloads as ONNX graphs

class Builder:
    """Nodes and initializers of one ONNX graph, with fresh value names."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def fresh(self, stem):
        self.count += 1
        return f"{stem}_{self.count}"

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, kind, inputs, **attrs):
        out = self.fresh(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def model(self, inputs, output, out_shape):
        # The last node writes the graph output.
        self.nodes[-1].output[0] = output
        graph = helper.make_graph(
            self.nodes, "bench",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 9
        onnx.checker.check_model(m)
        return m


def linear(b, x, w, bias, relu):
    y = b.op("Add", [b.op("MatMul", [x, b.init(b.fresh("w"), w)]), b.init(b.fresh("b"), bias)])
    return b.op("Relu", [y]) if relu else y


def mlp_model(weights, batch):
    """The digits MLP: relu(x @ w + b) per layer, no relu after the last."""
    b = Builder()
    h = "x"
    layers = sorted(int(k[1:]) for k in weights if k.startswith("w"))
    for i in layers:
        h = linear(b, h, weights[f"w{i}"], weights[f"b{i}"], relu=i != layers[-1])
    out = weights[f"w{layers[-1]}"].shape[1]
    shapes = [(batch, weights[f"w{i}"].shape[0], weights[f"w{i}"].shape[1]) for i in layers]
    return b.model([("x", [batch, weights["w1"].shape[0]])], "y", [batch, out]), shapes


def linear_relu_model(m, k, n, rng):
    b = Builder()
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    bias = (rng.standard_normal(n) * 0.1).astype(np.float32)
    linear(b, "x", w, bias, relu=True)
    return b.model([("x", [m, k])], "y", [m, n]), [(m, k, n)]


def transformer_model(batch, seq, width, heads, ffn, blocks, rng):
    """lumen's built-in transformer (crates/compiler/src/models.rs `transformer`): pre-LN
    blocks, h = x + attn(ln1(x)), x = h + ff2(gelu_tanh(ff1(ln2(h)))), separate Q/K/V."""
    b = Builder()
    dh = width // heads

    def rand(*shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def layer_norm(x):
        g = b.init(b.fresh("g"), (1.0 + rand(width, scale=0.1)))
        beta = b.init(b.fresh("beta"), rand(width, scale=0.1))
        return b.op("LayerNormalization", [x, g, beta], axis=-1, epsilon=1e-5)

    def proj(x, i, o):
        return linear(b, x, rand(i, o, scale=1 / np.sqrt(i)), rand(o, scale=0.1), relu=False)

    split = b.init("split_shape", np.array([batch, seq, heads, dh], dtype=np.int64))
    merge = b.init("merge_shape", np.array([batch, seq, width], dtype=np.int64))
    scale = b.init("scale", np.array(1.0 / np.sqrt(dh), dtype=np.float32))
    x = "x"
    shapes = []
    for _ in range(blocks):
        a = layer_norm(x)
        q, k, v = (b.op("Transpose", [b.op("Reshape", [proj(a, width, width), split])],
                        perm=[0, 2, 1, 3]) for _ in range(3))
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = b.op("Mul", [b.op("MatMul", [q, kt]), scale])
        ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
        ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        h = b.op("Add", [x, proj(ctx, width, width)])
        f = b.op("Gelu", [proj(layer_norm(h), width, ffn)], approximate="tanh")
        x = b.op("Add", [h, proj(f, ffn, width)])
        rows = batch * seq
        shapes += [(rows, width, width)] * 4 + [(rows, width, ffn), (rows, ffn, width)]
        # The attention products, one GEMM per sequence and head.
        shapes += [(seq, dh, seq), (seq, seq, dh)] * (batch * heads)
    return b.model([("x", [batch, seq, width])], "y", [batch, seq, width]), shapes


def digits_vit():
    """The ONNX fixture data/onnx/digits_vit.onnx (PyTorch's export of the digits ViT: 450
    images of 16 tokens, width 32, 4 heads, 2 pre-LN blocks, erf-GELU FFN of 64) on its 450
    held-out images, as a user would bring it."""
    model = onnx.load(os.path.join(ROOT, "data", "onnx", "digits_vit.onnx"))
    feed = read_safetensors(os.path.join(ROOT, "data", "onnx", "digits_vit.inputs.safetensors"))
    rows, width, ffn, heads, seq = 450 * 16, 32, 64, 4, 16
    shapes = [(rows, 4, width)]
    for _ in range(2):
        shapes += [(rows, width, width)] * 4 + [(rows, width, ffn), (rows, ffn, width)]
        shapes += [(seq, width // heads, seq), (seq, seq, width // heads)] * (450 * heads)
    shapes.append((450, width, 10))
    return ("digits ViT (ONNX), batch 450", model, feed, shapes, 20)


def workloads(quick):
    """(name, model, inputs, gemm shapes, executes per measurement)."""
    rng = np.random.default_rng(0)
    digits = read_safetensors(os.path.join(ROOT, "data", "digits_mlp.safetensors"))
    weights = {k: v for k, v in digits.items() if k[0] in "wb" and k[1:].isdigit()}
    x = digits["x"].astype(np.float32)
    out = []
    for batch, runs in [(1, 400), (450, 200), (4096, 50)]:
        rows = np.resize(x, (batch, x.shape[1])).astype(np.float32)
        model, shapes = mlp_model(weights, batch)
        out.append((f"digits MLP, batch {batch}", model, {"x": rows}, shapes, runs))
    for (m, k, n), runs in [((512, 2048, 512), 30), ((2048, 2048, 2048), 6)]:
        model, shapes = linear_relu_model(m, k, n, rng)
        xs = rng.standard_normal((m, k)).astype(np.float32)
        out.append((f"linear-relu {m}x{k}x{n}", model, {"x": xs}, shapes, runs))
    model, shapes = transformer_model(2, 16, 64, 4, 256, 2, rng)
    xs = rng.standard_normal((2, 16, 64)).astype(np.float32)
    out.append(("transformer (built-in sizes)", model, {"x": xs}, shapes, 200))
    out.append(digits_vit())
    if quick:
        out = [(n, m, i, s, max(3, r // 5)) for n, m, i, s, r in out]
    return out


# ---- the engines

def ort_session(path, threads):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_ms(session, feed, runs):
    for _ in range(3):
        session.run(None, feed)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def lumen_run(lumen, model, inputs, threads, runs, extra):
    cmd = [lumen, "run", model, "--inputs", inputs, "--runs", str(runs), "--threads",
           str(threads), "--json", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)


def bare_ms(bare, shapes, threads, runs):
    cmd = [bare, "--runs", str(runs), "--threads", str(threads)]
    cmd += [f"{m}x{k}x{n}" for m, k, n in shapes]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)["median_ms"]


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--lumen", default=os.path.join(ROOT, "target", "release", "lumen"))
    parser.add_argument("--bare", default=os.path.join(ROOT, "target", "release", "examples",
                                                      "bare_gemm"))
    parser.add_argument("--check-args", action="store_true",
                        help="check the other flags and exit (bench-cpu.sh, before it builds)")
    args = parser.parse_args()
    if args.rounds < 1:
        sys.exit(f"error: --rounds must be at least 1, got {args.rounds}")
    chosen = [w for w in workloads(args.quick) if args.only in w[0]]
    if not chosen:
        names = "; ".join(w[0] for w in workloads(args.quick))
        sys.exit(f"error: --only {args.only!r} matches no workload (they are: {names})")
    if args.check_args:
        return
    for path, how in [(args.lumen, "cargo build --release"),
                      (args.bare, "cargo build --release --workspace --bins --examples")]:
        if not os.path.exists(path):
            sys.exit(f"error: {path} not found: run `{how}` first")
    # The cores this process may use (taskset, cgroups' cpusets), as lumen's default counts them.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    thread_counts = [1] if cores == 1 else [1, cores]
    print(f"onnxruntime {ort.__version__}, numpy {np.__version__}, onnx {onnx.__version__}; "
          f"{cores} cores; {args.rounds} interleaved rounds", flush=True)

    cells = {}  # (workload, threads) -> {engine: [per-round ms]}
    with tempfile.TemporaryDirectory() as tmp:
        prepared = []
        for i, (name, model, feed, shapes, runs) in enumerate(chosen):
            path = os.path.join(tmp, f"w{i}.onnx")
            onnx.save(model, path)
            inputs = os.path.join(tmp, f"w{i}.inputs.safetensors")
            write_safetensors(inputs, feed)
            sessions = {t: ort_session(path, t) for t in thread_counts}
            want = sessions[1].run(None, feed)[0]
            expect = os.path.join(tmp, f"w{i}.expect.safetensors")
            write_safetensors(expect, {model.graph.output[0].name: want.astype(np.float32)})
            # Same model, same inputs: lumen's outputs within a relative 1e-4 of ORT's.
            tol = 1e-4 * max(1.0, float(np.abs(want).max()))
            check = lumen_run(args.lumen, path, inputs, 1, 1,
                              ["--no-search", "--expect", expect, "--tolerance", f"{tol:.3e}"])
            print(f"checked  {name}: lumen vs onnxruntime max abs error "
                  f"{check['max_abs_err']:.2e} (within {tol:.1e})", flush=True)
            prepared.append((name, path, inputs, feed, shapes, runs, sessions))

        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", flush=True)
            for name, path, inputs, feed, shapes, runs, sessions in prepared:
                for t in thread_counts:
                    cell = cells.setdefault((name, t), {})
                    fused = lumen_run(args.lumen, path, inputs, t, runs, ["--fuse"])
                    unfused = lumen_run(args.lumen, path, inputs, t, runs, ["--no-fuse"])
                    measured = {
                        "fused": fused["execute_seconds_median"] * 1e3,
                        "unfused": unfused["execute_seconds_median"] * 1e3,
                        "ort": ort_ms(sessions[t], feed, runs),
                        "bare": bare_ms(args.bare, shapes, t, runs),
                        "uploads": fused["upload_bytes_per_execute"],
                    }
                    for k, v in measured.items():
                        cell.setdefault(k, []).append(v)
                    print(f"  {name:<30} {t} thread{'s' if t > 1 else ' '}  "
                          f"lumen {measured['fused']:.3f} ms  ORT {measured['ort']:.3f} ms",
                          flush=True)

    print()
    header = (f"{'workload':<30} {'threads':>7} {'lumen ms':>9} {'unfused':>9} {'ORT ms':>9} "
              f"{'bare GEMM':>9} {'lumen/ORT':>9} {'fused/unf':>9} {'lumen/GEMM':>10}")
    print(header)
    print("-" * len(header))
    for name, *_ in prepared:
        for t in thread_counts:
            c = cells[(name, t)]
            med = {k: (statistics.median(v) if None not in v else None) for k, v in c.items()}

            def ratio(a, b):
                if None in c[a] or None in c[b]:
                    return None
                return statistics.median(x / y for x, y in zip(c[a], c[b]))

            print(f"{name:<30} {t:>7} {fmt(med['fused']):>9} {fmt(med['unfused']):>9} "
                  f"{fmt(med['ort']):>9} {fmt(med['bare']):>9} {fmt(ratio('fused', 'ort')):>9} "
                  f"{fmt(ratio('fused', 'unfused')):>9} {fmt(ratio('fused', 'bare')):>10}")
    print("\nms: median execute; ratios: median of per-round ratios (below 1: lumen is faster); "
          "bare GEMM: the workload's matmuls alone, one gemm crate call each.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
