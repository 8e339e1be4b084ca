#!/usr/bin/env python3
"""Make data/onnx/: ONNX models exported by real tools, their inputs, and onnxruntime's outputs.

lumen imports each model (`lumen run data/onnx/NAME.onnx --inputs data/onnx/NAME.inputs.safetensors
--expect data/onnx/NAME.expect.safetensors`) and must reproduce onnxruntime's outputs within 1e-4;
`cargo test` reads these files and needs no Python.

How to run it (from the repository root; data/digits_vit.safetensors must exist):

    python3 -m pip install torch==2.15.0 scikit-learn==1.9.1 skl2onnx==1.20.0 onnx==1.23.2 \\
        onnxruntime==1.32.0 numpy==2.4.6 safetensors==0.8.0
    python3 data/make_onnx_fixtures.py [NAME ...]   # all fixtures, or the ones named

Models (each NAME.onnx beside NAME.inputs.safetensors and NAME.expect.safetensors, tensors by
graph input and output name):
    digits_mlp_sklearn  scikit-learn's MLPClassifier (64 -> 128 -> 64 -> 10, the main job's
                        training) converted by skl2onnx (zipmap off; the graph keeps its
                        `probabilities` output: the `label` output is an ArgMax lumen does not
                        compute); input `X` [450, 64]
    digits_vit          data/digits_vit.safetensors's vision transformer, rebuilt in PyTorch and
                        exported by torch.onnx (opset 17); input `x` [450, 64], output `logits`
    bert_tiny           a BERT-style encoder (token and position embeddings by Gather, an
                        additive attention mask, 2 post-LN blocks with LayerNormalization and
                        erf-GELU, a pooled tanh head) exported by torch.onnx (opset 17); inputs
                        `input_ids` int64 [2, 16] and `attention_mask` float [2, 16] (1 keep,
                        0 pad), outputs `hidden` [2, 16, 32] and `pooled` [2, 32]
    bert_int_mask       the same encoder (1 block) fed an int64 `attention_mask` as Hugging Face
                        models read one: scores masked_fill'ed where mask == 0 (Unsqueeze, Equal,
                        Where on the integer input) and a masked mean over the kept tokens (a
                        Cast of the mask to float); outputs `hidden` [2, 16, 32], `mean` [2, 32]
Expected outputs come from onnxruntime 1.32 (CPU, all graph optimisations off, so they are the
model's own arithmetic). Everything is seeded; the .onnx bytes depend on the exporters' versions.
"""

import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_digits_vit import ViT, lumen_parameters  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "onnx")


def run_ort(path, inputs):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def save_case(name, inputs):
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.checker.check_model(onnx.load(path))
    expect = run_ort(path, inputs)
    save_file({k: np.ascontiguousarray(v) for k, v in inputs.items()},
              os.path.join(OUT, f"{name}.inputs.safetensors"))
    save_file({k: np.ascontiguousarray(v.astype(np.float32)) for k, v in expect.items()},
              os.path.join(OUT, f"{name}.expect.safetensors"))
    model = onnx.load(path)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}: {len(model.graph.node)} nodes, {params} parameters, ops {', '.join(ops)}")


def sklearn_mlp():
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    x_all, y_all = digits.data / 16.0, digits.target
    x_train, x_test, y_train, _ = train_test_split(
        x_all, y_all, test_size=0.25, random_state=0, stratify=y_all)
    clf = MLPClassifier(hidden_layer_sizes=(128, 64), activation="relu", random_state=0,
                        max_iter=300).fit(x_train, y_train)
    onx = convert_sklearn(clf, initial_types=[("X", FloatTensorType([None, 64]))],
                          options={id(clf): {"zipmap": False}}, target_opset=17)
    path = os.path.join(OUT, "digits_mlp_sklearn.onnx")
    onnx.save(onx, path)
    onnx.utils.extract_model(path, path, ["X"], ["probabilities"])
    save_case("digits_mlp_sklearn", {"X": x_test.astype(np.float32)})


