#!/usr/bin/env python3
"""ONNX backend node-test conformance of lumen, measured side by side with ONNX Runtime.

What it runs
------------
EVERY case of the ONNX backend node suite (``onnx/backend/test/data/node/*/``: one model,
usually a single node, with ``test_data_set_N/input_*.pb`` and ``output_*.pb``), all operators,
not only those lumen imports. Pip wheels of onnx ship no ``data/node`` directories; the script
then writes them once into a cache (``--cache``, default ``/tmp/lumen-onnx-node-<version>``)
from ``onnx.backend.test.case.node.collect_testcases()``, byte for byte the way onnx's own
``backend-test-tools generate-data`` does (the shipped directories are made by that command).

Each case goes through two engines, each in its own forked process with a per-case timeout,
``--jobs`` (default: the cores) at a time:

* lumen: ``lumen run model.onnx --inputs in.safetensors --expect out.safetensors --no-search
  --runs 1 --threads 1 --json`` (the release binary, or ``--lumen PATH``);
* ONNX Runtime: ``onnxruntime.backend.prepare(model)`` and ``run(inputs)``, as onnx's backend
  test runner (and the ONNX backend scoreboard) drives it, one intra-op thread.

The check is onnx's own (``onnx.backend.test.runner.Runner.assert_similar_outputs``): per
output, same shape, and elementwise ``|got - ref| <= atol + rtol * |ref|`` with the case's
rtol/atol (1e-3 and 1e-7 for every node case), NaN equal to NaN; exact for integers. ORT's
outputs are checked with that function itself (dtype equality included). lumen's CLI reports
per output only ``max |lumen - reference|``, so the elementwise rule is decided from it:

1. one run against the reference: an integer/bool output passes when the max is 0; a float
   output passes when ``max <= atol + rtol * min|ref|``, fails when
   ``max > atol + rtol * max|ref|``;
2. in between, two more runs. Only the elements whose bound ``atol + rtol * |ref|`` is below
   that max can fail; their --expect values are shifted by ``sign * (bound - K)`` (one run per
   sign, ``K = 2 max + their largest bound``, rounded to f32 toward the reference), the others
   keep the reference. lumen's max is then at most ``K`` exactly when no element is past its
   bound on that side: the exact elementwise rule, up to one f32 ulp of the shifted values (a
   verdict inside it counts as a pass and is reported as ``borderline``).

lumen's booleans are f32 0/1: a bool reference is given as f32 and must match exactly. A
reference that holds NaN cannot be compared through the CLI when lumen's output holds NaN (its
max is then NaN): such outputs are ``unverified`` (not a pass), with the NaN counts.

Classification
--------------
* ``pass``    every output of every data set passes;
* ``fail``    wrong numbers, wrong shape, NaN where the reference has none, a wrong output type,
              a timeout (reason ``timeout``), or (lumen) a one-line error that does not say the
              model is out of scope (``rejected: ...``), or (ORT) an exception at run time;
* ``skip``    a clear one-line refusal, by reason: operator not imported / not implemented, data
              type (float16, bfloat16, double, string, uint8, int8, ...), non-tensor values
              (sequence, optional), opset, training-only, an optional output not computed, an
              input needed at import time, an unsupported attribute or form;
* ``crash``   lumen: a panic, a signal, an exit code other than 0/1/2, exit 2 (usage), an error
              that is not one ``error:`` line, exit 0 without a report; ORT: the process died.
              These are bugs and are printed first.
* ``unverified`` (lumen only) see NaN above.

The pass rate is over ALL cases of the suite, and over the fp32/int cases (every input and
output a float32, int32, int64 or bool tensor).

How to run
----------
::

    cargo build --release
    python3 scripts/onnx_conformance.py                    # both engines, text report
    python3 scripts/onnx_conformance.py --json report.json # also the JSON (--json alone: stdout)
    python3 scripts/onnx_conformance.py --only Gemm --only Conv   # cases of these operators
    python3 scripts/onnx_conformance.py --filter resize --limit 20 --no-ort
    python3 scripts/onnx_conformance.py --lumen path/to/lumen -j 8 --timeout 30

Needs numpy, safetensors, onnx (1.23.2 measured) and onnxruntime (``--no-ort`` without it).
Exit status 0 whenever a report was produced (failures are its content), 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import io
import json
import multiprocessing
import multiprocessing.connection
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DOMAINS = ("", "ai.onnx")
EXPANDED_RE = re.compile(r"_expanded(_ver\d+)?$")
FP32_INT_DTYPES = ("float32", "int32", "int64", "bool")
# dtypes the safetensors numpy writer takes (lumen reads f32/i64/i32 and names the others).
ST_DTYPES = ("bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
             "float16", "float32", "float64")
STATUSES = ("pass", "fail", "skip", "crash", "unverified")
ENGINES = ("lumen", "ort")

# --------------------------------------------------------------------------------------------
# The cases on disk


def write_case_dirs(root: str) -> None:
    """Writes every node case as onnx's `backend-test-tools generate-data` writes it."""
    import numpy as np
    from onnx import TensorProto, numpy_helper
    from onnx.backend.test.case import node as node_cases

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = node_cases.collect_testcases()

    def proto(value, vi):
        t = vi.type
        if t.HasField("map_type"):
            return numpy_helper.from_dict(value, vi.name)
        if t.HasField("sequence_type"):
            return numpy_helper.from_list(value, vi.name)
        if t.HasField("optional_type"):
            return numpy_helper.from_optional(value, vi.name)
        if isinstance(value, TensorProto):
            return value
        return numpy_helper.from_array(value, vi.name)

    for case in cases:
        d = os.path.join(root, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets or []):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds, exist_ok=True)
            for j, v in enumerate(inputs):
                with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                    f.write(proto(v, case.model.graph.input[j]).SerializeToString())
            for j, v in enumerate(outputs):
                with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                    f.write(proto(v, case.model.graph.output[j]).SerializeToString())
        if (case.rtol, case.atol) != (1e-3, 1e-7):
            with open(os.path.join(d, "tolerance.json"), "w") as f:
                json.dump({"rtol": case.rtol, "atol": case.atol}, f)


