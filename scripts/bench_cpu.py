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

Convolution networks (issue 26), exported by PyTorch (scripts/bench_cnn_models.py writes them,
with random weights and calibrated BatchNorm statistics, folded into the convolutions as
torch.onnx exports them at opset 17, into a cache directory, once; torch is needed only then):

- ResNet-50 (torchvision's layout) at 224x224, batch 1 and 8;
- MobileNetV2 (torchvision's layout) at 224x224, batch 1 and 8;
- a YOLOv8n-size detector (Ultralytics' layer sizes, Detect head decoded) at 640x640 batch 1,
  and at 320x320 batch 8 (at 640 a batch of 8 takes seconds an execute on 2 cores).

For these the bare GEMM is the convolutions' own GEMMs (per image and group, `[OC/g, C/g x
kernel] x [C/g x kernel, positions]`, what im2col feeds the GEMM; depthwise convolutions, pools
and the rest left out) plus the classifier, run once per image: what lumen's convolution would
cost with im2col, epilogues and every other op free.

Memory, measured once per workload and thread count (not per round), in MB of 10^6 bytes: lumen's
slab (the plan's `slab_bytes` from `--json`: activations, workspaces and the resident weights)
and the weights packed at prepare besides it (`packed_weight_bytes`), the peak RSS of a fused
`lumen run --runs 2` process (wait4's `ru_maxrss`, spawned from a bare interpreter because a
child's ru_maxrss on Linux starts from its parent's: the binary, the ONNX file read, import,
compile, slab, executes), and ONNX Runtime's peak RSS growth over session creation plus two runs
in a fresh Python process (VmHWM after, less VmRSS before, the high-water mark reset through
/proc/self/clear_refs once the inputs are loaded: ORT's model copy, initializers, prepacked
weights and arena), next to that process's whole peak.

--ops replaces the workloads by single-operator models (one Conv of each shape class the
networks run: dense 3x3, strided 3x3, pointwise 1x1, depthwise 3x3 at stride 1 and 2, the 7x7/2,
3x3/2 and 6x6/2 stems, a 3x3 with the exporter's SiLU as Sigmoid + Mul; MaxPool 3x3/2 and 5x5/1;
nearest 2x Resize), to see which operator kinds cost lumen its time against ORT.

It is a benchmark, not a test: `scripts/bench-cpu.sh` installs what it needs into .venv-bench and
runs it. Flags: --rounds N (default 5), --quick (fewer executes per measurement), --only NAME
(substring of a workload's name), --ops (the single-operator models instead), --cache DIR (the
CNN models' directory; default ~/.cache/lumen-bench/cnn-v1), --save FILE (every per-round
figure as JSON), --lumen PATH, --bare PATH, --check-args (check the others and exit, printing
`needs: torch` when a CNN model chosen is not in the cache yet: bench-cpu.sh runs it before
building, so a bad flag fails at once).
"""

import argparse
import gc
import json
import os
import resource
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
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.dont_write_bytecode = True  # no scripts/__pycache__ in the working tree
import bench_cnn_models  # noqa: E402  (imports torch only when it builds a model)
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


class Workload:
    """One benchmark: an ONNX model with its inputs (in memory, or `make()` returning the paths
    of files it wrote), the GEMM shapes of its bare-GEMM reference (None: derived from the
    model's convolutions and Gemms), and the executes per measurement."""

    def __init__(self, name, model=None, feed=None, shapes=None, runs=1, make=None,
                 cnn=None):
        self.name, self.model, self.feed, self.shapes, self.runs = name, model, feed, shapes, runs
        self.make, self.cnn = make, cnn  # cnn: (kind, batch, size) of bench_cnn_models


def conv_gemm_shapes(model):
    """The GEMMs lumen's convolution runs for one image of `model` (im2col: `[OC/g, C/g x
    taps] x [C/g x taps, positions]` per group, depthwise ones left out: they run no GEMM),
    plus every Gemm node's product, and the batch (the first input's first axis)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    dims = {}
    for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(
            inferred.graph.output):
        t = v.type.tensor_type
        if t.HasField("shape"):
            dims[v.name] = [d.dim_value for d in t.shape.dim]
    for init in inferred.graph.initializer:
        dims[init.name] = list(init.dims)
    batch = dims[inferred.graph.input[0].name][0]
    shapes = []
    for node in inferred.graph.node:
        if node.op_type == "Conv":
            w, out = dims[node.input[1]], dims[node.output[0]]
            groups = next((a.i for a in node.attribute if a.name == "group"), 1)
            taps = int(np.prod(w[2:]))
            positions = int(np.prod(out[2:]))
            if w[1] == 1 and groups > 1 and groups == dims[node.input[0]][1]:
                continue  # depthwise: lumen's direct kernel, no GEMM
            shapes += [(w[0] // groups, w[1] * taps, positions)] * groups
        elif node.op_type == "Gemm":
            a, b = dims[node.input[0]], dims[node.input[1]]
            trans_b = next((x.i for x in node.attribute if x.name == "transB"), 0)
            shapes.append((a[0] // batch or 1, a[1], b[0] if trans_b else b[1]))
    return shapes, batch


# ---- single-operator models (--ops): which operator kinds cost lumen its time

def conv_op_model(c, oc, hw, k, stride, groups=1, act=None, batch=1, rng=None):
    """One Conv (pads k // 2 each side, bias) on [batch, c, hw, hw], optionally followed by
    the exporter's SiLU (Sigmoid then Mul) or Relu."""
    b = Builder()
    fan = (c // groups) * k * k
    w = (rng.standard_normal((oc, c // groups, k, k)) / np.sqrt(fan)).astype(np.float32)
    bias = (rng.standard_normal(oc) * 0.1).astype(np.float32)
    pads = [k // 2 if k % 2 else k // 2 - 1] * 4  # 6x6/2 pads 2, as YOLOv5's stem
    y = b.op("Conv", ["x", b.init(b.fresh("w"), w), b.init(b.fresh("b"), bias)],
             kernel_shape=[k, k], strides=[stride, stride], pads=pads, group=groups)
    if act == "silu":
        b.op("Mul", [y, b.op("Sigmoid", [y])])
    elif act == "relu":
        b.op("Relu", [y])
    out = (hw + pads[0] + pads[2] - k) // stride + 1
    xs = rng.standard_normal((batch, c, hw, hw)).astype(np.float32)
    return b.model([("x", [batch, c, hw, hw])], "y", [batch, oc, out, out]), {"x": xs}


def maxpool_op_model(c, hw, k, stride, batch, rng):
    b = Builder()
    pad = k // 2
    b.op("MaxPool", ["x"], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    out = (hw + 2 * pad - k) // stride + 1
    xs = rng.standard_normal((batch, c, hw, hw)).astype(np.float32)
    return b.model([("x", [batch, c, hw, hw])], "y", [batch, c, out, out]), {"x": xs}


def resize_op_model(c, hw, batch, rng):
    """nn.Upsample(scale_factor=2, mode='nearest') as torch.onnx writes it."""
    b = Builder()
    scales = b.init("scales", np.array([1, 1, 2, 2], dtype=np.float32))
    b.op("Resize", ["x", "", scales], mode="nearest",
         coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    xs = rng.standard_normal((batch, c, hw, hw)).astype(np.float32)
    return b.model([("x", [batch, c, hw, hw])], "y", [batch, c, 2 * hw, 2 * hw]), {"x": xs}


def op_workloads():
    """Each shape class of the three networks once (where it comes from in brackets)."""
    rng = np.random.default_rng(1)
    specs = [
        # name, builder, executes per measurement
        ("op conv3x3 64->64 56x56", lambda: conv_op_model(64, 64, 56, 3, 1, rng=rng), 40),
        ("op conv3x3 16->16 160x160", lambda: conv_op_model(16, 16, 160, 3, 1, rng=rng), 40),
        ("op conv3x3 16->16 160 silu",
         lambda: conv_op_model(16, 16, 160, 3, 1, act="silu", rng=rng), 40),
        ("op conv3x3/2 16->32 320", lambda: conv_op_model(16, 32, 320, 3, 2, rng=rng), 40),
        ("op conv3x3/2 128->256 40", lambda: conv_op_model(128, 256, 40, 3, 2, rng=rng), 40),
        ("op conv1x1 256->64 56x56", lambda: conv_op_model(256, 64, 56, 1, 1, rng=rng), 40),
        ("op conv1x1 24->144 56x56", lambda: conv_op_model(24, 144, 56, 1, 1, rng=rng), 40),
        ("op conv1x1 1024->256 14x14", lambda: conv_op_model(1024, 256, 14, 1, 1, rng=rng), 40),
        ("op conv1x1 64->64 80 b8",
         lambda: conv_op_model(64, 64, 80, 1, 1, batch=8, rng=rng), 10),
        ("op dwconv3x3 144 56x56",
         lambda: conv_op_model(144, 144, 56, 3, 1, groups=144, rng=rng), 40),
        ("op dwconv3x3/2 144 56x56",
         lambda: conv_op_model(144, 144, 56, 3, 2, groups=144, rng=rng), 40),
        ("op stem conv7x7/2 3->64 224", lambda: conv_op_model(3, 64, 224, 7, 2, rng=rng), 40),
        ("op stem conv3x3/2 3->16 640", lambda: conv_op_model(3, 16, 640, 3, 2, rng=rng), 20),
        ("op stem conv6x6/2 3->16 640", lambda: conv_op_model(3, 16, 640, 6, 2, rng=rng), 20),
        ("op maxpool3x3/2 64 112x112", lambda: maxpool_op_model(64, 112, 3, 2, 1, rng), 40),
        ("op maxpool5x5/1 128 20x20", lambda: maxpool_op_model(128, 20, 5, 1, 1, rng), 100),
        ("op resize2x 256 20->40", lambda: resize_op_model(256, 20, 1, rng), 100),
        ("op resize2x 128 40->80", lambda: resize_op_model(128, 40, 1, rng), 100),
    ]
    out = []
    for name, build, runs in specs:
        model, feed = build()
        out.append(Workload(name, model, feed, None, runs))
    return out


# (kind, batch, input size, executes per measurement) of the CNN workloads.
CNNS = [("resnet50", 1, 224, 10), ("resnet50", 8, 224, 2), ("mobilenetv2", 1, 224, 20),
        ("mobilenetv2", 8, 224, 3), ("yolov8n", 1, 640, 4), ("yolov8n", 8, 320, 2)]
CNN_NAMES = {"resnet50": "ResNet-50", "mobilenetv2": "MobileNetV2", "yolov8n": "YOLOv8n"}


def workloads(quick, ops=False, cache=None):
    """The workloads, in order (CNN models are built when chosen, see `Workload.make`)."""
    if ops:
        out = op_workloads()
        if quick:
            for w in out:
                w.runs = max(3, w.runs // 5)
        return out
    rng = np.random.default_rng(0)
    digits = read_safetensors(os.path.join(ROOT, "data", "digits_mlp.safetensors"))
    weights = {k: v for k, v in digits.items() if k[0] in "wb" and k[1:].isdigit()}
    x = digits["x"].astype(np.float32)
    out = []
    for batch, runs in [(1, 400), (450, 200), (4096, 50)]:
        rows = np.resize(x, (batch, x.shape[1])).astype(np.float32)
        model, shapes = mlp_model(weights, batch)
        out.append(Workload(f"digits MLP, batch {batch}", model, {"x": rows}, shapes, runs))
    for (m, k, n), runs in [((512, 2048, 512), 30), ((2048, 2048, 2048), 6)]:
        model, shapes = linear_relu_model(m, k, n, rng)
        xs = rng.standard_normal((m, k)).astype(np.float32)
        out.append(Workload(f"linear-relu {m}x{k}x{n}", model, {"x": xs}, shapes, runs))
    model, shapes = transformer_model(2, 16, 64, 4, 256, 2, rng)
    xs = rng.standard_normal((2, 16, 64)).astype(np.float32)
    out.append(Workload("transformer (built-in sizes)", model, {"x": xs}, shapes, 200))
    out.append(Workload(*digits_vit()))
    for kind, batch, size, runs in CNNS:
        out.append(Workload(f"{CNN_NAMES[kind]} {size}, batch {batch}", runs=runs,
                            make=lambda k=kind, b=batch, s=size: bench_cnn_models.build(
                                k, b, s, cache),
                            cnn=(kind, batch, size)))
    if quick:
        for w in out:
            w.runs = max(3, w.runs // 5) if w.make is None else max(1, w.runs // 2)
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
    for _ in range(3 if runs >= 10 else 1):
        session.run(None, feed)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def proc_status_kb(field):
    """A `VmRSS:`-style field of /proc/self/status in kB (None off Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def ort_memory_child(path, inputs, threads):
    """(--ort-memory) In a fresh process: the peak RSS growth of creating ORT's session on
    `path` and running it twice, printed as JSON."""
    feed = read_safetensors(inputs)
    feed = {k: np.array(v) for k, v in feed.items()}
    gc.collect()
    before = proc_status_kb("VmRSS")
    method = "VmHWM - VmRSS before (clear_refs 5)"
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak RSS to the current RSS
    except OSError:
        method = "ru_maxrss - VmRSS before (peak not reset)"
    session = ort_session(path, threads)
    for _ in range(2):
        session.run(None, feed)
    peak = proc_status_kb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kb": before, "peak_kb": peak, "delta_kb": peak - (before or 0),
                      "method": method}))


def ort_memory(path, inputs, threads):
    cmd = [sys.executable, os.path.abspath(__file__), "--ort-memory", path, inputs, str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def lumen_run(lumen, model, inputs, threads, runs, extra):
    cmd = [lumen, "run", model, "--inputs", inputs, "--runs", str(runs), "--threads",
           str(threads), "--json", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)


# Spawns argv[1:] and prints its peak RSS in kB (wait4's ru_maxrss). Run from a bare
# interpreter: on Linux a child's ru_maxrss counts the RSS of the process that forked it (exec
# keeps the old image's high-water mark), so this one forks from ~10 MB, not from this script.
RSS_CHILD = """import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def lumen_rss_kb(lumen, model, inputs, threads, runs):
    """The peak RSS (kB) of a fused `lumen run` process, with the floor the measurement has
    (the same spawner running `true`)."""
    def spawn(cmd):
        done = subprocess.run([sys.executable, "-S", "-c", RSS_CHILD, *cmd], capture_output=True,
                              text=True)
        code, kb = done.stdout.split()
        if int(code) != 0:
            sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")
        return int(kb)
    cmd = [lumen, "run", model, "--inputs", inputs, "--runs", str(runs), "--threads",
           str(threads), "--json", "--fuse"]
    return spawn(cmd), spawn(["/bin/true" if os.path.exists("/bin/true") else "/usr/bin/true"])


def bare_ms(bare, shapes, threads, runs):
    if not shapes:
        return None
    cmd = [bare, "--runs", str(runs), "--threads", str(threads)]
    cmd += [f"{m}x{k}x{n}" for m, k, n in shapes]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)["median_ms"]


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def prepare(w, tmp, i, lumen, thread_counts, cache):
    """Writes (or builds) the workload's files, opens ORT's sessions, checks lumen against
    ORT and measures memory; returns what the rounds need."""
    if w.make is not None:
        print(f"building {w.name} (cached in {cache or bench_cnn_models.default_cache()})",
              flush=True)
        path, inputs = w.make()
        feed = read_safetensors(inputs)
    else:
        path = os.path.join(tmp, f"w{i}.onnx")
        onnx.save(w.model, path)
        inputs = os.path.join(tmp, f"w{i}.inputs.safetensors")
        write_safetensors(inputs, w.feed)
        feed = w.feed
    shapes, scale = w.shapes, 1
    if shapes is None:
        per_image, batch = conv_gemm_shapes(onnx.load(path))
        # The GEMMs of one image, timed once and counted once per image of the batch.
        shapes, scale = per_image, batch
    sessions = {t: ort_session(path, t) for t in thread_counts}
    want = sessions[1].run(None, feed)[0]
    out_name = sessions[1].get_outputs()[0].name
    expect = os.path.join(tmp, f"w{i}.expect.safetensors")
    write_safetensors(expect, {out_name: want.astype(np.float32)})
    # Same model, same inputs: lumen's outputs within a relative 1e-4 of ORT's.
    tol = 1e-4 * max(1.0, float(np.abs(want).max()))
    check = lumen_run(lumen, path, inputs, 1, 1,
                      ["--no-search", "--expect", expect, "--tolerance", f"{tol:.3e}"])
    print(f"checked  {w.name}: lumen vs onnxruntime max abs error "
          f"{check['max_abs_err']:.2e} (within {tol:.1e})", flush=True)
    memory = {t: ort_memory(path, inputs, t) for t in thread_counts}
    for t in thread_counts:
        memory[t]["lumen_kb"], memory[t]["floor_kb"] = lumen_rss_kb(lumen, path, inputs, t, 2)
    return {"name": w.name, "path": path, "inputs": inputs, "feed": feed, "shapes": shapes,
            "scale": scale, "runs": w.runs, "sessions": sessions, "memory": memory}


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--ort-memory":
        ort_memory_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--ops", action="store_true",
                        help="time single-operator models (conv shape classes, pools, resize)")
    parser.add_argument("--cache", default=None,
                        help=f"the CNN models' directory (default {bench_cnn_models.default_cache()})")
    parser.add_argument("--save", default=None, help="write every per-round figure to FILE (JSON)")
    parser.add_argument("--lumen", default=os.path.join(ROOT, "target", "release", "lumen"))
    parser.add_argument("--bare", default=os.path.join(ROOT, "target", "release", "examples",
                                                      "bare_gemm"))
    parser.add_argument("--check-args", action="store_true",
                        help="check the other flags and exit (bench-cpu.sh, before it builds)")
    args = parser.parse_args()
    if args.rounds < 1:
        sys.exit(f"error: --rounds must be at least 1, got {args.rounds}")
    every = workloads(args.quick, args.ops, args.cache)
    chosen = [w for w in every if args.only in w.name]
    if not chosen:
        names = "; ".join(w.name for w in every)
        sys.exit(f"error: --only {args.only!r} matches no workload (they are: {names})")
    if args.check_args:
        cache = args.cache or bench_cnn_models.default_cache()
        if any(w.cnn and not bench_cnn_models.cached(*w.cnn, cache) for w in chosen):
            print("needs: torch")
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

    cells = {}  # (workload, threads) -> {engine: [per-round values]}
    with tempfile.TemporaryDirectory() as tmp:
        prepared = [prepare(w, tmp, i, args.lumen, thread_counts, args.cache)
                    for i, w in enumerate(chosen)]
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", flush=True)
            for p in prepared:
                for t in thread_counts:
                    cell = cells.setdefault((p["name"], t), {})
                    fused = lumen_run(args.lumen, p["path"], p["inputs"], t, p["runs"], ["--fuse"])
                    unfused = lumen_run(args.lumen, p["path"], p["inputs"], t, p["runs"],
                                        ["--no-fuse"])
                    bare = bare_ms(args.bare, p["shapes"], t, p["runs"])
                    measured = {
                        "fused": fused["execute_seconds_median"] * 1e3,
                        "unfused": unfused["execute_seconds_median"] * 1e3,
                        "ort": ort_ms(p["sessions"][t], p["feed"], p["runs"]),
                        "bare": None if bare is None else bare * p["scale"],
                        "uploads": fused["upload_bytes_per_execute"],
                        "slab": fused["slab_bytes"],
                        "packed": fused.get("packed_weight_bytes") or 0,
                    }
                    for k, v in measured.items():
                        cell.setdefault(k, []).append(v)
                    print(f"  {p['name']:<30} {t} thread{'s' if t > 1 else ' '}  "
                          f"lumen {measured['fused']:.3f} ms  unfused {measured['unfused']:.3f} "
                          f"ms  ORT {measured['ort']:.3f} ms", flush=True)

    print()
    header = (f"{'workload':<30} {'threads':>7} {'lumen ms':>9} {'unfused':>9} {'ORT ms':>9} "
              f"{'bare GEMM':>9} {'lumen/ORT':>9} {'fused/unf':>9} {'lumen/GEMM':>10}")
    print(header)
    print("-" * len(header))
    for p in prepared:
        for t in thread_counts:
            c = cells[(p["name"], t)]
            med = {k: (statistics.median(v) if None not in v else None) for k, v in c.items()}

            def ratio(a, b):
                if None in c[a] or None in c[b]:
                    return None
                return statistics.median(x / y for x, y in zip(c[a], c[b]))

            print(f"{p['name']:<30} {t:>7} {fmt(med['fused']):>9} {fmt(med['unfused']):>9} "
                  f"{fmt(med['ort']):>9} {fmt(med['bare']):>9} {fmt(ratio('fused', 'ort')):>9} "
                  f"{fmt(ratio('fused', 'unfused')):>9} {fmt(ratio('fused', 'bare')):>10}")
    print("\nms: median execute; ratios: median of per-round ratios (below 1: lumen is faster); "
          "bare GEMM: the workload's matmuls alone, one gemm crate call each (convolutions: their "
          "im2col GEMMs, per image).")

    print()
    header = (f"{'workload':<30} {'threads':>7} {'slab MB':>9} {'packed MB':>9} "
              f"{'lumen RSS':>9} {'ORT +RSS':>9} {'ORT RSS':>9} {'slab/ORT+':>9}")
    print(header)
    print("-" * len(header))
    for p in prepared:
        for t in thread_counts:
            c, m = cells[(p["name"], t)], p["memory"][t]
            slab, packed = c["slab"][-1] / 1e6, c["packed"][-1] / 1e6
            rss = m["lumen_kb"] * 1024 / 1e6
            delta, whole = m["delta_kb"] * 1024 / 1e6, m["peak_kb"] * 1024 / 1e6
            # At or under the spawner's own peak, lumen's peak is not seen: at most the floor.
            rss_text = f"<{rss:.1f}" if m["lumen_kb"] <= m["floor_kb"] else f"{rss:.1f}"
            print(f"{p['name']:<30} {t:>7} {slab:>9.1f} {packed:>9.1f} {rss_text:>9} "
                  f"{delta:>9.1f} {whole:>9.1f} {fmt(slab / delta if delta > 0 else None, 2):>9}")
    m = next(iter(prepared[0]["memory"].values()))
    print("\nMB of 10^6 bytes, measured once (not per round). slab: lumen's plan (activations, "
          "workspaces, resident weights); packed: weights packed at prepare besides it; lumen "
          "RSS: a fused `lumen run --runs 2`'s peak RSS (wait4; the measurement's floor, the "
          f"same spawn of `true`, is {m['floor_kb'] * 1024 / 1e6:.1f}); ORT +RSS: peak RSS "
          f"growth over session creation and two runs in a fresh process ({m['method']}); ORT "
          "RSS: that Python process's whole peak.")
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"thread_counts": thread_counts, "rounds": args.rounds,
                       "cells": [{"workload": n, "threads": t, **v} for (n, t), v in cells.items()],
                       "memory": {p["name"]: p["memory"] for p in prepared}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
