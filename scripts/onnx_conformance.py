#!/usr/bin/env python3
"""ONNX backend node-test conformance runner for lumen's ONNX importer.

What it does
------------
ONNX ships a suite of per-operator "node tests" (``onnx.backend.test``): each case is a small
model (usually one node) with input and reference output tensors. Backends prove themselves by
running them. This script:

1. Collects the node test cases from the installed ``onnx`` package: the shipped data
   directories ``onnx/backend/test/data/node/*/`` (``model.onnx``, ``test_data_set_N/input_*.pb``,
   ``output_*.pb``) when the package has them, otherwise the same cases generated in memory by
   ``onnx.backend.test.case.node.collect_testcases()`` (pip wheels of onnx 1.23 ship no node
   data directories).
2. Selects the cases lumen can be asked to run: every node of the model is one of the operators
   lumen imports (``SUPPORTED`` below, default ``ai.onnx`` domain). Function-expansion cases
   (``*_expanded``, ``*_expanded_verNN``) are INCLUDED when all of their nodes are supported: they
   are attributed to the operator they expand (e.g. ``test_softmax_axis_0_expanded`` counts for
   Softmax, ``test_reduce_log_sum_exp_*_expanded`` for ReduceLogSumExp, run through
   ReduceSum/Exp/Log). Cases whose main operator is supported but that contain other operators
   (expansions using Size/Neg, Less, CastLike) are listed separately as "mixed" and not run
   unless ``--include-mixed``. ``--extra-ops Abs,Neg,...`` widens the supported set (the
   importer also matches Abs, Neg, Less, Greater, Not, Range, Dropout, LogSoftmax).
   Of the selected cases, only those whose inputs are all float32/int64/int32 tensors and whose
   outputs are all float32 are run (lumen's --expect file holds f32 only); the others are
   "dtype" skips, counted and listed.
3. For every case and test data set, writes the inputs to a safetensors file keyed by the
   graph input names (input_N matches the N-th graph input that is not an initializer), the
   reference outputs to another keyed by graph output names, and runs::

       lumen run model.onnx --inputs in.safetensors --expect out.safetensors \\
             --no-search --runs 1 --json --tolerance TOL

   with a timeout, then classifies the run:

   * ``pass``      every output's error is within the tolerance rule below;
   * ``mismatch``  lumen ran, but an output is over the rule, has the wrong shape, holds NaN,
                   or the reference holds NaN/inf (lumen's max abs error is then NaN and the
                   comparison cannot be confirmed: reported as "non-finite reference");
   * ``error``     lumen exited 1 without running (its one ``error: ...`` line is recorded:
                   unsupported operator/attribute, opset, dtype, symbolic dims, ...);
   * ``crash``     anything else: a panic, a signal, a timeout, exit code 2 (usage) or another
                   exit code. These are bugs and are reported prominently.

Tolerance rule
--------------
lumen reports, per graph output, ``max_abs_err = max |lumen - reference|``. An output passes
when ``max_abs_err <= TOL * max(1, max |reference|)`` (max over the output's finite reference
values; TOL = ``--tol``, default 1e-4): an absolute 1e-4 for values of magnitude up to 1, and a
relative 1e-4 of the output's largest magnitude above that. A case passes when every output of
every data set passes. (The test cases' own ``rtol``/``atol`` are recorded in the JSON report but
not used.)

How to run
----------
::

    pip install onnx==1.23.2 onnxruntime numpy safetensors
    cargo build --release
    python3 scripts/onnx_conformance.py                 # text report
    python3 scripts/onnx_conformance.py --filter gemm   # cases whose name contains "gemm"
    python3 scripts/onnx_conformance.py --json report.json   # (or --json for stdout)
    python3 scripts/onnx_conformance.py --lumen path/to/lumen --timeout 60 -j 8
    python3 scripts/onnx_conformance.py --keep /tmp/failures  # keep failing cases' files

Diagnostics (NOT conformance; each run says so in its report): ``--clamp-opset 21`` rewrites
models declaring a later ai.onnx opset to declare 21 (the newest lumen imports; the node tests
of Reshape, Flatten, Transpose, Squeeze, ... declare 25-28, whose versions past 21 only add
element types for these ops);
``--freeze-int-inputs`` makes int64/int32 graph inputs (axes, shapes, starts, indices)
initializers holding the test data, as a compiler of static shapes needs;
``--freeze-scalar-inputs`` does the same for 0-d inputs. Together they show how the operators
themselves compute once those gates are passed::

    python3 scripts/onnx_conformance.py --clamp-opset 21 --freeze-int-inputs --freeze-scalar-inputs

Progress goes to stderr as a counter line. The script exits 0 whenever it produced a report
(failing cases are the report's content), 2 when it cannot run (no lumen binary, onnx missing).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field

# The operators lumen's importer (crates/onnx) handles.
SUPPORTED = [
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Exp", "Log",
    "Tanh", "Erf", "Relu", "Sigmoid", "Softmax", "LayerNormalization", "ReduceMean", "ReduceSum",
    "ReduceMax", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Slice",
    "Expand", "Gather", "Where", "Equal", "Clip", "Min", "Max", "Cast", "Constant",
    "ConstantOfShape", "Shape", "Identity",
    # Imported beyond the list above (issue 15's list is the first block).
    "LogSoftmax", "Neg", "Abs", "Less", "Greater", "Not", "Dropout", "Range", "LeakyRelu", "Gelu",
    "BatchNormalization", "Split", "ReduceMin", "ReduceL1", "ReduceL2", "ReduceSumSquare",
    "ReduceLogSumExp", "Size", "Mod", "ReduceProd", "Trilu",
]
SUPPORTED_SET = frozenset(SUPPORTED)
DEFAULT_DOMAINS = ("", "ai.onnx")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPANDED_RE = re.compile(r"_expanded(_ver\d+)?$")

# Status order, worst last: a case's status is the worst over its data sets.
STATUS_ORDER = {"pass": 0, "mismatch": 1, "error": 2, "crash": 3}


@dataclass
class Case:
    name: str
    model_path: str | None  # a model.onnx on disk (shipped data), or None (in memory)
    model: object  # onnx.ModelProto
    data_sets: list  # [(inputs: list, outputs: list)] of numpy arrays (or non-tensors)
    rtol: float | None = None
    atol: float | None = None
    main_op: str = "?"
    ops: list = field(default_factory=list)  # distinct op types, in first-use order
    extra_ops: list = field(default_factory=list)  # the unsupported ones
    expanded: bool = False
    skip: str | None = None  # why the case is not run (dtype, non-tensor, ...)
    results: list = field(default_factory=list)  # one dict per data set
    status: str | None = None


# --------------------------------------------------------------------------------------------
# Collecting the cases


def _op_key(node) -> str:
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def _graph_ops(graph) -> list:
    """Distinct op types of a graph and its subgraphs (If/Loop bodies), in first-use order."""
    import onnx

    seen = []
    for node in graph.node:
        key = _op_key(node)
        if key not in seen:
            seen.append(key)
        for attr in node.attribute:
            subs = []
            if attr.type == onnx.AttributeProto.GRAPH:
                subs = [attr.g]
            elif attr.type == onnx.AttributeProto.GRAPHS:
                subs = list(attr.graphs)
            for sub in subs:
                for key in _graph_ops(sub):
                    if key not in seen:
                        seen.append(key)
    return seen


def _load_pb(path: str, type_proto):
    """One input_N.pb/output_N.pb: a numpy array for a tensor, else a marker string."""
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        data = f.read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind != "tensor_type":
        return f"<{kind}>"
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def _graph_inputs(model) -> list:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def load_shipped_cases(root: str) -> list:
    import onnx

    cases = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        model_path = os.path.join(d, "model.onnx")
        if not os.path.isfile(model_path):
            continue
        model = onnx.load(model_path)
        ins, outs = _graph_inputs(model), list(model.graph.output)
        sets = []
        for ds in sorted(x for x in os.listdir(d) if x.startswith("test_data_set_")):
            dsd = os.path.join(d, ds)

            def numbered(prefix, dsd=dsd):
                files = [x for x in os.listdir(dsd) if x.startswith(prefix) and x.endswith(".pb")]
                return sorted(files, key=lambda x: int(x[len(prefix):-3]))

            inputs = [
                _load_pb(os.path.join(dsd, f), ins[i].type if i < len(ins) else None)
                for i, f in enumerate(numbered("input_"))
            ]
            outputs = [
                _load_pb(os.path.join(dsd, f), outs[i].type if i < len(outs) else None)
                for i, f in enumerate(numbered("output_"))
            ]
            sets.append((inputs, outputs))
        cases.append(Case(name=name, model_path=model_path, model=model, data_sets=sets))
    return cases


def _as_array(value):
    """A generated test value as a numpy array: numpy scalars (np.float32(2.0)) become 0-d
    arrays, TensorProtos are decoded; sequences (lists), optionals (None) and maps stay as
    they are (non-tensor values, skipped)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return value