def node_root(cache: str) -> tuple:
    """The directory of node cases and where it comes from."""
    import onnx

    shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if os.path.isdir(shipped) and any(
        os.path.isfile(os.path.join(shipped, x, "model.onnx")) for x in os.listdir(shipped)
    ):
        return shipped, f"onnx {onnx.__version__}'s shipped data directories ({shipped})"
    root = os.path.join(cache, "node")
    stamp = os.path.join(cache, "complete")
    if not os.path.isfile(stamp):
        print(f"onnx_conformance: writing the node cases of onnx {onnx.__version__} to {root} "
              "(once)", file=sys.stderr)
        os.makedirs(cache, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="node.", dir=cache)
        write_case_dirs(tmp)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(tmp, root)
        with open(stamp, "w") as f:
            f.write(onnx.__version__ + "\n")
    return root, (f"onnx {onnx.__version__}'s collect_testcases(), written as the shipped data "
                  f"directories to {root}")


def load_value(path: str, type_proto):
    """One input_N.pb/output_N.pb as onnx's runner reads it (Runner._load_proto)."""
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        data = f.read()
    if type_proto.HasField("sequence_type"):
        p = onnx.SequenceProto()
        p.ParseFromString(data)
        return numpy_helper.to_list(p)
    if type_proto.HasField("optional_type"):
        p = onnx.OptionalProto()
        p.ParseFromString(data)
        return numpy_helper.to_optional(p)
    p = onnx.TensorProto()
    p.ParseFromString(data)
    return numpy_helper.to_array(p)


def load_data_sets(case_dir: str, model) -> list:
    sets = []
    for ds in sorted(x for x in os.listdir(case_dir) if x.startswith("test_data_set_")):
        dsd = os.path.join(case_dir, ds)
        n_in = len([x for x in os.listdir(dsd) if re.fullmatch(r"input_\d+\.pb", x)])
        n_out = len([x for x in os.listdir(dsd) if re.fullmatch(r"output_\d+\.pb", x)])
        ins = [load_value(os.path.join(dsd, f"input_{i}.pb"), model.graph.input[i].type)
               for i in range(n_in)]
        outs = [load_value(os.path.join(dsd, f"output_{i}.pb"), model.graph.output[i].type)
                for i in range(n_out)]
        sets.append((ins, outs))
    return sets


def tolerance_of(case_dir: str) -> tuple:
    p = os.path.join(case_dir, "tolerance.json")
    if os.path.isfile(p):
        with open(p) as f:
            t = json.load(f)
        return float(t["rtol"]), float(t["atol"])
    return 1e-3, 1e-7


# --------------------------------------------------------------------------------------------
# Case metadata: operators, the operator a case counts for, the fp32/int flag


def _op_key(node) -> str:
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def graph_ops(graph) -> list:
    """Distinct op types of a graph and its subgraphs, in first-use order."""
    import onnx

    seen = []
    for node in graph.node:
        for key in [_op_key(node)] + [
            k
            for attr in node.attribute
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else
                        list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else [])
            for k in graph_ops(sub)
        ]:
            if key not in seen:
                seen.append(key)
    return seen


def _type_name(type_proto) -> str:
    import onnx

    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        elem = type_proto.tensor_type.elem_type
        if elem == onnx.TensorProto.STRING:
            return "string"
        try:
            return onnx.helper.tensor_dtype_to_np_dtype(elem).name
        except Exception:  # noqa: BLE001
            return onnx.TensorProto.DataType.Name(elem).lower()
    if kind == "sequence_type":
        return f"sequence({_type_name(type_proto.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({_type_name(type_proto.optional_type.elem_type)})"
    return str(kind)


def describe_cases(root: str, only_ops: list, filters: list, limit: int | None) -> list:
    """[{name, dir, ops, op, expanded, io_types, fp32_int}] sorted by name."""
    import onnx

    names = sorted(x for x in os.listdir(root) if os.path.isfile(os.path.join(root, x,
                                                                              "model.onnx")))
    if filters:
        names = [n for n in names if any(f in n for f in filters)]
    cases = []
    for name in names:
        d = os.path.join(root, name)
        model = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        ds = os.path.join(d, "test_data_set_0")
        n_in = len([x for x in os.listdir(ds) if re.fullmatch(r"input_\d+\.pb", x)]) \
            if os.path.isdir(ds) else 0
        types = [_type_name(model.graph.input[i].type) for i in range(n_in)]
        types += [_type_name(o.type) for o in model.graph.output]
        cases.append({"name": name, "dir": d, "ops": graph_ops(model.graph),
                      "expanded": bool(EXPANDED_RE.search(name)),
                      "io_types": sorted(set(types)),
                      "fp32_int": all(t in FP32_INT_DTYPES for t in types)})
    attribute_ops(cases)
    if only_ops:
        want = {o.lower() for o in only_ops}
        cases = [c for c in cases if c["op"].lower() in want
                 or c["op"].split(".")[-1].lower() in want]
    if limit is not None:
        cases = cases[:limit]
    return cases


def _snake(op: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op).lower()


def attribute_ops(cases: list) -> None:
    """Each case's operator: its single node's (expansions: their base case's; otherwise the
    longest schema name its test name starts with)."""
    import onnx

    by_name = {c["name"]: c for c in cases}
    prefixes = {}
    for schema in onnx.defs.get_all_schemas():
        op = schema.name if schema.domain in DEFAULT_DOMAINS else f"{schema.domain}.{schema.name}"
        prefixes.setdefault(_snake(schema.name), op)
        prefixes.setdefault(schema.name.lower(), op)

    def by_prefix(name: str) -> str:
        best = None
        for p, op in prefixes.items():
            head = "test_" + p
            if name == head or name.startswith(head + "_"):
                if best is None or len(p) > len(best[0]):
                    best = (p, op)
        return best[1] if best else "?"

    for c in cases:
        base = by_name.get(EXPANDED_RE.sub("", c["name"]))
        if not c["expanded"] and len(c["ops"]) == 1:
            c["op"] = c["ops"][0]
        elif base is not None and len(base["ops"]) == 1:
            c["op"] = base["ops"][0]
        else:
            c["op"] = by_prefix(c["name"])
            if c["op"] == "?" and c["ops"]:
                c["op"] = c["ops"][0]  # test_loop11 -> Loop, test_scan9_sum -> Scan