def digits_vit():
    tensors = load_file(os.path.join(HERE, "digits_vit.safetensors"))
    from safetensors import safe_open
    with safe_open(os.path.join(HERE, "digits_vit.safetensors"), "np") as f:
        meta = f.metadata()
    # The training script's own network, loaded with the file's weights.
    model = ViT(int(meta["patch"]), int(meta["width"]), int(meta["heads"]),
                int(meta["blocks"]), int(meta["ffn"]), int(meta["classes"])).eval()
    with torch.no_grad():
        for name, param in lumen_parameters(model).items():
            param.copy_(torch.from_numpy(tensors[name]))
    x = torch.from_numpy(tensors["x"])
    path = os.path.join(OUT, "digits_vit.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"],
                          opset_version=17, dynamo=False)
    save_case("digits_vit", {"x": tensors["x"]})


class BertLayer(torch.nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.ln1 = torch.nn.LayerNorm(d, eps=1e-12)
        self.ff1, self.ff2 = torch.nn.Linear(d, ffn), torch.nn.Linear(ffn, d)
        self.ln2 = torch.nn.LayerNorm(d, eps=1e-12)

    def forward(self, x, bias):
        b, t, d = x.shape
        dh = d // self.heads

        def split(z):
            return z.reshape(b, t, self.heads, dh).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh) + bias
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class BertTiny(torch.nn.Module):
    def __init__(self, vocab=100, seq=16, d=32, heads=4, ffn=64, layers=2):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, d)
        self.positions = torch.nn.Embedding(seq, d)
        self.ln = torch.nn.LayerNorm(d, eps=1e-12)
        self.layers = torch.nn.ModuleList(BertLayer(d, heads, ffn) for _ in range(layers))
        self.pool = torch.nn.Linear(d, d)
        self.register_buffer("position_ids", torch.arange(seq).unsqueeze(0))

    def forward(self, input_ids, attention_mask):
        h = self.ln(self.tokens(input_ids) + self.positions(self.position_ids))
        bias = (1.0 - attention_mask[:, None, None, :]) * -10000.0
        for layer in self.layers:
            h = layer(h, bias)
        return h, torch.tanh(self.pool(h[:, 0]))


def bert_tiny():
    torch.manual_seed(0)
    model = BertTiny().eval()
    ids = torch.randint(1, 100, (2, 16))
    ids[1, 12:] = 0
    mask = (ids != 0).float()
    export_bert("bert_tiny", model, ids, mask, ["hidden", "pooled"])


def export_bert(name, model, ids, mask, outputs):
    """torch.onnx (opset 17) of a BERT-style model fed `input_ids` and `attention_mask`."""
    path = os.path.join(OUT, f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                          output_names=outputs, opset_version=17, dynamo=False)
    save_case(name, {"input_ids": ids.numpy().astype(np.int64),
                     "attention_mask": mask.numpy()})


class BertIntMask(BertTiny):
    """BertTiny fed an int64 attention mask the way Hugging Face models read one: masked_fill
    of the scores where mask == 0 (Unsqueeze, Equal, Where on the integer input) and a
    masked mean over the kept tokens (Cast of the mask to float)."""

    def forward(self, input_ids, attention_mask):
        h = self.ln(self.tokens(input_ids) + self.positions(self.position_ids))
        keep = attention_mask[:, None, None, :]
        bias = torch.zeros(keep.shape).masked_fill(keep == 0, torch.finfo(torch.float32).min)
        for layer in self.layers:
            h = layer(h, bias)
        m = attention_mask[:, :, None].to(torch.float32)
        return h, (h * m).sum(1) / m.sum(1)


def bert_int_mask():
    torch.manual_seed(1)
    model = BertIntMask(layers=1).eval()
    ids = torch.randint(1, 100, (2, 16))
    ids[0, 10:] = 0
    mask = (ids != 0).long()
    export_bert("bert_int_mask", model, ids, mask, ["hidden", "mean"])


FIXTURES = {"digits_mlp_sklearn": sklearn_mlp, "digits_vit": digits_vit, "bert_tiny": bert_tiny,
            "bert_int_mask": bert_int_mask}


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(0)
    names = sys.argv[1:] or list(FIXTURES)
    for name in names:
        if name not in FIXTURES:
            sys.exit(f"unknown fixture {name!r} (known: {', '.join(FIXTURES)})")
        FIXTURES[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