def load_generated_cases() -> list:
    # The generators print numpy warnings (log(0), casts); keep them off the report.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        import numpy as np
        from onnx.backend.test.case import node as node_cases

        with np.errstate(all="ignore"):
            raw = node_cases.collect_testcases()
    cases = []
    for c in raw:
        if c.model is None:
            continue
        sets = [([_as_array(a) for a in ins], [_as_array(a) for a in outs])
                for ins, outs in (c.data_sets or [])]
        cases.append(
            Case(name=c.name, model_path=None, model=c.model, data_sets=sets, rtol=c.rtol,
                 atol=c.atol)
        )
    return cases


def load_cases() -> tuple:
    import onnx

    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if os.path.isdir(root) and any(
        os.path.isfile(os.path.join(root, x, "model.onnx")) for x in os.listdir(root)
    ):
        return load_shipped_cases(root), f"shipped data directories ({root})"
    return load_generated_cases(), "onnx.backend.test.case.node.collect_testcases()"


def _snake(op: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op).lower()


def attribute_cases(cases: list) -> None:
    """Sets each case's ops, main op (the single op of the non-expanded case; by name for
    expansions without their base case) and unsupported ops."""
    import onnx

    by_name = {c.name: c for c in cases}
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
        c.ops = _graph_ops(c.model.graph)
        c.extra_ops = [op for op in c.ops if op not in SUPPORTED_SET]
        c.expanded = bool(EXPANDED_RE.search(c.name))
    for c in cases:
        if not c.expanded and len(c.ops) == 1:
            c.main_op = c.ops[0]
            continue
        base = by_name.get(EXPANDED_RE.sub("", c.name))
        if base is not None and len(base.ops) == 1:
            c.main_op = base.ops[0]
        else:
            c.main_op = by_prefix(c.name)


