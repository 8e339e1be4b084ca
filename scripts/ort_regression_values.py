#!/usr/bin/env python3
"""ONNX Runtime's outputs for the small graphs of lumen-onnx's regression tests
(crates/onnx/tests/*.rs): each case builds the test's graph with the test's inputs, runs it on
onnxruntime's CPU provider and prints the outputs the test asserts. `cargo test` never runs
this; it documents where the tests' numbers come from. Usage: python3
scripts/ort_regression_values.py [CASE ...] (all cases without arguments)."""

import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh


def run(nodes, inputs, outputs, opset, inits=()):
    """The outputs of one graph: `inputs` maps names to arrays, `outputs` lists names."""
    types = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.int64): TP.INT64,
             np.dtype(np.int32): TP.INT32}
    vis = [oh.make_tensor_value_info(k, types[v.dtype], v.shape) for k, v in inputs.items()]
    outs = [oh.make_empty_tensor_value_info(o) for o in outputs]
    g = oh.make_graph(nodes, "g", vis, outs, initializer=list(inits))
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, inputs)


def show(name, arrays):
    for a in arrays:
        a = np.asarray(a)
        print(f"{name}: {a.dtype} {list(a.shape)}: {a.flatten().tolist()}")


def max_unpool_output_shape():
    """selection_ops.rs, max_unpool_puts_values_back_where_max_pool_found_them: MaxPool 2x2
    stride 2 (with Indices) of x[k] = (k * 7 % 30) - 10 shaped [1, 2, 3, 5], then MaxUnpool
    with output_shape [1, 2, 3, 5]."""
    x = (np.arange(30) * 7 % 30 - 10).astype(np.float32).reshape(1, 2, 3, 5)
    nodes = [oh.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             oh.make_node("MaxUnpool", ["y", "i", "s"], ["u"], kernel_shape=[2, 2],
                          strides=[2, 2])]
    s = nh.from_array(np.array([1, 2, 3, 5], np.int64), "s")
    show("max_unpool_output_shape", run(nodes, {"x": x}, ["i", "u"], 11, [s]))


def nms_no_boxes_or_classes():
    """selection_ops.rs, non_max_suppression_of_no_box_or_no_class_is_empty: NonMaxSuppression
    (max 10 per class, IoU 0.5) of boxes [1, 0, 4] with scores [1, 1, 0], and of boxes [1, 3,
    4] with scores [1, 0, 3]."""
    for b, s in [((1, 0, 4), (1, 1, 0)), ((1, 3, 4), (1, 0, 3))]:
        nodes = [oh.make_node("NonMaxSuppression", ["b", "s", "m", "t"], ["y"])]
        inits = [nh.from_array(np.array([10], np.int64), "m"),
                 nh.from_array(np.array([0.5], np.float32), "t")]
        feeds = {"b": np.zeros(b, np.float32), "s": np.zeros(s, np.float32)}
        show("nms_no_boxes_or_classes", run(nodes, feeds, ["y"], 11, inits))


def folded_int32_bits():
    """bit_ops.rs, folded_bit_operators_keep_their_onnx_type: opset 18 (BitShift 28) graphs of
    constants only (Constant nodes, so they fold at import), with a run-time int32 input x =
    [1, 1, 256, 0] where noted."""
    c = lambda name, v, t: oh.make_node("Constant", [], [name], value=nh.from_array(np.array(v, t)))
    a = c("a", [1, 3, -1, 1 << 30], np.int32)
    b = c("b", [31, 31, 32, 2], np.int32)
    for d in ("LEFT", "RIGHT"):
        nodes = [a, b, oh.make_node("BitShift", ["a", "b"], ["y"], direction=d)]
        show(f"folded_int32_bits shift {d}", run(nodes, {}, ["y"], 28))
    p = c("p", [12, 10, -1, -(1 << 31)], np.int32)
    q = c("q", [6, 3, 255, 1 << 30], np.int32)
    x = {"x": np.array([1, 1, 256, 0], np.int32)}
    nodes = [p, q, oh.make_node("BitwiseAnd", ["p", "q"], ["e"]),
             oh.make_node("BitwiseNot", ["e"], ["n"]), oh.make_node("BitwiseOr", ["n", "x"], ["y"])]
    show("folded_int32_bits and-not-or", run(nodes, x, ["e", "n", "y"], 18))
    u = c("u", [0, 1, 200, 255], np.uint8)
    s = c("s", [1, 7, 1, 9], np.uint8)
    nodes = [u, s, oh.make_node("BitwiseNot", ["u"], ["n"]),
             oh.make_node("BitShift", ["u", "s"], ["l"], direction="LEFT"),
             oh.make_node("BitShift", ["u", "s"], ["r"], direction="RIGHT"),
             oh.make_node("Cast", ["n"], ["nf"], to=TP.FLOAT),
             oh.make_node("Cast", ["l"], ["lf"], to=TP.FLOAT),
             oh.make_node("Cast", ["r"], ["rf"], to=TP.FLOAT)]
    show("folded_int32_bits uint8", run(nodes, {}, ["nf", "lf", "rf"], 28))
    w = c("w", [(1 << 31) + 5, -(1 << 31) - 1, 7], np.int64)
    nodes = [w, oh.make_node("Cast", ["w"], ["y"], to=TP.INT32)]
    show("folded_int32_bits cast", run(nodes, {}, ["y"], 18))


def mel_int32():
    """selection_ops.rs, mel_weight_matrix_as_onnx_reference_computes_it: MelWeightMatrix (opset
    17) of 3 bins, dft_length 8, sample rate 16, edges 0 and 8 Hz, output_datatype INT32."""
    feeds = {"nb": np.array(3, np.int64), "dft": np.array(8, np.int64),
             "sr": np.array(16, np.int64), "lo": np.array(0.0, np.float32),
             "hi": np.array(8.0, np.float32)}
    nodes = [oh.make_node("MelWeightMatrix", ["nb", "dft", "sr", "lo", "hi"], ["w"],
                          output_datatype=TP.INT32)]
    show("mel_int32", run(nodes, feeds, ["w"], 17))


CASES = {f.__name__: f for f in [max_unpool_output_shape, nms_no_boxes_or_classes,
                                  folded_int32_bits, mel_int32]}

if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        CASES[name]()
