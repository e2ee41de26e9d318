#!/usr/bin/env bash
# Ingest benchmark for katlas-collect's streaming parsers (results: docs/PERF.md).
#
# Generates, into .cache/bench/ (git-ignored, never committed), by scaling the
# real samples in fixtures/:
#   - torch_1g.json     : the H200 torch.profiler trace's traceEvents repeated to ~1 GB
#   - rocprof_10m.csv   : the rocprofv3 kernel trace's rows repeated to 10,000,000 rows
# then times `katlas parse` on each (release build) with /usr/bin/time -v
# (wall, max RSS), three times, and the peers (Python's csv module summing the
# same column; Python json.load on a 128 MB slice of the trace) once each.
#
# Usage: [KATLAS_BIN=path/to/release/katlas] benches/ingest.sh [--reps N]   (needs python3, /usr/bin/time, cargo)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FIX="$ROOT/fixtures"
OUT="$ROOT/.cache/bench"
REPS=3
[[ "${1:-}" == "--reps" ]] && REPS="$2"
mkdir -p "$OUT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
# KATLAS_BIN: an already built release binary (skips the build).
if [[ -n "${KATLAS_BIN:-}" ]]; then
  KATLAS="$KATLAS_BIN"
else
  ( cd "$ROOT" && cargo build --release -q -p katlas )
  KATLAS="$CARGO_TARGET_DIR/release/katlas"
fi

python3 - "$FIX" "$OUT" <<'PY'
import gzip, os, sys
fix, out = sys.argv[1], sys.argv[2]
# --- torch trace: repeat the traceEvents body to ~1 GiB (and a 128 MiB slice for the peer)
src = gzip.open(os.path.join(fix, "h200/torch_llama_decode_trace.json.gz"), "rt").read()
start = src.index('"traceEvents": [') + len('"traceEvents": [')
end = src.rindex("]", 0, src.index('"traceName"'))
head, body, tail = src[:start], src[start:end].rstrip().rstrip(","), src[end:]
for name, target in (("torch_1g.json", 1 << 30), ("torch_128m.json", 128 << 20)):
    p = os.path.join(out, name)
    if os.path.exists(p) and os.path.getsize(p) >= target:
        continue
    reps = target // len(body) + 1
    with open(p + ".tmp", "w") as f:
        f.write(head)
        for i in range(reps):
            if i:
                f.write(",")
            f.write(body)
        f.write(tail)
    os.replace(p + ".tmp", p)
# --- rocprofv3 kernel trace: 10M rows with advancing timestamps
p = os.path.join(out, "rocprof_10m.csv")
if not os.path.exists(p):
    lines = open(os.path.join(fix, "rocprofv3/kernel_trace.csv")).read().splitlines()
    header = lines[0]
    # columns by name; the kernel name holds commas inside quotes, so re-split around it
    import csv, io
    rows = list(csv.reader(io.StringIO("\n".join(lines[1:]))))
    cols = next(csv.reader([header]))
    si, ei, di = cols.index("Start_Timestamp"), cols.index("End_Timestamp"), cols.index("Dispatch_Id")
    span = max(int(r[ei]) for r in rows) - min(int(r[si]) for r in rows) + 1000
    base = min(int(r[si]) for r in rows)
    n, target = 0, 10_000_000
    with open(p + ".tmp", "w", newline="") as f:
        f.write(header + "\n")
        block = 0
        while n < target:
            buf = io.StringIO()
            bw = csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
            for _ in range(10000):
                for r in rows:
                    if n >= target:
                        break
                    r2 = list(r)
                    off = block * span
                    r2[si] = str(int(r[si]) + off)
                    r2[ei] = str(int(r[ei]) + off)
                    r2[di] = str(n + 1)
                    bw.writerow(r2)
                    n += 1
                block += 1
            f.write(buf.getvalue())
    os.replace(p + ".tmp", p)
PY

measure() { # label, command...
  local label=$1; shift
  local log; log=$(mktemp)
  /usr/bin/time -v "$@" >/dev/null 2>"$log" || { cat "$log"; return 1; }
  local wall rss
  wall=$(grep 'Elapsed (wall clock)' "$log" | awk '{print $NF}' | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rss=$(grep 'Maximum resident set size' "$log" | awk '{print $NF}')
  echo "$label wall_s=$wall max_rss_kb=$rss"
  rm -f "$log"
}

T1G="$OUT/torch_1g.json"; R10="$OUT/rocprof_10m.csv"; T128="$OUT/torch_128m.json"
echo "# $(date -u +%FT%TZ) $(uname -srm) $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# sizes: torch_1g.json $(stat -c %s "$T1G") B; rocprof_10m.csv $(stat -c %s "$R10") B ($(($(wc -l <"$R10") - 1)) rows); torch_128m.json $(stat -c %s "$T128") B"
for i in $(seq "$REPS"); do
  measure "katlas torch-trace 1g #$i" "$KATLAS" parse torch-trace "$T1G" --format json
  measure "katlas rocprofv3-kernel-trace 10m #$i" "$KATLAS" parse rocprofv3-kernel-trace "$R10" --format json
done
measure "katlas torch-trace 128m" "$KATLAS" parse torch-trace "$T128" --format json
measure "peer python json.load 128m" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sum(e.get('dur',0) for e in d['traceEvents'] if e.get('cat')=='kernel'))" "$T128"
measure "peer python csv 10m" python3 -c "
import csv,sys
r=csv.reader(open(sys.argv[1])); h=next(r); s=h.index('Start_Timestamp'); e=h.index('End_Timestamp'); k=h.index('Kernel_Name'); t={}
for row in r: t[row[k]]=t.get(row[k],0)+int(row[e])-int(row[s])
print(t)" "$R10"