RUN_DTYPES_IN = ("float32", "int64", "int32")
RUN_DTYPES_OUT = ("float32",)


def dtype_skip(case: Case) -> str | None:
    """Why a selected case cannot be given to lumen (its tensors' dtypes), or None."""
    import numpy as np

    ins = _graph_inputs(case.model)
    outs = list(case.model.graph.output)
    if not case.data_sets:
        return "no test data set"
    problems = []
    for inputs, outputs in case.data_sets:
        if len(inputs) != len(ins):
            return f"{len(inputs)} input tensors for {len(ins)} graph inputs"
        if len(outputs) != len(outs):
            return f"{len(outputs)} output tensors for {len(outs)} graph outputs"
        for which, arrays, names, allowed in (
            ("input", inputs, ins, RUN_DTYPES_IN),
            ("output", outputs, outs, RUN_DTYPES_OUT),
        ):
            for a, vi in zip(arrays, names):
                if not isinstance(a, np.ndarray):
                    what = a if isinstance(a, str) else type(a).__name__
                    problems.append(f"{which} {vi.name} is {what}")
                elif a.dtype.name not in allowed:
                    if a.dtype == object:
                        problems.append(f"{which} {vi.name} is string")
                        continue
                    problems.append(f"{which} {vi.name} is {a.dtype.name}")
    if problems:
        return ", ".join(dict.fromkeys(problems))
    return None


# --------------------------------------------------------------------------------------------
# Running one case


def _finite_absmax(a) -> tuple:
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    m = float(np.abs(a[finite]).max()) if finite.any() else 0.0
    return m, bool((~finite).any())