def lumen_operators(src: str = REPO_ROOT) -> list:
    """The operators lumen's importer lists (lumen_onnx::ops::operators()), read from the rows
    of crates/onnx/src/ops/*.rs; ai.onnx.ml ones as `ai.onnx.ml.NAME`. Empty without the
    sources."""
    ops_dir = os.path.join(src, "crates", "onnx", "src", "ops")
    if not os.path.isdir(ops_dir):
        return []
    found = set()
    for fname in sorted(os.listdir(ops_dir)):
        if not fname.endswith(".rs"):
            continue
        with open(os.path.join(ops_dir, fname)) as f:
            src = f.read()
        prefix = "ai.onnx.ml." if fname == "ml.rs" else ""
        m = re.search(r"const OPS: &\[\(&str, Handler\)\]\s*=\s*&\[(.*?)\];", src, re.S)
        if m:
            found.update(prefix + op for op in re.findall(r'\(\s*"(\w+)"\s*,', m.group(1)))
        if fname == "mod.rs":
            m = re.search(r"FOLDED_ONLY: &\[&str\] =\s*&\[(.*?)\];", src, re.S)
            if m:
                found.update(re.findall(r'"(\w+)"', m.group(1)))
            m = re.search(r"\.chain\(\[(.*?)\]\)", src, re.S)
            if m:
                for op, fam in re.findall(r'\("(\w+)",\s*Family::(\w+)\)', m.group(1)):
                    found.add(("ai.onnx.ml." if fam == "Ml" else "") + op)
    return sorted(found)


# --------------------------------------------------------------------------------------------
# lumen


def _c_array(a):
    import numpy as np

    return np.array(a, order="C", copy=True)


def _stderr_tail(text: str, lines: int = 15) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


_DTYPE_GROUPS = [
    (r"^(float16|f16)$", "float16"),
    (r"^(bfloat16|bf16)$", "bfloat16"),
    (r"^(double|float64|f64)$", "double"),
    (r"^(string|str)$", "string"),
    (r"^(bool|boolean)$", "bool"),
    (r"^(u?int(8|16)|uint(32|64)|[ui](8|16)|u(32|64))$", "int8/uint8/int16/uint16/uint32/uint64"),
    (r"^(float8|float4|int4|uint4|int2|uint2|e8m0)", "float8/float4/int4/int2"),
]


def dtype_group(name: str) -> str:
    """`data type: GROUP` for a dtype named by lumen (ONNX's FLOAT16, safetensors' F16, `data
    type 17`)."""
    n = name.strip().lower()
    m = re.fullmatch(r"data type (\d+)", n)
    if m:
        import onnx

        try:
            n = onnx.TensorProto.DataType.Name(int(m.group(1))).lower()
        except ValueError:
            pass
    for pattern, group in _DTYPE_GROUPS:
        if re.search(pattern, n):
            return f"data type: {group}"
    return f"data type: {n}"


def lumen_error_category(msg: str, ops: list) -> tuple:
    """(status, reason) for lumen's one-line error `msg` (without `error: `)."""
    if any(op.startswith("ai.onnx.preview.training.") for op in ops) or re.search(
            r"training mode|training-only|training_mode", msg):
        return "skip", "training-only"
    m = re.search(r"unsupported operator (\S+) \(node `[^`]*`, opset \d+\): (.*)$", msg)
    if m:
        why = m.group(2)
        if "does not import this operator" in why or "not in the default ONNX domain" in why:
            return "skip", "operator not imported"
        if "at import time only" in why or "known at import" in why:
            return "skip", "input needed at import time (static shapes, folded-only operator)"
        d = re.search(r"to (data type \d+|bfloat16|float16|double|string|\w+) \(lumen computes",
                      why)
        if d:
            return "skip", dtype_group(d.group(1))
        if "attribute" in why or re.search(r"\w+ other than|\w+ = ", why):
            return "skip", "unsupported attribute value or form"
        return "skip", "unsupported attribute value or form"
    if "non-tensor" in msg:
        return "skip", "non-tensor value (sequence, optional, map)"
    m = re.search(r"has element type (data type \d+|\w+)", msg)
    if m:
        return "skip", dtype_group(m.group(1))
    if re.search(r"^opset \d+ is not supported", msg):
        return "skip", "opset not imported"
    if "imports no opset of the default ai.onnx domain" in msg:
        return "skip", "no ai.onnx opset in the model (ai.onnx.ml or preview domain only)"
    if "computed by no node lumen imported" in msg:
        return "skip", "optional output lumen does not compute"
    if re.search(r"must be known|known at import", msg):
        return "skip", "input needed at import time (static shapes, folded-only operator)"
    if re.search(r"has dtype [iu]\d+, expected f32|is [iu]\d+, expected f32|has dtype f32, "
                 r"expected [iu]\d+|is f32, expected [iu]\d+|has dtype [iu]\d+, expected [iu]\d+"
                 r"|holds output `[^`]*` as \w+; the model computes it as \w+",
                 msg):
        return "fail", "rejected: type error in the compiler (an integer tensor where another " \
                       "type is expected)"
    return "fail", "rejected: other one-line error"


