#!/usr/bin/env bash
# GPU check of the CUDA runtime, in two halves:
#
#   scripts/gpu-check.sh build   (here, with Rust): builds the release `lumen` and the CUDA test
#                                binaries with `--features cuda` into gpu-build/ (git-ignored),
#                                with data/ beside them.
#   scripts/gpu-check.sh run     (on the GPU machine, no Rust needed): finds libcuda,
#                                libcublasLt and libnvrtc, says where, sets LD_LIBRARY_PATH, runs
#                                the CUDA tests (among them: the transformer block and the digits
#                                ViT against the CPU runtime, random programs over every op against
#                                the CPU planned / no-reuse / NaN-poisoned, convolutions of every
#                                kind and epilogue and takes against the CPU planned / no-reuse /
#                                NaN-poisoned, casts, argmax/argmin, top-k and gather_elements
#                                against the CPU bit for bit, the device-reported gather, take
#                                and gather_elements errors), the ONNX fixtures through the
#                                emulated CUDA plans (root package, `cargo test --features cuda
#                                --test cuda_fixtures`),
#                                `lumen run data/digits_mlp.safetensors --runtime cuda --json`,
#                                the digits ViT through the CLI on both runtimes side by side
#                                (and NaN-poisoned), and the fused-vs-unfused benchmark.
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
    # And the root package's cuda_fixtures (every ONNX fixture through the emulated CUDA plans).
    json+=$'\n'$(cargo test --release --features cuda --test cuda_fixtures --no-run \
        --message-format=json)
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

