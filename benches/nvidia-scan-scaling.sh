#!/usr/bin/env bash
# Benchmark: where a many-core `katlas isa scan` of one NVIDIA library spends its time.
# cuobjdump -res-usage beside katlas at --jobs 1, 2, 4, 8 and all cores (wall, CPU, faults,
# context switches, 3 runs each), the library alone (examples/scan, no manifest written)
# beside the CLI, and, when perf is installed, a profile with a 20 ms timeline of how many
# threads had work (a slice with one thread is time that did not run in parallel).
#
#   benches/nvidia-scan-scaling.sh [--katlas BIN] [--scan BIN] [LIB]
#
# BIN defaults: target/release/katlas and target/profiling/examples/scan (built here when absent:
# `cargo build --profile profiling -p katlas-isa --example scan` keeps symbols for perf).
# Default library: libcublasLt.so.13 of the nvidia-cublas wheel (scripts/fetch-fixtures).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${KATLAS_FIXTURES:-$ROOT/.cache/fixtures}"
K="" S="" LIB=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --katlas) K=$2; shift 2;;
    --scan) S=$2; shift 2;;
    *) LIB=$1; shift;;
  esac
done
[[ -n $K ]] || { (cd "$ROOT" && cargo build -q --release -p katlas) && K="$ROOT/target/release/katlas"; }
[[ -n $S ]] || { (cd "$ROOT" && cargo build -q --profile profiling -p katlas-isa --example scan) && S="$ROOT/target/profiling/examples/scan"; }
[[ -n $LIB ]] || LIB="$CACHE/pypi/cublas/nvidia/cu13/lib/libcublasLt.so.13"
CUOBJDUMP=$(command -v cuobjdump || echo "$CACHE/pypi/cuobjdump/nvidia/cu13/bin/cuobjdump")
for f in "$K" "$S" "$LIB" "$CUOBJDUMP"; do [[ -f $f ]] || { echo "missing $f" >&2; exit 3; }; done
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
echo "$(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(lscpu | sed -n 's/^Model name: *//p'), $LIB ($(stat -c %s "$LIB") bytes)"
cat "$LIB" > /dev/null
run() {
  local label=$1; shift
  for _ in 1 2 3; do
    /usr/bin/time -f "$label wall=%e user=%U sys=%S maxrss_kb=%M minflt=%R vcsw=%w ivcsw=%c" "$@" 2>&1 >/dev/null | tail -1
  done
}
run cuobjdump "$CUOBJDUMP" -res-usage "$LIB"
all=$(nproc)
for j in 1 2 4 8 "$all"; do
  ((j <= all)) || continue
  run "katlas-j$j" "$K" isa scan --disasm never --no-cache --jobs "$j" --output "$WORK/m.json" "$LIB"
done
python3 -c "import json,sys; print('scan itself (manifest summary.elapsed_ms):', json.load(open(sys.argv[1]))['summary']['elapsed_ms'], 'ms')" "$WORK/m.json"
for j in 1 "$all"; do run "library-j$j" "$S" --jobs "$j" "$LIB"; done
if command -v perf >/dev/null; then
  perf record -q -F 4999 -o "$WORK/p.data" -- "$S" --jobs "$all" "$LIB" > /dev/null 2>&1
  perf report -i "$WORK/p.data" --sort sym --stdio 2>/dev/null | grep -v '^#' | grep . | head -30
  perf script -i "$WORK/p.data" -F tid,time,sym 2>/dev/null | python3 "$ROOT/benches/perf_timeline.py"
else
  echo "no perf: timeline skipped"
fi