def _shifted_expect(ref, tol, err: float, sign: int) -> tuple:
    """One output's --expect values for a shifted run, and how to read lumen's max.

    Only the elements whose bound `tol` is below the first run's max |err| (the set U) can
    fail; every other element keeps its reference and adds at most `err` to lumen's max. An
    element i of U gets e_i = ref_i + sign * (tol_i - K), K = 2 err + max_U tol, rounded to f32
    toward the reference, so |lumen_i - e_i| = K + (sign * d_i - tol_i) + rho_i (d = lumen -
    ref, 0 <= rho_i <= one f32 ulp): lumen's max is at most K exactly when no element of U
    passes its bound on that side. Returns (e as f32, K, the largest K + rho_i)."""
    import numpy as np

    r = ref.astype(np.float64)
    finite = np.isfinite(r)
    u = finite & (tol < err)
    k = 2.0 * err + float(tol[u].max())
    target = r + sign * (tol - k)
    e = np.where(u, target, r).astype(np.float32)
    e64 = e.astype(np.float64)
    # Toward the reference: then the shift |r - e| is at least K - tol.
    if sign > 0:
        e = np.where(u & (e64 > target), np.nextafter(e, np.float32(-np.inf)), e)
    else:
        e = np.where(u & (e64 < target), np.nextafter(e, np.float32(np.inf)), e)
    e = e.astype(np.float32)
    shift = np.abs(r - e.astype(np.float64))
    kmax = float((tol + shift)[u].max())
    return e, k, kmax


def run_lumen_once(lumen: str, model_path: str, in_path: str, expect: dict, out_path: str,
                   timeout: float):
    from safetensors.numpy import save_file

    save_file({k: _c_array(v) for k, v in expect.items()}, out_path)
    cmd = [lumen, "run", model_path, "--inputs", in_path, "--expect", out_path, "--no-search",
           "--runs", "1", "--threads", "1", "--json", "--tolerance", "1e30"]
    env = dict(os.environ, LUMEN_CPU_PASSIVE_WAIT="1", RUST_BACKTRACE="1")
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"timeout": True, "cmd": cmd, "seconds": round(time.monotonic() - t0, 3)}
    report = None
    if p.stdout.strip():
        try:
            report = json.loads(p.stdout)
        except json.JSONDecodeError:
            report = None
    return {"timeout": False, "rc": p.returncode, "stderr": p.stderr, "stdout": p.stdout,
            "report": report, "cmd": cmd, "seconds": round(time.monotonic() - t0, 3)}


def lumen_data_set(case: dict, index: int, inputs: list, outputs: list, model, args,
                   workdir: str) -> dict:
    import numpy as np
    from safetensors.numpy import save_file

    rtol, atol = tolerance_of(case["dir"])
    model_path = os.path.join(case["dir"], "model.onnx")
    in_path = os.path.join(workdir, f"in_{index}.safetensors")
    out_path = os.path.join(workdir, f"expect_{index}.safetensors")
    feeds = {}
    for vi, v in zip(model.graph.input, inputs):
        if isinstance(v, np.ndarray) and v.dtype.name in ST_DTYPES:
            feeds[vi.name] = _c_array(v)
    save_file(feeds, in_path)
    # References: tensors lumen can be given (f32, i64, i32; bool as lumen's f32 0/1).
    refs, unreadable = {}, []
    for vi, v in zip(model.graph.output, outputs):
        if isinstance(v, np.ndarray) and v.dtype.name in ("float32", "int64", "int32"):
            refs[vi.name] = v
        elif isinstance(v, np.ndarray) and v.dtype.name == "bool":
            refs[vi.name] = v.astype(np.float32)
        else:
            unreadable.append((vi.name, _type_name(vi.type)))
    res = {"data_set": index}

    def crash(kind, run, reason=None):
        stderr = run.get("stderr", "")
        m = re.search(r"panicked at ([^\n]*)\n([^\n]*)", stderr)
        res.update(status="crash", kind=kind, rc=run.get("rc"),
                   reason=reason or (f"panicked at {m.group(1).strip()} {m.group(2).strip()}"
                                     if m else _stderr_tail(stderr, 1) or "(no stderr)"),
                   stderr_tail=_stderr_tail(stderr), command=" ".join(run["cmd"]))
        return res

    def judge(run):
        """None when lumen ran and printed its report; else the case's result."""
        if run["timeout"]:
            res.update(status="fail", reason="timeout", detail=f"over {args.timeout} s",
                       command=" ".join(run["cmd"]))
            return res
        rc, stderr = run["rc"], run["stderr"]
        if "panicked at" in stderr:
            return crash("panic", run)
        if rc < 0:
            return crash(f"signal {-rc}", run)
        if rc == 2:
            return crash("usage error (exit 2)", run)
        if rc not in (0, 1):
            return crash(f"exit {rc}", run)
        if run["report"] is not None:
            return None
        if rc == 0:
            return crash("exit 0 without a report", run, "exit 0 but no JSON report")
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        if len(lines) != 1 or not lines[0].startswith("error: "):
            return crash("not a one-line error", run)
        msg = re.sub(r"^cannot load a model from \S+: ", "", lines[0][len("error: "):])
        file = re.match(r"in \S+/(in|expect)_\d+\.safetensors: ", msg)
        msg = msg[file.end():] if file else msg
        m = re.search(r"tensor `([^`]*)` has dtype (\w+), expected (\w+)", msg)
        if m and file and file.group(1) == "expect":
            # The reference's type is not the one lumen computes for that output.
            res.update(status="fail", reason="output type",
                       detail=f"output `{m.group(1)}`: ONNX's reference is {m.group(2)}, lumen "
                              f"computes {m.group(3)}", error=msg)
            return res
        if m and file:
            res.update(status="skip", reason=dtype_group(m.group(2)), error=msg)
            return res
        status, reason = lumen_error_category(msg, case["ops"])
        res.update(status=status, reason=reason, error=msg)
        return res

    first = run_lumen_once(args.lumen, model_path, in_path, refs, out_path, args.timeout)
    res["seconds"] = first.get("seconds")
    done = judge(first)
    if done is not None:
        return done
    rep = first["report"]
    if unreadable:
        res.update(status="fail", reason="output type",
                   detail="lumen computed outputs whose ONNX type it does not compute: "
                          + ", ".join(f"{n} ({t})" for n, t in unreadable))
        return res
    got = {o["name"]: o for o in (rep.get("config") or {}).get("outputs") or []}
    verdicts, ambiguous, tols, errs = {}, [], {}, {}
    for vi, v in zip(model.graph.output, outputs):
        name, ref = vi.name, refs[vi.name]
        o = got.get(name)
        if o is None:
            verdicts[name] = ("fail", "output missing", "lumen returned no such output")
            continue
        if o.get("shape") is not None and list(o["shape"]) != list(ref.shape):
            verdicts[name] = ("fail", "wrong shape",
                              f"{name}: shape {o['shape']} vs ONNX's {list(ref.shape)}")
            continue
        err = o.get("max_abs_err")
        integer = v.dtype.kind in "iub"
        r64 = ref.astype(np.float64)
        nan_ref = int(np.isnan(r64).sum()) if not integer else 0
        if err is None or not np.isfinite(float(err)):
            # JSON null: NaN or infinite. lumen's max is NaN as soon as either side is NaN.
            counts = (f"lumen's outputs hold {rep.get('nan_outputs')} NaN and "
                      f"{rep.get('inf_outputs')} infinities the reference lacks")
            if nan_ref:
                verdicts[name] = ("unverified", "NaN in the reference",
                                  f"{name}: the reference holds {nan_ref} NaN, so the CLI's max "
                                  f"|err| is NaN; {counts}")
            else:
                verdicts[name] = ("fail", "non-finite output",
                                  f"{name}: max |err| is not finite; {counts}")
            continue
        err = float(err)
        if integer:
            verdicts[name] = ("pass", None, None) if err == 0 else (
                "fail", "wrong numbers", f"{name}: integer output off by up to {err:g}")
            continue
        finite = np.isfinite(r64)
        t = atol + rtol * np.abs(np.where(finite, r64, 0.0))
        tmin = float(t[finite].min()) if finite.any() else np.inf
        tmax = float(t[finite].max()) if finite.any() else np.inf
        if err <= tmin:
            verdicts[name] = ("pass", None, None)
        elif err > tmax:
            verdicts[name] = ("fail", "wrong numbers",
                              f"{name}: max |err| {err:.3e} > atol + rtol*max|ref| = {tmax:.3e}")
        else:
            ambiguous.append(name)
            tols[name] = np.where(finite, t, np.inf)
            errs[name] = err
    if ambiguous:
        for sign, side in ((+1, "above"), (-1, "below")):
            expect, bounds = dict(refs), {}
            for n in ambiguous:
                expect[n], k, kmax = _shifted_expect(refs[n], tols[n], errs[n], sign)
                bounds[n] = (k, kmax)
            run = run_lumen_once(args.lumen, model_path, in_path, expect, out_path,
                                 args.timeout)
            done = judge(run)
            if done is not None:
                done["reason"] = f"{done.get('reason')} (in a shifted re-run)"
                return done
            g = {o["name"]: o for o in (run["report"].get("config") or {}).get("outputs") or []}
            for n in ambiguous:
                q = g.get(n, {}).get("max_abs_err")
                k, kmax = bounds[n]
                if q is None:
                    v = ("unverified", "shifted check not finite",
                         f"{n}: lumen's max |err| in a shifted re-run is not finite")
                elif q <= k:
                    v = ("pass", None, None)
                elif q > kmax:
                    v = ("fail", "wrong numbers",
                         f"{n}: lumen is {side} the reference by more than atol + rtol*|ref| "
                         f"at some element (max |err| {errs[n]:.3e})")
                else:
                    v = ("pass", "borderline",
                         f"{n}: an error within one f32 ulp of its bound")
                prev = verdicts.get(n)
                rank = {"pass": 0, "unverified": 1, "fail": 2}
                if prev is None or rank[v[0]] > rank[prev[0]] or (
                        prev[0] == v[0] == "pass" and v[1]):
                    verdicts[n] = v
    order = {"pass": 0, "unverified": 1, "fail": 2}
    worst = max(verdicts.values(), key=lambda v: order[v[0]])
    res["status"] = worst[0]
    details = [v[2] for v in verdicts.values() if v[0] == worst[0] and v[2]]
    if worst[0] != "pass":
        res["reason"] = worst[1]
        res["detail"] = "; ".join(details)
    elif any(v[1] == "borderline" for v in verdicts.values()):
        res["borderline"] = True
    if ambiguous:
        res["shifted_check"] = True
    return res


