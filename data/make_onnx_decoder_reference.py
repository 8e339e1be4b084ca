#!/usr/bin/env python3
"""Make data/onnx/llama_step_op17.generate.safetensors: greedy generation references for the
ONNX decoder step data/onnx/llama_step_op17.onnx (made by data/make_cnn_fixtures.py), by ONNX
Runtime.

`lumen generate data/onnx/llama_step_op17.onnx` drives that step with a padded cache of fixed
length; the references here come from the plain loop ONNX Runtime users write: the prompt in
one step with an empty cache, then one token per step, each step's `present.*` outputs fed back
as the next step's `past.*` inputs (the cache grows by one row per step, nothing padded). Greedy:
the next token is numpy's argmax (the first largest) of the last position's logits.

How to run it (from the repository root, a few seconds):

    python3 -m pip install onnxruntime==1.32.0 numpy==2.4.6 safetensors==0.8.0
    python3 data/make_onnx_decoder_reference.py

Made with onnxruntime 1.32.0, numpy 2.4.6, safetensors 0.8.0 (Python 3.11).

Contents, for each reference i (prompts of 1, 4 and 9 tokens, 24, 12 and 6 new tokens; the
model's vocabulary is 96): `p{i}.prompt` int64 [P], `p{i}.tokens` int64 [N], `p{i}.logits`
float32 [N, 96] (the logits that chose each new token). The smallest gap between the largest
and second-largest logit over all steps is printed (a gap far above lumen's 1e-6 rounding
means the token choice is not a coin toss).
"""
import os

import numpy as np
import onnxruntime as ort
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "onnx", "llama_step_op17.onnx")
OUT = os.path.join(HERE, "onnx", "llama_step_op17.generate.safetensors")
CASES = [([17], 24), ([5, 61, 33, 2], 12), ([40, 41, 42, 43, 44, 45, 46, 47, 48], 6)]


def generate(session, prompt, new):
    inputs = session.get_inputs()
    caches = [i for i in inputs if i.name.startswith("past.")]
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in caches}
    names = [o.name for o in session.get_outputs()]
    tokens, logits, gaps = [], [], []
    ids, start = list(prompt), 0
    while len(tokens) < new:
        q = len(ids)
        feeds = {
            "input_ids": np.array([ids], np.int64),
            "attention_mask": np.ones((1, start + q), np.int64),
            "position_ids": np.arange(start, start + q, dtype=np.int64)[None],
            **past,
        }
        outs = dict(zip(names, session.run(None, feeds)))
        last = outs["logits"][0, -1]
        top = np.sort(last)[-2:]
        gaps.append(float(top[1] - top[0]))
        token = int(np.argmax(last))
        tokens.append(token)
        logits.append(last.astype(np.float32))
        past = {n: outs[n.replace("past.", "present.", 1)] for n in past}
        start += q
        ids = [token]
    return np.array(tokens, np.int64), np.stack(logits), min(gaps)


def main():
    session = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    tensors, worst = {}, float("inf")
    for i, (prompt, new) in enumerate(CASES):
        tokens, logits, gap = generate(session, prompt, new)
        tensors[f"p{i}.prompt"] = np.array(prompt, np.int64)
        tensors[f"p{i}.tokens"] = tokens
        tensors[f"p{i}.logits"] = logits
        worst = min(worst, gap)
        print(f"p{i}: prompt {prompt} -> {tokens.tolist()}")
    save_file(tensors, OUT)
    print(f"wrote {OUT}; smallest top-2 logit gap {worst:.3e}")


if __name__ == "__main__":
    main()
