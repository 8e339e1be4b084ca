#!/usr/bin/env bash
# Compile and planning cost against program size: wall time and peak memory (from GNU time) of
# whole `lumen` commands, for growing programs. A benchmark, not a test: run it on a quiet
# machine; figures vary with load.
#
#   scripts/bench-scaling.sh            # builds release, prints a table
#
# Rows:
#   compile mlp L      `lumen compile mlp` with L layers of width 256 (fusion, planning, verify)
#   compile transformer B   the built-in transformer with B encoder blocks
#   plan-slab N/live   first fit on an N-buffer interval CSV with about `live` buffers live at
#                      once (sizes 256 B to 16 KiB, generated here with awk, seed fixed)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
lumen=./target/release/lumen
[ -x /usr/bin/time ] || { echo "error: GNU time (/usr/bin/time) is needed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

row() { # label, command...
    local label=$1
    shift
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" > /dev/null
    read -r secs kb < "$tmp/t"
    awk -v l="$label" -v s="$secs" -v kb="$kb" 'BEGIN { printf "%-34s %8s s %9.1f MB\n", l, s, kb / 1024 }'
}

layers() { # L: "256,256,...", L + 1 sizes
    seq 0 "$1" | awk '{printf "%s%s", (NR > 1 ? "," : ""), 256}'
}

csv() { # N, live -> file: buffer i lives [10 i, 10 i + 10 live +- 20%)
    awk -v n="$1" -v live="$2" 'BEGIN {
        srand(7); print "id,lower,upper,size"
        split("256 512 1024 4096 16384", sizes, " ")
        for (i = 0; i < n; i++) {
            lo = i * 10; len = live * 10 * (0.8 + 0.4 * rand())
            printf "b%d,%d,%d,%d\n", i, lo, lo + int(len), sizes[1 + int(5 * rand())]
        }
    }'
}

printf '%-34s %10s %12s\n' "command" "wall" "peak RSS"
for l in 1000 3000 10000; do
    row "compile mlp, $l layers" "$lumen" compile mlp --layers "$(layers "$l")"
done
for b in 24 96 400; do
    row "compile transformer, $b blocks" "$lumen" compile transformer --layers "$b"
done
for spec in "10000 1000" "30000 1000" "100000 1000"; do
    set -- $spec
    csv "$1" "$2" > "$tmp/p.csv"
    row "plan-slab $1 buffers, ~$2 live" "$lumen" plan-slab "$tmp/p.csv"
done