# Where a library is, among the usual places: LUMEN_CUDA_LIB_DIRS (colon-separated, searched
# first), the loader cache, NVIDIA container mounts, /usr/local/cuda*, and pip installs (nvidia-*
# wheels, PyTorch) under any site-packages of python3 or of a venv under /opt. Never picked:
# driver forward-compatibility copies (`compat/`, which fail cuInit under an older kernel
# module) and the toolkit's link-time stubs (`stubs/`, which have no driver behind them). For
# libcuda the loader's own x86-64 `libcuda.so.1` wins; for the CUDA 13 libraries a path of the
# CUDA 13 wheels (`cu13/`) or toolkit (`cuda-13`) is preferred.
find_lib() {
    local pattern=$1 hits=() hit d
    if [ -n "${LUMEN_CUDA_LIB_DIRS:-}" ]; then
        local extra
        IFS=: read -r -a extra <<<"$LUMEN_CUDA_LIB_DIRS"
        for d in "${extra[@]}"; do
            [ -d "$d" ] || continue
            hit=$(find -L "$d" -maxdepth 1 -name "$pattern*" ! -name '*builtins*' ! -name '*.alt.*' \
                2>/dev/null | sort | head -n 1)
            if [ -n "$hit" ]; then echo "$hit"; return; fi
        done
    fi
    if [ "$pattern" = libcuda.so ]; then
        hit=$(ldconfig -p 2>/dev/null |
            awk '$1 == "libcuda.so.1" && /x86-64/ && $NF !~ /compat/ {print $NF; exit}')
        if [ -n "$hit" ]; then echo "$hit"; return; fi
    fi
    while IFS= read -r hit; do hits+=("$hit"); done < <(ldconfig -p 2>/dev/null |
        awk -v p="$pattern" '$1 ~ "^" p && $NF !~ /compat|stubs/ {print $NF}' | sort -r)
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
    dirs+=(/opt/*/.venv/lib/python3*/site-packages /opt/*/lib/python3*/site-packages)
    dirs+=(/opt/conda/lib /usr/local/lib/python3*/dist-packages /usr/lib/python3/dist-packages)
    for d in "${dirs[@]}"; do
        [ -d "$d" ] || continue
        while IFS= read -r hit; do hits+=("$hit"); done < <(find -L "$d" -maxdepth 5 \
            -name "$pattern*" ! -name '*builtins*' ! -name '*.alt.*' \
            ! -path '*/compat/*' ! -path '*/stubs/*' \
            2>/dev/null | sort -r)
    done
    [ ${#hits[@]} -gt 0 ] || return 0
    if [ "$pattern" != libcuda.so ]; then
        for hit in "${hits[@]}"; do
            case "$hit" in */cu13/*|*cuda-13*) echo "$hit"; return ;; esac
        done
    fi
    echo "${hits[0]}"
}

# Runs every test of a test binary in its own process (`--exact`), so a kernel fault that
# poisons one CUDA context cannot fail the tests after it; `$2` = `--ignored` runs the ignored
# ones (the benchmark). Returns non-zero when any failed.
each_test() {
    local bin=$1 mode=${2:-} all ignored names name failed=0 t
    # A binary that cannot even list its tests (a missing glibc symbol, say) is a failure.
    all=$("$bin" --list 2>&1) || { echo "-- FAILED listing $bin: $all"; return 1; }
    ignored=$("$bin" --list --ignored 2>&1) || { echo "-- FAILED listing $bin: $ignored"; return 1; }
    all=$(echo "$all" | sed -n 's/: test$//p' | sort)
    ignored=$(echo "$ignored" | sed -n 's/: test$//p' | sort)
    if [ "$mode" = --ignored ]; then
        names=$ignored
    else
        names=$(comm -23 <(echo "$all") <(echo "$ignored"))
    fi
    for name in $names; do
        t=$SECONDS
        if "$bin" --exact "$name" $mode --nocapture --test-threads=1 >"$TMPDIR_RUN/out" 2>&1; then
            echo "-- ok     $name ($((SECONDS - t)) s)"
        else
            echo "-- FAILED $name ($((SECONDS - t)) s)"
            failed=1
        fi
        # The test's own lines (figures, skip reasons, panics), without the harness's.
        sed -E 's/^test [^ ]+ \.\.\. //' "$TMPDIR_RUN/out" |
            grep -a -v -E '^(running [0-9]+ tests?|test result:.*|ok|FAILED|ignored|failures:|stack backtrace:|note: .*backtrace.*| +[a-z0-9_:]+|)$' |
            sed 's/^/   /' || true
    done
    return $failed
}

run() {
    local root=$OUT
    [ -x "$root/bin/lumen" ] || root=.  # running from inside a copied gpu-build/
    [ -x "$root/bin/lumen" ] || { echo "no $OUT/bin/lumen: run '$0 build' first" >&2; exit 1; }
    TMPDIR_RUN=$(mktemp -d)
    echo "== machine"
    echo "$(uname -m), $(ldd --version 2>/dev/null | head -n 1) (the binaries need glibc 2.34+)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || echo "(no nvidia-smi)"
    local libdirs="" lib name
    for name in libcuda.so libcublasLt.so libnvrtc.so; do
        lib=$(find_lib "$name")
        if [ -z "$lib" ]; then
            echo "$name: NOT FOUND (set LUMEN_CUDA_LIB_DIRS to its directory)"
            continue
        fi
        echo "$name: found $lib"
        case ":$libdirs:" in *":$(dirname "$lib"):"*) ;; *) libdirs="$libdirs:$(dirname "$lib")" ;; esac
    done
    export LD_LIBRARY_PATH="${libdirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    export LUMEN_DATA_DIR="$root/data"
    # Here a GPU is expected: a test that would skip fails instead. cuBLASLt logs its errors
    # (level 1) with its own reason, e.g. why an algorithm is NOT_SUPPORTED.
    # Its log goes to stderr, never into `lumen run --json`'s stdout.
    export LUMEN_REQUIRE_CUDA=1 CUBLASLT_LOG_LEVEL=1 CUBLASLT_LOG_FILE=/dev/stderr
    local status=0
    echo "== CUDA unit tests (host-only cuBLASLt descriptor checks, mappings)"
    "$root/tests/lumen_runtime" cuda:: --test-threads=1 --nocapture >"$TMPDIR_RUN/unit" 2>&1 ||
        status=1
    grep -a -E '^(cuBLASLt|test result|skipped)|FAILED|panicked' "$TMPDIR_RUN/unit" || true
    echo "== CUDA tests, one process each"
    each_test "$root/tests/cuda" || status=1
    each_test "$root/tests/cuda_golden" || status=1
    echo "== ONNX fixtures through the emulated CUDA plans (cargo test --features cuda --test cuda_fixtures)"
    each_test "$root/tests/cuda_fixtures" || status=1
    echo "== lumen run data/digits_mlp.safetensors --runtime cuda --json"
    "$root/bin/lumen" run "$root/data/digits_mlp.safetensors" --runtime cuda --json || status=1
    echo "== profile and memory-plan lines (LUMINAL_CUDA_PROFILE_RECAPTURE=1 LUMINAL_CUDA_MEMORY_DEBUG=1)"
    LUMINAL_CUDA_PROFILE_RECAPTURE=1 LUMINAL_CUDA_MEMORY_DEBUG=1 \
        "$root/bin/lumen" run "$root/data/digits_mlp.safetensors" --runtime cuda --runs 2 \
        >/dev/null || status=1
    echo "== in-place reuse on the GPU: the unfused digits MLP in place (default) and not, NaN-poisoned"
    # Elementwise kernels writing over their dying operand: same accuracy and max error as
    # without, and the slab at the lower bound (1,463,296 B against 1,693,696 B).
    for flag in "" --no-in-place; do
        LUMINAL_CUDA_MEMORY_DEBUG=1 "$root/bin/lumen" run "$root/data/digits_mlp.safetensors" \
            --runtime cuda --no-fuse --runs 3 $flag | grep -a -E '^(plan|in place|max error|accuracy|check)' ||
            status=1
    done
    echo "== the digits ViT through the CLI: cpu and cuda side by side (budget 1e-3 against PyTorch's logits)"
    # The issue's bar for the GPU: the same accuracy (argmax) as the CPU and the logits within
    # 1e-3 (the CPU is within 1e-5 of them, so cuda vs cpu <= ~1e-3). Then NaN-poisoned.
    local rt acc_cpu="" acc_cuda=""
    for rt in cpu cuda; do
        "$root/bin/lumen" run "$root/data/digits_vit.safetensors" --runtime $rt --tolerance 1e-3 \
            >"$TMPDIR_RUN/vit_$rt" || status=1
        grep -a -E '^(program|accuracy|max error|check)' "$TMPDIR_RUN/vit_$rt" | sed "s/^/   $rt: /" || true
    done
    acc_cpu=$(grep -a -E '^accuracy' "$TMPDIR_RUN/vit_cpu" | head -n 1 || true)
    acc_cuda=$(grep -a -E '^accuracy' "$TMPDIR_RUN/vit_cuda" | head -n 1 || true)
    if [ "${acc_cpu:-x}" != "${acc_cuda:-y}" ]; then
        echo "-- FAILED: the ViT's accuracy differs between cpu and cuda"
        status=1
    else
        echo "-- ok     ViT accuracy identical on cpu and cuda"
    fi
    LUMINAL_CUDA_MEMORY_DEBUG=1 "$root/bin/lumen" run "$root/data/digits_vit.safetensors" \
        --runtime cuda --runs 3 --tolerance 1e-3 | grep -a -E '^(accuracy|max error|check)' ||
        status=1
    echo "== benchmark: linear-relu fused vs unfused"
    each_test "$root/tests/cuda" --ignored || status=1
    rm -rf "$TMPDIR_RUN"
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
