#!/usr/bin/env bash
# Runs `lumen run MODEL` N times without a tuning cache and N times with one, and prints how
# many distinct candidates the search picked and how many distinct LLIR_DUMP_DIR dump sets the
# runs wrote (1 and 1 when the choice is stable), how many cached runs skipped the search, and
# the search's share of each run's time (the report's own phase table, and the whole process's
# wall time measured here).
#
#   scripts/search-stability.sh [N] [MODEL]      (defaults: 20, data/digits_mlp.safetensors)
#
# The binary is $LUMEN, else ${CARGO_TARGET_DIR:-target}/release/lumen (`cargo build --release`
# first). Exit status 1 when the picks or the dumps differ between runs.
set -euo pipefail

n=${1:-20}
model=${2:-data/digits_mlp.safetensors}
lumen=${LUMEN:-${CARGO_TARGET_DIR:-target}/release/lumen}
if [[ ! -x $lumen ]]; then
    echo "error: no lumen binary at $lumen (cargo build --release, or set LUMEN)" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The runs must not see a cache from the caller's environment.
unset LUMEN_TUNING_CACHE LUMINAL_LOG_LLIR

# median of the numbers on stdin, one a line
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# min and max of the numbers on stdin
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo " .. " hi}'; }
# milliseconds of a phase-table time cell (`36.222 ms`, `74.1 us`, `1.2 s`)
to_ms() { awk '{v = $1; u = $2; if (u == "us") v /= 1000; else if (u == "s") v *= 1000; print v}'; }

# run MODE I [FLAGS...]: one run, its dumps in $work/MODE/I, its text report in $work/MODE/I.txt,
# its wall time (ms) appended to $work/MODE.wall
run() {
    local mode=$1 i=$2
    shift 2
    mkdir -p "$work/$mode/$i"
    local t0 t1
    t0=$(date +%s%N)
    LLIR_DUMP_DIR="$work/$mode/$i" "$lumen" run "$model" "$@" >"$work/$mode/$i.txt"
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000))" | awk '{print $1 / 1000}' >>"$work/$mode.wall"
}

# summary MODE: the pick, dump-set and share lines of one mode's runs
summary() {
    local mode=$1
    local picks dumps
    picks=$(for i in $(seq "$n"); do
        sed -n 's/^program    \([^ ]*\) on .*/\1/p' "$work/$mode/$i.txt"
    done | sort | uniq -c | awk '{printf "%s%s x %s", (NR > 1 ? ", " : ""), $1, $2}')
    dumps=$(for i in $(seq "$n"); do
        (cd "$work/$mode/$i" && sha256sum -- * | sha256sum | cut -c1-16)
    done | sort -u | wc -l)
    local search_ms total_ms
    search_ms=$(for i in $(seq "$n"); do
        awk '$1 == "search" && $2 ~ /^[0-9]+$/ {print $3, $4}' "$work/$mode/$i.txt" | to_ms
    done)
    total_ms=$(for i in $(seq "$n"); do
        awk '$1 == "total" {print $2, $3}' "$work/$mode/$i.txt" | to_ms
    done)
    local share wall_share
    share=$(paste <(echo "$search_ms") <(echo "$total_ms") | awk '{printf "%.1f\n", 100 * $1 / $2}')
    wall_share=$(paste <(echo "$search_ms") "$work/$mode.wall" | awk '{printf "%.1f\n", 100 * $1 / $2}')
    echo "  picks:            $picks"
    echo "  dump sets:        $dumps distinct of $n"
    echo "  search:           median $(echo "$search_ms" | median) ms ($(echo "$search_ms" | range))"
    echo "  run (phases):     median $(echo "$total_ms" | median) ms; search share median $(echo "$share" | median)% ($(echo "$share" | range))"
    echo "  process (wall):   median $(median <"$work/$mode.wall") ms; search share median $(echo "$wall_share" | median)% ($(echo "$wall_share" | range))"
    [[ $(echo "$picks" | tr ',' '\n' | wc -l) -eq 1 && $dumps -eq 1 ]]
}

echo "lumen run $model, $n runs each ($lumen)"
for i in $(seq "$n"); do run nocache "$i"; done
echo "without a tuning cache:"
stable=0
summary nocache || stable=1

cache="$work/tuning.json"
for i in $(seq "$n"); do run cache "$i" --tuning-cache "$cache"; done
skipped=$(grep -l '^search     skipped: the tuning cache ' "$work"/cache/*.txt | wc -l)
echo "with a tuning cache (--tuning-cache):"
summary cache || stable=1
echo "  searches skipped: $skipped of $n"
exit $stable
