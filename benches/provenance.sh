#!/usr/bin/env bash
# Provenance benchmark on the real hipfire tree (fixtures/hipfire-tree): `katlas provenance`
# for the 158 kernel names hipfire's profiler records (the `begin_timer(.., "NAME", ..)`
# literals under crates/), release build, one process for all names.
#
# Copies kernels/, crates/ and scripts/ of the tree into a temporary directory (removed on exit)
# with a katlas.toml using `preset = "hipfire"`, extracts the names independently of katlas (python
# regex), then times, REPS times each, and prints the median wall time:
#   names  : katlas provenance NAME1 … NAME158 --arch gfx1100 --format json
#   all    : katlas provenance --all-profiled --arch gfx1100 --format json
#   old    : (KATLAS_OLD_BIN=path) an older katlas on the same names, for comparison
#   peer   : (--peer) hipfire's own scripts/kernel_atlas.py collect_dispatch_manifest, once
#
# Usage: [KATLAS_BIN=path] [KATLAS_OLD_BIN=path] benches/provenance.sh [--reps N] [--peer]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TREE="$ROOT/fixtures/hipfire-tree"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/katlas-bench-provenance.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
REPS=5
PEER=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --peer) PEER=1; shift ;;
    *) echo "usage: benches/provenance.sh [--reps N] [--peer]" >&2; exit 2 ;;
  esac
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [[ -n "${KATLAS_BIN:-}" ]]; then
  KATLAS="$(realpath "$KATLAS_BIN")"
else
  ( cd "$ROOT" && cargo build --release -q -p katlas )
  KATLAS="$CARGO_TARGET_DIR/release/katlas"
fi

cp -r "$TREE/kernels" "$TREE/crates" "$TREE/scripts" "$OUT/"
printf '[project]\npreset = "hipfire"\nkernel_roots = ["kernels/src"]\ndispatch_roots = ["crates"]\n' > "$OUT/katlas.toml"

python3 - "$OUT" "$KATLAS" "$REPS" "$PEER" "$( [[ -n "${KATLAS_OLD_BIN:-}" ]] && realpath "$KATLAS_OLD_BIN" )" <<'PY'
import os, re, statistics, subprocess, sys, time
out, katlas, reps, peer, old = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
names = set()
for dp, _, fs in os.walk(os.path.join(out, "crates")):
    for f in fs:
        if f.endswith(".rs"):
            t = open(os.path.join(dp, f), encoding="utf-8", errors="replace").read()
            for m in re.finditer(r"begin_timer\s*\(([^;]*?)\)\s*;", t, re.S):
                lits = re.findall(r'"([^"\\]*)"', m.group(1))
                if len(lits) >= 2:
                    names.add(lits[1])
names = sorted(names)
print(f"{len(names)} profiled kernel names; {reps} runs each; median wall seconds")

def timed(argv, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        r = subprocess.run(argv, cwd=out, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ts.append(time.perf_counter() - t)
        if r.returncode != 0:
            sys.exit(f"{argv[0]} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
    return statistics.median(ts), min(ts), max(ts)

common = ["--arch", "gfx1100", "--format", "json"]
# Sanity: the answers are real (158 kernels, most with a source), not an empty scan.
import json
res = json.loads(subprocess.run([katlas, "provenance", *names, *common], cwd=out, capture_output=True, check=True).stdout)
print(f"  katlas answers {len(res)} kernels, {sum(1 for r in res if r['sources'])} with a source, {sum(1 for r in res if r['dispatch'])} with a load")
for label, argv, n in [
    ("names", [katlas, "provenance", *names, *common], reps),
    ("all", [katlas, "provenance", "--all-profiled", *common], reps),
] + ([("old", [old, "provenance", *names, *common], max(1, min(reps, 3)))] if old else []):
    med, lo, hi = timed(argv, n)
    print(f"  {label:6} median {med:.3f} s  (min {lo:.3f}, max {hi:.3f}, {n} runs)")
if peer:
    code = ("import sys; sys.path.insert(0, 'scripts'); import kernel_atlas as k; "
            f"k.collect_dispatch_manifest(root='.', kernel_names={names!r}, arch='gfx1100')")
    med, _, _ = timed([sys.executable, "-c", code], 1)
    print(f"  peer   {med:.3f} s  (hipfire scripts/kernel_atlas.py collect_dispatch_manifest, 1 run)")
PY
