#!/usr/bin/env python3
"""Make data/digits_mlp.safetensors: a scikit-learn MLP trained on the bundled digits set.

The main job of lumen (`cargo run --release -- run data/digits_mlp.safetensors`) rebuilds
this network from the file, runs the held-out inputs through it on its own runtime, and
checks its logits and accuracy against the ones scikit-learn computed here.

How to run it (from the repository root):

    python3 -m pip install scikit-learn==1.9.1 numpy==2.4.6 safetensors==0.8.0
    python3 data/make_digits_mlp.py            # writes data/digits_mlp.safetensors

Model: MLPClassifier(hidden_layer_sizes=(128, 64), activation="relu", random_state=0,
max_iter=300), trained on load_digits() with pixels scaled to [0, 1] (divided by 16), on a
stratified 75/25 split (train_test_split(test_size=0.25, random_state=0, stratify=y)).

Tensors (weights are [in, out]: h = relu(x @ w + b), no relu after the last layer):
    x       [450, 64]  f32  the held-out inputs
    y       [450]      i64  their labels
    w1 [64, 128], b1 [128], w2 [128, 64], b2 [64], w3 [64, 10], b3 [10]   f32
    logits  [450, 10]  f32  scikit-learn's pre-softmax values for x (computed in float64
                            from its own coefs_/intercepts_, checked against predict_proba)
The header's metadata records scikit-learn's held-out accuracy and the package versions.
Training is deterministic for a given scikit-learn/numpy version and the file is written
byte-for-byte reproducibly, so rerunning with the pinned versions reproduces the committed file.
"""

import json
import os
import struct
import sys

import numpy as np
import safetensors
import sklearn
from safetensors.numpy import load_file
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier


def forward_logits(coefs, intercepts, x):
    """sklearn's forward pass without the final softmax (relu hidden layers, identity out)."""
    h = x
    for i, (w, b) in enumerate(zip(coefs, intercepts)):
        h = h @ w + b
        if i + 1 < len(coefs):
            h = np.maximum(h, 0.0)
    return h


DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}


def save_deterministic(tensors, path, metadata):
    """Writes the safetensors format byte-for-byte reproducibly (the library's writer orders
    the metadata by a hash map): 8-byte little-endian header length, a JSON header with sorted
    keys padded with spaces to 8 bytes, then the little-endian tensor data in key order."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": DTYPES[arr.dtype],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits_mlp.safetensors")
    digits = load_digits()
    x_all = digits.data / 16.0
    y_all = digits.target
    x_train, x_test, y_train, y_test = train_test_split(
        x_all, y_all, test_size=0.25, random_state=0, stratify=y_all
    )
    clf = MLPClassifier(
        hidden_layer_sizes=(128, 64), activation="relu", random_state=0, max_iter=300
    )
    clf.fit(x_train, y_train)
    accuracy = clf.score(x_test, y_test)

    logits = forward_logits(clf.coefs_, clf.intercepts_, x_test)
    # The logits are sklearn's: softmax of them is predict_proba, argmax is predict.
    z = logits - logits.max(axis=1, keepdims=True)
    proba = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    assert np.allclose(proba, clf.predict_proba(x_test), rtol=1e-10, atol=1e-12)
    assert (clf.classes_[logits.argmax(axis=1)] == clf.predict(x_test)).all()
    assert (clf.classes_ == np.arange(10)).all()

    tensors = {"x": x_test.astype(np.float32), "y": y_test.astype(np.int64)}
    for i, (w, b) in enumerate(zip(clf.coefs_, clf.intercepts_), start=1):
        tensors[f"w{i}"] = np.ascontiguousarray(w, dtype=np.float32)
        tensors[f"b{i}"] = np.ascontiguousarray(b, dtype=np.float32)
    tensors["logits"] = logits.astype(np.float32)

    # What an f32 forward pass of the stored tensors gives, to show the 1e-4 budget is sane.
    f32_logits = forward_logits(
        [tensors[f"w{i}"].astype(np.float64) for i in range(1, len(clf.coefs_) + 1)],
        [tensors[f"b{i}"].astype(np.float64) for i in range(1, len(clf.coefs_) + 1)],
        tensors["x"].astype(np.float64),
    )
    rounding_err = float(np.abs(f32_logits - logits).max())

    metadata = {
        "source": "data/make_digits_mlp.py",
        "model": "MLPClassifier(hidden_layer_sizes=(128, 64), activation='relu', "
        "random_state=0, max_iter=300)",
        "split": "train_test_split(test_size=0.25, random_state=0, stratify=y)",
        "sklearn_accuracy": f"{accuracy:.6f}",
        "n_iter": str(clf.n_iter_),
        "scikit_learn": sklearn.__version__,
        "numpy": np.__version__,
        "safetensors": safetensors.__version__,
    }
    save_deterministic(tensors, out_path, metadata)
    # Read it back with the reference implementation.
    back = load_file(out_path)
    assert sorted(back) == sorted(tensors)
    assert all((back[k] == tensors[k]).all() and back[k].dtype == tensors[k].dtype for k in back)
    correct = int(round(accuracy * len(y_test)))
    print(f"wrote {out_path}")
    print(f"held-out samples: {len(y_test)}, scikit-learn accuracy: {accuracy:.6f} "
          f"({correct}/{len(y_test)}), iterations: {clf.n_iter_}")
    print(f"max |logit| {np.abs(logits).max():.3f}; max error of the f32-rounded tensors "
          f"vs the float64 logits: {rounding_err:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
