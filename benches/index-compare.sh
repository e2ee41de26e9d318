#!/usr/bin/env bash
# Index rebuild, two builds of bench_index alternating on the same files (results: docs/PERF.md,
# "Query index"). What the H200 box's runs did, with the binaries carried there:
#
#   benches/index-compare.sh NEW_BIN PEER_BIN [ROWS...]      (default ROWS: 100000 1000000)
#
# NEW_BIN/PEER_BIN: `target/release/examples/bench_index` of two commits (build each with
# `cargo build --release -p katlas-store --example bench_index`). First the 10,000-row per-kernel
# aggregate with a fresh index (peer first, files older than the freshness check's 2 s racy
# window), then 3 rebuild-only runs of each at every ROWS, alternating, under /usr/bin/time.
# The rows are the real hipfire rows of fixtures/hipfire/atlas_rows_v0.jsonl (KATLAS_BENCH_FIXTURE
# names it on a machine the binaries were carried to).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NEW=$1 PEER=$2; shift 2
export KATLAS_BENCH_FIXTURE="${KATLAS_BENCH_FIXTURE:-$ROOT/fixtures/hipfire/atlas_rows_v0.jsonl}"
D="${KATLAS_BENCH_DIR:-$ROOT/.cache/bench}/compare"
echo "$(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(lscpu | sed -n 's/^Model name: *//p')"
"$NEW" 10000 "$D/i10000" 1 rebuild-only > /dev/null
sleep 3
for b in "$PEER" "$NEW"; do echo "== $b 10000 full"; "$b" 10000 "$D/i10000" 5 | grep -E "aggregate \(|rebuild:"; done
for n in "${@:-100000 1000000}"; do
  for rows in $n; do
    "$NEW" "$rows" "$D/i$rows" 1 rebuild-only > /dev/null   # writes the rows once
    for r in 1 2 3; do
      for b in "$NEW" "$PEER"; do
        echo "== $b $rows run $r"
        /usr/bin/time -f "wall=%e user=%U sys=%S maxrss_kb=%M" "$b" "$rows" "$D/i$rows" 1 rebuild-only 2>&1 | grep -v "^rows"
      done
    done
  done
done
