#!/usr/bin/env bash
# Query-index benchmark (results: docs/PERF.md, "Query index").
#
# Generates, under .cache/bench/ (git-ignored), projects of N rows copied from the real
# hipfire rows of fixtures/hipfire/atlas_rows_v0.jsonl (new ids, capture times, jittered
# numbers; 10,000 rows per host-day file), then with a release build times
#   - index rebuild (rows/s) against katlas's JSONL reader over the same files,
#   - a per-kernel aggregate with a fresh index (open + freshness check + query) against the
#     same aggregate computed from the JSONL files.
#
# Usage: benches/index.sh [ROWS...]   (default: 10000 1000000)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/.cache/bench"
mkdir -p "$OUT"
cd "$ROOT"
cargo build --release -q -p katlas-store --example bench_index
for n in "${@:-10000 1000000}"; do
  for rows in $n; do
    reps=5; [[ $rows -ge 1000000 ]] && reps=1
    "$ROOT/target/release/examples/bench_index" "$rows" "$OUT/index-$rows" "$reps"
  done
done
