#!/usr/bin/env bash
# CPU benchmark: lumen against ONNX Runtime and a bare GEMM call, 1 thread and every core,
# interleaved rounds, medians, ratios (scripts/bench_cpu.py says what it runs). A benchmark for
# a user to run, not a test: nothing here is needed by `cargo test`.
#
#   scripts/bench-cpu.sh [--rounds N] [--quick] [--only NAME] [--ops] [--cache DIR] [--save FILE]
#
# It creates .venv-bench (gitignored) with onnxruntime, onnx and numpy from PyPI, builds lumen
# and the bare_gemm example in release mode, and runs scripts/bench_cpu.py with any flags given.
# The convolution networks (ResNet-50, MobileNetV2, YOLOv8n) are exported by PyTorch into a
# cache (~/.cache/lumen-bench/cnn-v1, or --cache DIR) the first time they run: then, and only
# when a chosen one is not cached yet, torch is installed into .venv-bench too (the PyPI wheel,
# about 1 GB with its CUDA libraries; only the CPU is used).
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=.venv-bench
PACKAGES=(onnxruntime==1.32.0 onnx==1.23.2 numpy==2.4.6)
# What scripts/bench_cnn_models.py exports the CNN workloads with (data/make_cnn_fixtures.py's pin).
TORCH_PACKAGES=(torch==2.15.0)

step() { printf '\n== %s\n' "$*"; }

if ! command -v python3 >/dev/null; then
    echo "error: python3 not found: the benchmark needs Python 3.10 or later" >&2
    exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
    step "creating $VENV"
    if ! python3 -m venv "$VENV"; then
        echo "error: python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
        exit 1
    fi
fi
if ! "$VENV/bin/python" -c 'import onnxruntime, onnx, numpy' 2>/dev/null; then
    step "installing ${PACKAGES[*]} into $VENV"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}"; then
        echo "error: pip could not install ${PACKAGES[*]}: is the package index reachable" \
             "(a proxy, PIP_INDEX_URL)? The benchmark needs them; lumen itself does not." >&2
        exit 1
    fi
fi

# Bad flags fail here, before minutes of building; it prints `needs: torch` when a CNN model
# chosen is not in the cache yet.
needs=$("$VENV/bin/python" scripts/bench_cpu.py --check-args "$@")
if [[ "$needs" == *"needs: torch"* ]] && ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    step "installing ${TORCH_PACKAGES[*]} into $VENV (to export the CNN models once)"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            "${TORCH_PACKAGES[@]}"; then
        echo "error: pip could not install ${TORCH_PACKAGES[*]}: the CNN workloads need it once," \
             "to export their models (leave them out with --only NAME)." >&2
        exit 1
    fi
fi

step "building lumen and the bare GEMM (release)"
# One build of every binary and example: two builds with different package selections resolve
# features differently and rebuild each other's crates.
cargo build --release --quiet --workspace --bins --examples
TARGET_DIR="${CARGO_TARGET_DIR:-target}"

step "benchmark"
exec "$VENV/bin/python" scripts/bench_cpu.py \
    --lumen "$TARGET_DIR/release/lumen" \
    --bare "$TARGET_DIR/release/examples/bare_gemm" "$@"
