#!/usr/bin/env bash
# Benchmark: `katlas isa scan` (metadata, manifest written) against `cuobjdump -res-usage` on the
# same NVIDIA libraries, in the same run, alternating, median of R runs each; then every function
# of the katlas manifest is compared with cuobjdump's output (scripts/device/res-usage-compare.py).
#
#   benches/nvidia-scan.sh [--runs R] [--katlas BIN] [--cuobjdump BIN] [LIB...]
#
# Default library: libcublasLt.so.13 of the nvidia-cublas 13.1.0.3 wheel (scripts/fetch-fixtures).
# On the H200 box the lead runs .devbin/dev16-speed.sh, which calls this script on the image's
# libraries with the carried katlas binary. Prints one markdown row per library for docs/PERF.md.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${KATLAS_FIXTURES:-$ROOT/.cache/fixtures}"
RUNS=3 KATLAS="" CUOBJDUMP="${KATLAS_CUOBJDUMP:-}" LIBS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2;;
    --katlas) KATLAS=$2; shift 2;;
    --cuobjdump) CUOBJDUMP=$2; shift 2;;
    *) LIBS+=("$1"); shift;;
  esac
done
if [[ -z $KATLAS ]]; then
  (cd "$ROOT" && cargo build -q --release -p katlas)
  KATLAS="$ROOT/target/release/katlas"
fi
[[ -n $CUOBJDUMP ]] || CUOBJDUMP=$(command -v cuobjdump || echo "$CACHE/pypi/cuobjdump/nvidia/cu13/bin/cuobjdump")
((${#LIBS[@]})) || LIBS=("$CACHE/pypi/cublas/nvidia/cu13/lib/libcublasLt.so.13")
for f in "$KATLAS" "$CUOBJDUMP" "${LIBS[@]}"; do [[ -f $f ]] || { echo "missing $f (scripts/fetch-fixtures)" >&2; exit 3; }; done
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
wall() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); awk "BEGIN {print $t1 - $t0}"; }
echo "$(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), katlas $("$KATLAS" --version 2>/dev/null | head -1), $("$CUOBJDUMP" --version | tail -1)"
echo
echo "| library | MB | functions | katlas s (median of $RUNS) | cuobjdump -res-usage s | ratio | fields disagreeing |"
echo "|---|---:|---:|---:|---:|---:|---|"
for lib in "${LIBS[@]}"; do
  k=() c=()
  # A library katlas refuses (no device code) must not be compared with the previous manifest.
  rm -f "$WORK/m.json"
  for r in $(seq "$RUNS"); do
    c+=("$(wall sh -c "\"$CUOBJDUMP\" -res-usage \"$lib\" > \"$WORK/res.txt\"")")
    k+=("$(wall sh -c "\"$KATLAS\" isa scan --disasm never --no-cache --output \"$WORK/m.json\" \"$lib\" > /dev/null")")
  done
  km=$(printf '%s\n' "${k[@]}" | median); cm=$(printf '%s\n' "${c[@]}" | median)
  if [[ ! -s $WORK/m.json ]]; then
    printf '| %s | — | 0 | refused (no code object) | %.2f | — | — |\n' "$(basename "$lib")" "$cm"
    continue
  fi
  cmp=$(python3 "$ROOT/scripts/device/res-usage-compare.py" "$WORK/m.json" "$WORK/res.txt")
  n=$(echo "$cmp" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["functions_compared"])')
  bad=$(echo "$cmp" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["mismatches"] or "none")')
  printf '| %s | %.0f | %s | %.2f (%s) | %.2f (%s) | %.1f× | %s |\n' "$(basename "$lib")" "$(awk "BEGIN {print $(stat -c %s "$lib") / 1000000}")" "$n" \
    "$km" "$(printf '%.2f ' "${k[@]}")" "$cm" "$(printf '%.2f ' "${c[@]}")" "$(awk "BEGIN {print $cm / $km}")" "$bad"
  [[ -n ${COMPARE_DIR:-} ]] && echo "$cmp" > "$COMPARE_DIR/$(basename "$lib").compare.json"
done