def _stderr_tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _error_line(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("error:"):
            return line[len("error:"):].strip()
    tail = stderr.strip().splitlines()
    return tail[-1].strip() if tail else "(no stderr)"


def _c_array(a):
    """A C-contiguous copy that keeps a 0-d array 0-d (np.ascontiguousarray makes it [1])."""
    import numpy as np

    return np.array(a, order="C", copy=True)


def run_data_set(case: Case, index: int, lumen: str, workdir: str, args) -> dict:
    import numpy as np
    from safetensors.numpy import save_file

    inputs, outputs = case.data_sets[index]
    ins = _graph_inputs(case.model)
    outs = list(case.model.graph.output)
    os.makedirs(workdir, exist_ok=True)
    model_path = os.path.join(workdir, "model.onnx")
    model, notes = case.model, {}
    if args.clamp_opset:
        rewritten = clamp_opset(model, args.clamp_opset)
        if rewritten is not None:
            model, notes["opset_rewritten"] = rewritten
    if args.freeze_int_inputs or args.freeze_scalar_inputs:
        frozen = freeze_inputs(model, ins, inputs, args)
        if frozen is not None:
            model, notes["frozen_inputs"] = frozen
            kept = [i for i, vi in enumerate(ins) if vi.name not in notes["frozen_inputs"]]
            ins, inputs = [ins[i] for i in kept], [inputs[i] for i in kept]
    if model is case.model and case.model_path:
        shutil.copyfile(case.model_path, model_path)
    else:
        with open(model_path, "wb") as f:
            f.write(model.SerializeToString())
    in_path = os.path.join(workdir, f"inputs_{index}.safetensors")
    out_path = os.path.join(workdir, f"expect_{index}.safetensors")
    save_file({vi.name: _c_array(a) for vi, a in zip(ins, inputs)}, in_path)
    save_file({vi.name: _c_array(a) for vi, a in zip(outs, outputs)}, out_path)
    cmd = [
        lumen, "run", model_path, "--inputs", in_path, "--expect", out_path, "--no-search",
        "--runs", "1", "--json", "--tolerance", repr(args.tol),
    ]
    result = {"data_set": index, "command": " ".join(cmd)}
    result.update(notes)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        result.update(status="crash", kind="timeout", rc=None,
                      reason=f"timed out after {args.timeout} s", stderr_tail=_stderr_tail(err))
        return result
    result["seconds"] = round(time.monotonic() - t0, 3)
    rc, stderr = p.returncode, p.stderr
    result["rc"] = rc
    panicked = "panicked at" in stderr
    if rc not in (0, 1) or panicked:
        if panicked:
            kind = "panic"
        elif rc < 0:
            kind = f"signal {-rc}"
        elif rc == 2:
            kind = "usage error (exit 2)"
        else:
            kind = f"exit {rc}"
        m = re.search(r"panicked at ([^\n]*)\n([^\n]*)", stderr)
        reason = f"{m.group(1).strip()} {m.group(2).strip()}" if m else _error_line(stderr)
        result.update(status="crash", kind=kind, reason=reason, stderr_tail=_stderr_tail(stderr))
        return result
    report = None
    if p.stdout.strip():
        try:
            report = json.loads(p.stdout)
        except json.JSONDecodeError:
            report = None
    if report is None:
        if rc == 0:
            result.update(status="crash", kind="exit 0 without JSON",
                          reason="lumen exited 0 but printed no JSON report",
                          stderr_tail=_stderr_tail(stderr))
        else:
            result.update(status="error", reason=_error_line(stderr))
        return result
    # Ran: apply the tolerance rule to every output.
    got = {o["name"]: o for o in (report.get("config") or {}).get("outputs") or []}
    per_output, problems = [], []
    for vi, ref in zip(outs, outputs):
        ref_max, ref_nonfinite = _finite_absmax(ref)
        budget = args.tol * max(1.0, ref_max)
        o = got.get(vi.name)
        entry = {"name": vi.name, "budget": budget, "ref_absmax": ref_max}
        if o is None:
            problems.append(f"{vi.name}: lumen returned no such output")
            entry["verdict"] = "missing"
        elif o.get("shape") is not None and list(o["shape"]) != list(ref.shape):
            problems.append(f"{vi.name}: shape {o['shape']} vs expected {list(ref.shape)}")
            entry["verdict"] = "shape"
        elif o.get("max_abs_err") is None:
            detail = ((report.get("checks") or {}).get("max_abs_err") or {}).get("detail", "")
            if "cannot be compared" in detail:
                # lumen's own shape check against the reference it read from the expect file
                problems.append(f"{vi.name}: shape mismatch per lumen: {detail}")
                entry["verdict"] = "shape"
            elif ref_nonfinite:
                problems.append(
                    f"{vi.name}: non-finite reference (NaN/inf), error not comparable (reference: "
                    f"{int((~np.isfinite(np.asarray(ref, dtype=np.float64))).sum())} non-finite; "
                    f"lumen's outputs: {report.get('nan_outputs')} NaN, "
                    f"{report.get('inf_outputs')} inf)")
                entry["verdict"] = "nonfinite-reference"
            else:
                problems.append(f"{vi.name}: NaN in lumen's output")
                entry["verdict"] = "nan"
        else:
            err = float(o["max_abs_err"])
            entry["max_abs_err"] = err
            if err <= budget:
                entry["verdict"] = "pass"
            else:
                problems.append(f"{vi.name}: max abs err {err:.3e} > {budget:.1e}")
                entry["verdict"] = "over"
        per_output.append(entry)
    result["outputs"] = per_output
    if problems:
        result.update(status="mismatch", reason="; ".join(problems))
    else:
        result.update(status="pass")
    return result


def clamp_opset(model, limit: int):
    """With --clamp-opset N: a copy of `model` declaring ai.onnx opset N when it declares a
    later one, and a note {from, to, changed_ops} naming the ops whose schema has a version
    after N (their semantics may differ at N: usually only new types); None when the model's
    opset is already <= N."""
    import onnx

    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions or versions[0] <= limit:
        return None
    old = versions[0]
    changed = []
    for op in _graph_ops(model.graph):
        if "." in op:
            continue
        try:
            since = onnx.defs.get_schema(op, old).since_version
        except Exception:
            continue
        if since > limit and op not in changed:
            changed.append(f"{op}-{since}")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.opset_import:
        if o.domain in DEFAULT_DOMAINS:
            o.version = limit
    return m, {"from": old, "to": limit, "changed_ops": changed}


def freeze_inputs(model, ins, inputs, args):
    """With --freeze-int-inputs / --freeze-scalar-inputs: a copy of `model` in which the
    int64/int32 graph inputs (axes, shapes, starts, indices) and/or the 0-d ones are
    initializers holding this data set's values, and the names frozen; None when none is."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    names = []
    for vi, a in zip(ins, inputs):
        if not isinstance(a, np.ndarray):
            continue
        if (args.freeze_int_inputs and a.dtype.name in ("int64", "int32")) or (
            args.freeze_scalar_inputs and a.ndim == 0
        ):
            names.append(vi.name)
    if not names:
        return None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in names]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for vi, a in zip(ins, inputs):
        if vi.name in names:
            m.graph.initializer.append(numpy_helper.from_array(_c_array(a), vi.name))
    return m, names


def run_case(case: Case, lumen: str, tmp_root: str, args) -> None:
    workdir = os.path.join(tmp_root, case.name)
    for i in range(len(case.data_sets)):
        try:
            case.results.append(run_data_set(case, i, lumen, workdir, args))
        except Exception as e:  # a harness problem (e.g. a tensor safetensors refuses)
            case.results.append({"data_set": i, "status": "crash", "kind": "harness",
                                 "reason": f"harness: {type(e).__name__}: {e}"})
    case.status = max((r["status"] for r in case.results), key=STATUS_ORDER.__getitem__)
    if args.keep and case.status != "pass":
        dest = os.path.join(args.keep, case.name)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(workdir, dest)
    shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Grouping failures


def normalize_reason(reason: str) -> str:
    """The message with the file path, node names and tensor names taken out, for grouping."""
    r = re.sub(r"^cannot load a model from \S+: ", "", reason)
    r = re.sub(r" \(node `[^`]*`, opset \d+\)", "", r)
    r = re.sub(r"`[^`]*`", "`_`", r)
    return r


def category(result: dict) -> str:
    s = result["status"]
    reason = result.get("reason", "")
    if s == "crash":
        return f"CRASH: {result.get('kind', '?')}"
    if s == "mismatch":
        if "non-finite reference" in reason:
            return "mismatch: non-finite reference (unverifiable)"
        if "shape" in reason:
            return "mismatch: output shape"
        if "NaN in lumen" in reason:
            return "mismatch: NaN output"
        return "mismatch: over tolerance"
    r = normalize_reason(reason)
    rules = [
        (r"^opset \d+ is not supported", "opset not supported"),
        (r"^unsupported operator \S+: .*attribute", "unsupported attribute"),
        (r"^unsupported operator", "unsupported operator / form"),
        (r"element type|has dtype|dtype", "dtype"),
        (r"symbolic dimensions", "symbolic dims"),
        (r"is a constant the importer folded", "constant output"),
        (r"shape", "shape"),
        (r"^node `_` \(", "malformed node (importer rejects)"),
    ]
    for pattern, name in rules:
        if re.search(pattern, r):
            return f"error: {name}"
    return "error: other"


# --------------------------------------------------------------------------------------------
# Main


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Run the ONNX backend node tests of lumen's supported operators through "
        "`lumen run` and report conformance.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Tolerance rule: an output passes when max_abs_err <= TOL * max(1, max|ref|).",
    )
    ap.add_argument("--lumen", default=os.path.join(REPO_ROOT, "target", "release", "lumen"),
                    help="the lumen binary (default: target/release/lumen of this repository)")
    ap.add_argument("--filter", action="append", default=[], metavar="SUBSTRING",
                    help="only cases whose name contains SUBSTRING (repeatable: any of them)")
    ap.add_argument("--json", nargs="?", const="-", metavar="PATH",
                    help="write the report as JSON to PATH (or stdout when no PATH is given)")
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="TOL of the rule max_abs_err <= TOL * max(1, max|ref|) (default 1e-4)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds per lumen run (default 60)")
    ap.add_argument("-j", "--jobs", type=int, default=min(8, os.cpu_count() or 1),
                    help="lumen runs in parallel (default min(8, CPUs))")
    ap.add_argument("--extra-ops", default="", metavar="OP,OP",
                    help="operators to treat as supported besides SUPPORTED (e.g. "
                    "Abs,Neg,Less,Greater,Not,Range,Dropout,LogSoftmax, which the importer also "
                    "matches)")
    ap.add_argument("--include-mixed", action="store_true",
                    help="also run the cases of supported operators that contain other operators")
    ap.add_argument("--keep", metavar="DIR",
                    help="copy each failing case's model and safetensors files under DIR")
    ap.add_argument("--clamp-opset", type=int, metavar="N",
                    help="NOT conformance, a diagnostic: rewrite a model's ai.onnx opset to N "
                    "when it declares a later one (e.g. 21, the newest lumen imports), to see "
                    "how the operators fare past the opset check; ops whose schema changed "
                    "after N are noted")
    ap.add_argument("--freeze-int-inputs", action="store_true",
                    help="NOT conformance, a diagnostic: make int64/int32 graph inputs (axes, "
                    "shapes, starts/ends, indices) initializers holding the test's values, for "
                    "a compiler of static shapes")
    ap.add_argument("--freeze-scalar-inputs", action="store_true",
                    help="NOT conformance, a diagnostic: make 0-d graph inputs initializers")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args()

    if not (os.path.isfile(args.lumen) and os.access(args.lumen, os.X_OK)):
        print(f"onnx_conformance: no lumen binary at {args.lumen} (cargo build --release, or "
              "--lumen PATH)", file=sys.stderr)
        return 2
    try:
        import numpy  # noqa: F401
        import onnx
        import safetensors  # noqa: F401
    except ImportError as e:
        print(f"onnx_conformance: {e} (pip install onnx==1.23.2 numpy safetensors)",
              file=sys.stderr)
        return 2
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)

    global SUPPORTED, SUPPORTED_SET
    extra = [op.strip() for op in args.extra_ops.split(",") if op.strip()]
    SUPPORTED = SUPPORTED + [op for op in extra if op not in SUPPORTED_SET]
    SUPPORTED_SET = frozenset(SUPPORTED)

    t_start = time.monotonic()
    all_cases, source = load_cases()
    attribute_cases(all_cases)
    if args.filter:
        all_cases = [c for c in all_cases if any(f in c.name for f in args.filter)]

    selected, mixed = [], []
    for c in all_cases:
        if not c.extra_ops:
            selected.append(c)
        elif c.main_op in SUPPORTED_SET:
            mixed.append(c)
    to_consider = selected + (mixed if args.include_mixed else [])
    runnable, dtype_skipped = [], []
    for c in to_consider:
        c.skip = dtype_skip(c)
        (dtype_skipped if c.skip else runnable).append(c)

    # Run.
    lock = threading.Lock()
    done = [0]
    tty = sys.stderr.isatty()
    total = len(runnable)
    counts = collections.Counter()

    def progress(case: Case) -> None:
        with lock:
            done[0] += 1
            counts[case.status] += 1
            if args.quiet:
                return
            line = (f"[{done[0]:4d}/{total}] pass {counts['pass']} mismatch {counts['mismatch']} "
                    f"error {counts['error']} crash {counts['crash']}  {case.status:8s} "
                    f"{case.name}")
            if tty:
                sys.stderr.write("\r\x1b[K" + line[:160])
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()

    with tempfile.TemporaryDirectory(prefix="lumen-onnx-conformance-") as tmp_root:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = []
            for c in runnable:
                f = pool.submit(run_case, c, args.lumen, tmp_root, args)
                f.add_done_callback(lambda _f, c=c: progress(c))
                futures.append(f)
            for f in futures:
                f.result()
    if tty and not args.quiet and total:
        sys.stderr.write("\n")
    elapsed = time.monotonic() - t_start

    report = build_report(args, source, all_cases, selected, mixed, runnable, dtype_skipped,
                          elapsed)
    if args.json:
        text = json.dumps(report, indent=2, default=str)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if args.json != "-":
        print_text(report)
    return 0


def build_report(args, source, all_cases, selected, mixed, runnable, dtype_skipped, elapsed):
    per_op = collections.OrderedDict()
    ops_order = SUPPORTED + sorted({c.main_op for c in selected + mixed} - SUPPORTED_SET)
    for op in ops_order:
        per_op[op] = {"pass": 0, "run": 0, "mismatch": 0, "error": 0, "crash": 0,
                      "dtype_skip": 0, "mixed_not_run": 0}
    for c in runnable:
        row = per_op[c.main_op]
        row["run"] += 1
        row[c.status] += 1
    for c in dtype_skipped:
        per_op[c.main_op]["dtype_skip"] += 1
    if not args.include_mixed:
        for c in mixed:
            per_op[c.main_op]["mixed_not_run"] += 1
    per_op = {k: v for k, v in per_op.items() if any(v.values())}

    failures = collections.defaultdict(lambda: collections.defaultdict(list))
    crashes = []
    for c in runnable:
        for r in c.results:
            if r["status"] == "pass":
                continue
            label = c.name if len(c.data_sets) == 1 else f"{c.name}[{r['data_set']}]"
            note = r.get("opset_rewritten")
            if note:
                label += f" (opset {note['from']}->{note['to']}"
                label += f"; changed after {note['to']}: {', '.join(note['changed_ops'])})" \
                    if note["changed_ops"] else ")"
            if r.get("frozen_inputs"):
                label += f" (frozen: {', '.join(r['frozen_inputs'])})"
            cat = category(r)
            if r["status"] == "mismatch":
                # Mismatches: one line per case with its figures.
                failures[cat][cat].append(f"{label}: {r.get('reason', '')}")
            elif r["status"] == "crash":
                failures[cat][r.get("reason", "")].append(label)
                crashes.append({"case": c.name, "data_set": r["data_set"], "kind": r.get("kind"),
                                "rc": r.get("rc"), "reason": r.get("reason"),
                                "stderr_tail": r.get("stderr_tail", ""),
                                "command": r.get("command")})
            else:
                failures[cat][normalize_reason(r.get("reason", ""))].append(label)
    passed = sum(1 for c in runnable if c.status == "pass")
    return {
        "source": source,
        "lumen": args.lumen,
        "clamp_opset": args.clamp_opset,
        "freeze_int_inputs": args.freeze_int_inputs,
        "freeze_scalar_inputs": args.freeze_scalar_inputs,
        "tolerance_rule": f"max_abs_err <= {args.tol:g} * max(1, max|reference|) per output",
        "filter": args.filter,
        "expanded_cases": "included when every node is a supported operator",
        "cases_total": len(all_cases),
        "selected": len(selected),
        "mixed": len(mixed),
        "dtype_skipped": len(dtype_skipped),
        "run": len(runnable),
        "passed": passed,
        "seconds": round(elapsed, 1),
        "per_op": per_op,
        "failures": {cat: dict(msgs) for cat, msgs in sorted(failures.items())},
        "crashes": crashes,
        "dtype_skips": [{"case": c.name, "op": c.main_op, "why": c.skip} for c in dtype_skipped],
        "mixed_cases": [{"case": c.name, "op": c.main_op, "other_ops": c.extra_ops}
                        for c in mixed],
        "cases": [
            {"case": c.name, "op": c.main_op, "expanded": c.expanded, "ops": c.ops,
             "status": c.status, "rtol": c.rtol, "atol": c.atol, "results": c.results}
            for c in runnable
        ],
    }


def print_text(rep: dict) -> None:
    out = sys.stdout
    w = out.write
    w(f"ONNX backend node tests through lumen ({rep['source']})\n")
    w(f"tolerance: {rep['tolerance_rule']}; _expanded cases {rep['expanded_cases']}\n")
    frozen = [k for k in ("int", "scalar") if rep[f"freeze_{k}_inputs"]]
    if frozen:
        w(f"DIAGNOSTIC RUN, NOT CONFORMANCE: {' and '.join(frozen)} graph inputs were made "
          f"initializers holding the test data\n")
    if rep["clamp_opset"]:
        w(f"DIAGNOSTIC RUN, NOT CONFORMANCE: models declaring an opset after "
          f"{rep['clamp_opset']} were rewritten to declare {rep['clamp_opset']}\n")
    w(f"{rep['cases_total']} node cases{' matching the filter' if rep['filter'] else ''}; "
      f"{rep['selected']} use only supported operators, {rep['mixed']} more of supported "
      f"operators use others (mixed); {rep['dtype_skipped']} skipped for dtypes; "
      f"{rep['run']} run in {rep['seconds']} s\n\n")
    w(f"{'op':<30}{'pass/run':>10}{'mism':>6}{'err':>5}{'crash':>6}{'dtype':>7}{'mixed':>7}\n")
    for op, r in rep["per_op"].items():
        mark = "" if op in SUPPORTED_SET else "  (via expansion)"
        w(f"{op:<30}{str(r['pass']) + '/' + str(r['run']):>10}{r['mismatch']:>6}{r['error']:>5}"
          f"{r['crash']:>6}{r['dtype_skip']:>7}{r['mixed_not_run']:>7}{mark}\n")
    w(f"\nTOTAL: {rep['passed']} of {rep['run']} run cases pass\n")

    if rep["crashes"]:
        w(f"\n!!! {len(rep['crashes'])} CRASHES (panics, signals, timeouts, odd exit codes) !!!\n")
        for cr in rep["crashes"]:
            w(f"  {cr['case']} [{cr['kind']}, rc={cr['rc']}]: {cr['reason']}\n")
            for line in (cr["stderr_tail"] or "").splitlines():
                w(f"      | {line}\n")
    if rep["failures"]:
        w("\nFailures by reason:\n")
        for cat, msgs in rep["failures"].items():
            n = sum(len(v) for v in msgs.values())
            w(f"\n  [{cat}] {n}\n")
            for msg, names in sorted(msgs.items(), key=lambda kv: -len(kv[1])):
                if cat.startswith("mismatch"):
                    for name in names:
                        w(f"    {name}\n")
                else:
                    w(f"    {len(names)} x {msg}\n")
                    w(f"        {' '.join(names)}\n")
    if rep["dtype_skips"]:
        w(f"\nSkipped for dtypes ({len(rep['dtype_skips'])}):\n")
        for s in rep["dtype_skips"]:
            w(f"    {s['case']}: {s['why']}\n")
    if rep["mixed_cases"]:
        w(f"\nMixed cases, not run ({len(rep['mixed_cases'])}): supported main op, other ops\n")
        by_extra = collections.defaultdict(list)
        for m in rep["mixed_cases"]:
            by_extra[", ".join(m["other_ops"])].append(m["case"])
        for extra, names in sorted(by_extra.items(), key=lambda kv: -len(kv[1])):
            w(f"    needs {extra}: {' '.join(names)}\n")


if __name__ == "__main__":
    sys.exit(main())