def lumen_task(case: dict, args) -> dict:
    import onnx

    workdir = tempfile.mkdtemp(prefix=case["name"] + ".", dir=args.tmp_root)
    try:
        model = onnx.load(os.path.join(case["dir"], "model.onnx"))
        results = []
        for i, (ins, outs) in enumerate(load_data_sets(case["dir"], model)):
            results.append(lumen_data_set(case, i, ins, outs, model, args, workdir))
        if args.keep and any(r["status"] != "pass" for r in results):
            dest = os.path.join(args.keep, case["name"])
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(case["dir"], dest)
            for f in os.listdir(workdir):
                shutil.copy(os.path.join(workdir, f), dest)
        return combine(results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def combine(results: list) -> dict:
    """A case's result: its worst data set's (crash > fail > unverified > skip > pass)."""
    order = {"pass": 0, "skip": 1, "unverified": 2, "fail": 3, "crash": 4}
    if not results:
        return {"status": "fail", "reason": "no test data set"}
    worst = dict(max(results, key=lambda r: order[r["status"]]))
    if len(results) > 1:
        worst["data_sets"] = results
    return worst


# --------------------------------------------------------------------------------------------
# ONNX Runtime


def ort_error_category(e: BaseException, ops: list) -> tuple:
    """(status, reason, message) for an exception of ONNX Runtime's backend."""
    msg = " ".join(str(e).split()) or type(e).__name__
    name = type(e).__name__
    if name == "SkipTest":
        return "skip", "opset not released (the backend skips it)", msg
    if any(op.startswith("ai.onnx.preview.training.") for op in ops):
        return "skip", "training-only", msg
    if "NOT_IMPLEMENTED" in msg or "is not a registered function/op" in msg:
        return "skip", "operator not implemented (for these types)", msg
    if "can't be converted to MLDataType" in msg or "No corresponding Numpy type" in msg:
        return "skip", "data type: float8/float4/int4/int2/bfloat16 (not through the Python API)", msg
    if name == "ValidationError":
        return "skip", "model refused by onnx.checker", msg
    return "fail", f"rejected: {name} on a valid model", msg


def ort_task(case: dict, args) -> dict:
    import numpy as np
    import onnx
    import onnxruntime.backend as backend
    from onnx.backend.test.runner import Runner

    model = onnx.load(os.path.join(case["dir"], "model.onnx"))
    rtol, atol = tolerance_of(case["dir"])
    results = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = backend.prepare(model, "CPU", intra_op_num_threads=1, inter_op_num_threads=1,
                                  log_severity_level=4)
    except BaseException as e:  # noqa: BLE001
        status, reason, msg = ort_error_category(e, case["ops"])
        return {"status": status, "reason": reason, "error": msg, "stage": "prepare"}
    for i, (ins, outs) in enumerate(load_data_sets(case["dir"], model)):
        try:
            with np.errstate(all="ignore"):
                got = list(rep.run(ins))
        except BaseException as e:  # noqa: BLE001
            status, reason, msg = ort_error_category(e, case["ops"])
            results.append({"data_set": i, "status": status, "reason": reason, "error": msg,
                            "stage": "run"})
            continue
        try:
            Runner.assert_similar_outputs(outs, got, rtol=rtol, atol=atol)
            results.append({"data_set": i, "status": "pass"})
        except AssertionError as e:
            text = str(e)
            reason = ("wrong shape" if "incorrect shape" in text else
                      "output type" if "Items are not equal" in text and "dtype" in text else
                      "wrong numbers" if "tolerance" in text or "Mismatched" in text else
                      "mismatch")
            results.append({"data_set": i, "status": "fail", "reason": reason,
                            "detail": " ".join(text.split())[:300]})
        except Exception as e:  # noqa: BLE001
            results.append({"data_set": i, "status": "fail", "reason": "mismatch",
                            "detail": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"})
    return combine(results)


# --------------------------------------------------------------------------------------------
# The pool: one forked process per (case, engine), --jobs at a time, killed at its deadline


def _child(conn, fn, fargs):
    try:
        result = fn(*fargs)
    except BaseException as e:  # noqa: BLE001
        result = {"status": "crash", "kind": "harness",
                  "reason": f"harness: {type(e).__name__}: {e}",
                  "stderr_tail": _stderr_tail(traceback.format_exc())}
    try:
        conn.send(result)
    finally:
        conn.close()


def run_pool(tasks: list, jobs: int, progress) -> dict:
    """tasks: [(key, fn, args, deadline_s)] -> {key: result}."""
    ctx = multiprocessing.get_context("fork")
    pending = collections.deque(tasks)
    running = {}
    results = {}
    while pending or running:
        while pending and len(running) < jobs:
            key, fn, fargs, limit = pending.popleft()
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(send, fn, fargs), daemon=True)
            p.start()
            send.close()
            running[recv] = (p, key, time.monotonic() + limit, limit)
        ready = multiprocessing.connection.wait(list(running), timeout=0.5)
        now = time.monotonic()
        for conn in list(running):
            p, key, deadline, limit = running[conn]
            result = None
            if conn in ready:
                try:
                    result = conn.recv()
                except (EOFError, OSError):
                    p.join(5)
                    code = p.exitcode
                    result = {"status": "crash", "kind": f"process died ({code})",
                              "reason": f"the process running the case died: exit code {code}"
                                        + (f" (signal {-code})" if code and code < 0 else "")}
            elif now > deadline:
                p.kill()
                result = {"status": "fail", "reason": "timeout", "detail": f"over {limit:.0f} s"}
            if result is None:
                continue
            p.join(5)
            conn.close()
            del running[conn]
            results[key] = result
            progress(key, result)
    return results


# --------------------------------------------------------------------------------------------
# Report


def build_report(args, source, cases, results, lumen_ops, elapsed) -> dict:
    import onnx

    engines = [e for e in ENGINES if e in args.engines]
    for c in cases:
        for e in engines:
            c[e] = results.get((c["name"], e), {"status": "fail", "reason": "not run"})

    def totals(subset, e):
        cnt = collections.Counter(c[e]["status"] for c in subset)
        skips = collections.Counter(c[e]["reason"] for c in subset if c[e]["status"] == "skip")
        fails = collections.Counter(c[e]["reason"] for c in subset if c[e]["status"] == "fail")
        n = len(subset)
        tried = n - cnt["skip"]
        return {"cases": n, "pass": cnt["pass"], "fail": cnt["fail"], "skip": cnt["skip"],
                "crash": cnt["crash"], "unverified": cnt["unverified"], "tried": tried,
                "pass_rate": round(cnt["pass"] / n, 4) if n else None,
                "pass_rate_of_tried": round(cnt["pass"] / tried, 4) if tried else None,
                "skip_reasons": dict(skips.most_common()),
                "fail_reasons": dict(fails.most_common())}

    fp = [c for c in cases if c["fp32_int"]]
    summary = {e: {"all": totals(cases, e), "fp32_int": totals(fp, e)} for e in engines}
    per_op = collections.OrderedDict()
    for c in sorted(cases, key=lambda c: (c["op"].lower(), c["name"])):
        row = per_op.setdefault(c["op"], {"cases": 0, "fp32_int": 0,
                                          "in_lumen_table": c["op"] in lumen_ops,
                                          **{e: collections.Counter() for e in engines}})
        row["cases"] += 1
        row["fp32_int"] += int(c["fp32_int"])
        for e in engines:
            row[e][c[e]["status"]] += 1
            if c["fp32_int"]:
                row[e]["fp32_int_pass"] += int(c[e]["status"] == "pass")
    for row in per_op.values():
        for e in engines:
            row[e] = dict(row[e])
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "command": " ".join(["python3", "scripts/onnx_conformance.py"] + sys.argv[1:]),
        "onnx": onnx.__version__,
        "onnxruntime": ort_version() if "ort" in engines else None,
        "lumen": args.lumen if "lumen" in engines else None,
        "lumen_version": lumen_version(args.lumen) if "lumen" in engines else None,
        "repo_head": git_commit(),
        "source": source,
        "check": "onnx's assert_similar_outputs: shapes equal, |got - ref| <= atol + rtol*|ref| "
                 "elementwise (the case's rtol/atol: 1e-3/1e-7), NaN == NaN, integers exact; "
                 "lumen's booleans are f32 0/1 and compared exactly",
        "jobs": args.jobs,
        "timeout_s": args.timeout,
        "seconds": round(elapsed, 1),
        "filter": args.filter,
        "only": args.only,
        "limit": args.limit,
        "engines": engines,
        "summary": summary,
        "per_op": per_op,
        "crashes": [{"case": c["name"], "op": c["op"], "engine": e, **c[e]}
                    for c in cases for e in engines if c[e]["status"] == "crash"],
        "cases": [{k: c[k] for k in ("name", "op", "ops", "expanded", "io_types", "fp32_int",
                                     *engines)} for c in cases],
    }


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def ort_version() -> str | None:
    try:
        import onnxruntime

        return onnxruntime.__version__
    except ImportError:
        return None


def lumen_version(lumen: str) -> str:
    """`lumen --version` and the binary's modification time (the repository's HEAD may have
    moved on since it was built)."""
    try:
        v = subprocess.run([lumen, "--version"], capture_output=True, text=True,
                           timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        v = "?"
    built = datetime.datetime.fromtimestamp(os.path.getmtime(lumen)).astimezone()
    return f"{v} (binary {lumen}, built {built.isoformat(timespec='seconds')})"


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_text(rep: dict, out=sys.stdout) -> None:
    w = out.write
    engines = rep["engines"]
    names = {"lumen": "lumen", "ort": f"ONNX Runtime {rep['onnxruntime']}"}
    w(f"ONNX backend node suite, onnx {rep['onnx']}: {rep['summary'][engines[0]]['all']['cases']}"
      f" cases{' (filtered)' if rep['filter'] or rep['only'] or rep['limit'] else ''}\n")
    w(f"source: {rep['source']}\n")
    w(f"check: {rep['check']}\n")
    w(f"{rep['date']}; {rep['machine']}; repository at {rep['repo_head']}; {rep['jobs']} jobs, "
      f"timeout {rep['timeout_s']:g} s; {rep['seconds']} s\n")
    if rep["lumen_version"]:
        w(f"lumen: {rep['lumen_version']}\n")
    w("\n")

    crashes = rep["crashes"]
    if crashes:
        w(f"!!! {len(crashes)} CRASHES (panics, signals, odd exit codes, errors that are not one "
          f"line): bugs !!!\n")
        for cr in crashes:
            w(f"  [{cr['engine']}] {cr['case']} ({cr['op']}) [{cr.get('kind')}, rc="
              f"{cr.get('rc')}]: {cr.get('reason')}\n")
            for line in (cr.get("stderr_tail") or "").splitlines():
                w(f"      | {line}\n")
            if cr.get("command"):
                w(f"      $ {cr['command']}\n      (--keep DIR keeps these files)\n")
        w("\n")

    w(f"{'':<34}{'cases':>6}{'pass':>7}{'tried':>7}{'skip':>7}{'fail':>6}{'crash':>6}"
      f"{'unver':>6}{'pass/all':>10}{'pass/tried':>11}\n")
    for subset, label in (("all", "all cases"), ("fp32_int", "fp32/int cases")):
        for e in engines:
            t = rep["summary"][e][subset]
            w(f"{names[e] + ', ' + label:<34}{t['cases']:>6}{t['pass']:>7}{t['tried']:>7}"
              f"{t['skip']:>7}{t['fail']:>6}{t['crash']:>6}{t['unverified']:>6}"
              f"{pct(t['pass_rate']):>10}{pct(t['pass_rate_of_tried']):>11}\n")
    w("\n")
    for e in engines:
        t = rep["summary"][e]["all"]
        w(f"{names[e]}: skipped by reason (all cases)\n")
        for r, n in t["skip_reasons"].items():
            w(f"  {n:>5}  {r}\n")
        w(f"{names[e]}: failures by reason (all cases)\n")
        for r, n in t["fail_reasons"].items():
            w(f"  {n:>5}  {r}\n")
        w("\n")

    # Per operator.
    head = f"{'operator':<36}{'cases':>6}{'f/i':>5}"
    for e in engines:
        head += f"  {e + ' pass/fail/skip/crash':>26}"
    w(head + "\n")
    for op, row in rep["per_op"].items():
        line = f"{op + (' *' if row['in_lumen_table'] else ''):<36}{row['cases']:>6}" \
               f"{row['fp32_int']:>5}"
        for e in engines:
            r = row[e]
            cell = f"{r.get('pass', 0)}/{r.get('fail', 0) + r.get('unverified', 0)}/" \
                   f"{r.get('skip', 0)}/{r.get('crash', 0)}"
            line += f"  {cell:>26}"
        w(line + "\n")
    w("(* in lumen's operator table; f/i: fp32/int cases; fail includes unverified)\n\n")

    if "lumen" in engines:
        by_op = collections.Counter()
        for c in rep["cases"]:
            if c["lumen"]["status"] in ("fail", "crash", "unverified"):
                by_op[c["op"]] += 1
        w("lumen: operators by failing cases (fail + crash + unverified)\n")
        for op, n in by_op.most_common(25):
            w(f"  {n:>4}  {op}\n")
        by_op = collections.Counter()
        for c in rep["cases"]:
            if c["fp32_int"] and c["lumen"]["status"] != "pass":
                by_op[c["op"]] += 1
        w("\nlumen: operators by fp32/int cases not passed (skips included)\n")
        for op, n in by_op.most_common(25):
            w(f"  {n:>4}  {op}\n")
        w("\nlumen: every failing case\n")
        for c in rep["cases"]:
            r = c["lumen"]
            if r["status"] in ("fail", "unverified"):
                extra = r.get("detail") or r.get("error") or ""
                ort = f" [ORT: {c['ort']['status']}]" if "ort" in c else ""
                w(f"  {c['name']} ({c['op']}): {r['status']}: {r.get('reason')}"
                  f"{': ' + extra if extra else ''}{ort}\n")
        w("\n")
    if "ort" in engines:
        w("ONNX Runtime: every failing case\n")
        for c in rep["cases"]:
            r = c["ort"]
            if r["status"] in ("fail",):
                extra = r.get("detail") or r.get("error") or ""
                w(f"  {c['name']} ({c['op']}): {r.get('reason')}: {extra[:200]}\n")
        w("\n")
    if "lumen" in engines:
        w("lumen: skipped cases, by reason\n")
        groups = collections.defaultdict(list)
        for c in rep["cases"]:
            if c["lumen"]["status"] == "skip":
                groups[c["lumen"]["reason"]].append(c["name"])
        for reason, names_ in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            w(f"  [{reason}] {len(names_)}: {' '.join(names_)}\n")


# --------------------------------------------------------------------------------------------
# Main


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Run every ONNX backend node test through lumen and ONNX Runtime and "
        "report conformance side by side.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lumen", default=os.path.join(REPO_ROOT, "target", "release", "lumen"),
                    help="the lumen binary (default: target/release/lumen of this repository)")
    ap.add_argument("--lumen-src", default=REPO_ROOT, metavar="DIR",
                    help="the lumen sources whose operator table (crates/onnx/src/ops/*.rs) the "
                    "per-operator table marks (default: this repository)")
    ap.add_argument("--only", action="append", default=[], metavar="OP",
                    help="only the cases of operator OP (repeatable)")
    ap.add_argument("--filter", action="append", default=[], metavar="SUBSTRING",
                    help="only cases whose name contains SUBSTRING (repeatable: any of them)")
    ap.add_argument("--limit", type=int, help="only the first N cases (by name)")
    ap.add_argument("--no-ort", action="store_true", help="lumen only")
    ap.add_argument("--no-lumen", action="store_true", help="ONNX Runtime only")
    ap.add_argument("--json", nargs="?", const="-", metavar="PATH",
                    help="write the report as JSON to PATH (stdout when no PATH is given)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds per case and engine; past it the case fails with reason "
                    "timeout (default 60)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                    help="processes at a time (default: the cores)")
    ap.add_argument("--cache", default=None,
                    help="where the node cases are written when the onnx package ships none "
                    "(default /tmp/lumen-onnx-node-<onnx version>)")
    ap.add_argument("--node-dir", metavar="DIR",
                    help="run the case directories under DIR (each with model.onnx and "
                    "test_data_set_N/) instead of onnx's node suite")
    ap.add_argument("--keep", metavar="DIR",
                    help="copy each case lumen does not pass, with its safetensors files, to DIR")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args()
    args.engines = [e for e in ENGINES if not getattr(args, f"no_{e}")]
    if not args.engines:
        ap.error("--no-ort and --no-lumen leave nothing to run")

    try:
        import numpy  # noqa: F401
        import onnx
        import safetensors  # noqa: F401
    except ImportError as e:
        print(f"onnx_conformance: {e} (pip install onnx==1.23.2 numpy safetensors)",
              file=sys.stderr)
        return 2
    if "ort" in args.engines:
        try:
            import onnxruntime.backend  # noqa: F401  (imported once, before forking)
            from onnx.backend.test.runner import Runner  # noqa: F401
        except ImportError as e:
            print(f"onnx_conformance: {e} (pip install onnxruntime, or --no-ort)",
                  file=sys.stderr)
            return 2
    if "lumen" in args.engines:
        args.lumen = os.path.abspath(args.lumen)
        if not (os.path.isfile(args.lumen) and os.access(args.lumen, os.X_OK)):
            print(f"onnx_conformance: no lumen binary at {args.lumen} (cargo build --release, "
                  "or --lumen PATH)", file=sys.stderr)
            return 2
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    args.cache = args.cache or os.path.join(tempfile.gettempdir(),
                                            f"lumen-onnx-node-{onnx.__version__}")

    t_start = time.monotonic()
    if args.node_dir:
        root, source = os.path.abspath(args.node_dir), f"the case directories under {args.node_dir}"
    else:
        root, source = node_root(args.cache)
    lumen_ops = set(lumen_operators(args.lumen_src))
    cases = describe_cases(root, args.only, args.filter, args.limit)
    tasks = []
    for c in cases:
        if "lumen" in args.engines:
            # Up to three lumen runs per data set (the shifted check), each under --timeout.
            n_sets = max(1, len([x for x in os.listdir(c["dir"])
                                 if x.startswith("test_data_set_")]))
            tasks.append(((c["name"], "lumen"), lumen_task, (c, args),
                          args.timeout * 3 * n_sets + 30))
        if "ort" in args.engines:
            tasks.append(((c["name"], "ort"), ort_task, (c, args), args.timeout))
    done, counts = [0], {e: collections.Counter() for e in ENGINES}
    tty = sys.stderr.isatty()

    def progress(key, result):
        done[0] += 1
        counts[key[1]][result["status"]] += 1
        if args.quiet:
            return
        if tty or done[0] % 50 == 0 or done[0] == len(tasks) or result["status"] == "crash":
            parts = " | ".join(f"{e} " + " ".join(f"{s} {counts[e][s]}" for s in STATUSES
                                                  if counts[e][s]) for e in args.engines)
            line = f"[{done[0]}/{len(tasks)}] {parts}"
            if result["status"] == "crash":
                line += f"  CRASH {key[1]} {key[0]}"
            sys.stderr.write(("\r\x1b[K" + line[:200]) if tty and result["status"] != "crash"
                             else line + "\n")
            sys.stderr.flush()

    with tempfile.TemporaryDirectory(prefix="lumen-onnx-conformance-") as tmp_root:
        args.tmp_root = tmp_root
        results = run_pool(tasks, max(1, args.jobs), progress)
    if tty and not args.quiet:
        sys.stderr.write("\n")
    report = build_report(args, source, cases, results, lumen_ops, time.monotonic() - t_start)
    if args.json:
        text = json.dumps(report, indent=1, default=str)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if args.json != "-":
        print_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
