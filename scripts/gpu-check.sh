#!/usr/bin/env bash
# GPU check of the CUDA runtime, in two halves:
#
#   scripts/gpu-check.sh build   (here, with Rust): builds the release `lumen` and the CUDA test
#                                binaries with `--features cuda` into gpu-build/ (git-ignored),
#                                with data/ beside them.
#   scripts/gpu-check.sh run     (on the GPU machine, no Rust needed): finds libcuda,
#                                libcublasLt and libnvrtc, says where, sets LD_LIBRARY_PATH, runs
#                                the CUDA tests, `lumen run data/digits_mlp.safetensors --runtime
#                                cuda --json`, and the fused-vs-unfused benchmark.
#   scripts/gpu-check.sh         both: build if cargo is here, run if a GPU is.
#
# Nothing links CUDA at build time (cudarc dynamic loading), so the build half needs no CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=gpu-build

build() {
    echo "== build: release lumen and CUDA test binaries (--features cuda) into $OUT/"
    rm -rf "$OUT"
    mkdir -p "$OUT/bin" "$OUT/tests"
    cargo build --release --features cuda --bin lumen
    cp target/release/lumen "$OUT/bin/"
    # The test executables' paths come from cargo's JSON messages (hash-suffixed names).
    local json
    json=$(cargo test --release -p lumen-runtime --features cuda --lib --test cuda --test cuda_golden \
        --no-run --message-format=json)
    echo "$json" | python3 -c '
import json, shutil, sys
out = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    # Test harnesses only: the integration tests and the library unit tests.
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        exe = m["executable"]
        shutil.copy(exe, "%s/tests/%s" % (out, name))
        print("  %s/tests/%s <- %s" % (out, name, exe))
' "$OUT"
    # Line tables are for backtraces here; the copies travel to the GPU machine (64 MiB cap).
    if command -v strip >/dev/null 2>&1; then strip "$OUT"/bin/* "$OUT"/tests/*; fi
    cp -r data "$OUT/data"
    cp "$0" "$OUT/gpu-check.sh"
    du -sh "$OUT"
}

# First match of a library among the usual places: the loader cache, /usr/local/cuda*, NVIDIA
# container mounts, and pip installs (nvidia-* wheels, PyTorch) under any site-packages.
find_lib() {
    local pattern=$1 hit
    hit=$(ldconfig -p 2>/dev/null | awk -v p="$pattern" '$1 ~ p {print $NF}' | sort -r | head -n 1)
    if [ -n "$hit" ]; then echo "$hit"; return; fi
    local dirs=(/usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib)
    dirs+=(/usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib)
    local py
    for py in python3 python; do
        if command -v "$py" >/dev/null 2>&1; then
            while IFS= read -r d; do dirs+=("$d"); done < <("$py" -c '
import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    print(p)' 2>/dev/null)
        fi
    done
    dirs+=(/opt/conda/lib /usr/local/lib/python3*/dist-packages /usr/lib/python3/dist-packages)
    local d
    for d in "${dirs[@]}"; do
        [ -d "$d" ] || continue
        hit=$(find -L "$d" -maxdepth 5 -name "$pattern*" ! -name '*builtins*' ! -name '*.alt.*' \
            2>/dev/null | sort -r | head -n 1)
        if [ -n "$hit" ]; then echo "$hit"; return; fi
    done
}

run() {
    local root=$OUT
    [ -x "$root/bin/lumen" ] || root=.  # running from inside a copied gpu-build/
    [ -x "$root/bin/lumen" ] || { echo "no $OUT/bin/lumen: run '$0 build' first" >&2; exit 1; }
    echo "== GPU"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || echo "(no nvidia-smi)"
    local libdirs="" lib name
    for name in libcuda.so libcublasLt.so libnvrtc.so; do
        lib=$(find_lib "$name")
        if [ -z "$lib" ]; then
            echo "$name: NOT FOUND (the CUDA tests will skip with the reason)"
            continue
        fi
        echo "$name: found $lib"
        case ":$libdirs:" in *":$(dirname "$lib"):"*) ;; *) libdirs="$libdirs:$(dirname "$lib")" ;; esac
    done
    export LD_LIBRARY_PATH="${libdirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    export LUMEN_DATA_DIR="$root/data"
    local status=0
    echo "== CUDA tests"
    # The library's CUDA unit tests first: host-only cuBLASLt descriptor checks, mappings.
    "$root/tests/lumen_runtime" cuda:: --test-threads=1 --nocapture || status=1
    "$root/tests/cuda" --test-threads=1 --nocapture || status=1
    "$root/tests/cuda_golden" || status=1
    echo "== lumen run data/digits_mlp.safetensors --runtime cuda --json"
    "$root/bin/lumen" run "$root/data/digits_mlp.safetensors" --runtime cuda --json || status=1
    echo "== profile and memory-plan lines (LUMINAL_CUDA_PROFILE_RECAPTURE=1 LUMINAL_CUDA_MEMORY_DEBUG=1)"
    LUMINAL_CUDA_PROFILE_RECAPTURE=1 LUMINAL_CUDA_MEMORY_DEBUG=1 \
        "$root/bin/lumen" run "$root/data/digits_mlp.safetensors" --runtime cuda --runs 2 \
        >/dev/null || status=1
    echo "== benchmark: linear-relu fused vs unfused"
    "$root/tests/cuda" --ignored bench --nocapture --test-threads=1 || status=1
    echo "== gpu-check: $([ $status = 0 ] && echo PASS || echo FAIL)"
    return $status
}

case "${1:-all}" in
    build) build ;;
    run) run ;;
    all)
        if command -v cargo >/dev/null 2>&1; then build; fi
        run
        ;;
    *) echo "usage: $0 [build|run]" >&2; exit 2 ;;
esac
