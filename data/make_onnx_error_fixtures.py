#!/usr/bin/env python3
"""Make the small hand-built ONNX models of the CLI's error tests (tests/cli_onnx.rs) in
data/onnx/, with their tensors; `cargo test` reads these files and needs no Python.

    python3 data/make_onnx_error_fixtures.py   # onnx 1.23.2, onnxruntime 1.32.0, safetensors 0.8.0

Models:
    unpool_index      MaxUnpool (opset 11, 2x2 kernel, stride 2) of X [1, 1, 2, 2] at the
                      positions I [1, 1, 2, 2] into a 4x4 plane: unpool_index.inputs.safetensors
                      gives I = [0, -1, 2, 3], a negative position (ONNX Runtime refuses it at
                      run time); unpool_index.i64.safetensors is an --expect file holding the f32
                      output `y` as int64 (a reference of another type)
    shapeless_add     c = a + b with both inputs declared float with no shape at all (not even a
                      rank); shapeless_add.inputs.safetensors gives [2, 3] tensors and
                      shapeless_add.expect.safetensors onnxruntime's sum
"""

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as oh
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx")


def save(name, graph, opset, check=True):
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)],
                          producer_name="make_onnx_error_fixtures")
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.save(model, path)
    return path


def unpool_index():
    node = oh.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    graph = oh.make_graph(
        [node], "unpool_index",
        [oh.make_tensor_value_info("x", TP.FLOAT, [1, 1, 2, 2]),
         oh.make_tensor_value_info("i", TP.INT64, [1, 1, 2, 2])],
        [oh.make_tensor_value_info("y", TP.FLOAT, [1, 1, 4, 4])])
    save("unpool_index", graph, 11)
    save_file({"x": np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 2, 2),
               "i": np.array([0, -1, 2, 3], np.int64).reshape(1, 1, 2, 2)},
              os.path.join(OUT, "unpool_index.inputs.safetensors"))
    save_file({"y": np.zeros((1, 1, 4, 4), np.int64)},
              os.path.join(OUT, "unpool_index.i64.safetensors"))


def shapeless_add():
    graph = oh.make_graph(
        [oh.make_node("Add", ["a", "b"], ["c"])], "shapeless_add",
        [oh.make_tensor_value_info("a", TP.FLOAT, None),
         oh.make_tensor_value_info("b", TP.FLOAT, None)],
        [oh.make_tensor_value_info("c", TP.FLOAT, [2, 3])])
    # onnx.checker wants a shape on graph inputs; ONNX Runtime loads and runs the model.
    path = save("shapeless_add", graph, 17, check=False)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, np.float32)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (c,) = session.run(None, {"a": a, "b": b})
    save_file({"a": a, "b": b}, os.path.join(OUT, "shapeless_add.inputs.safetensors"))
    save_file({"c": c}, os.path.join(OUT, "shapeless_add.expect.safetensors"))


if __name__ == "__main__":
    unpool_index()
    shapeless_add()
