#!/usr/bin/env bash
# katlas build of every kernel of the bundled hipfire tree (fixtures/hipfire-tree) for the
# preset's matrix (compile-kernels.sh's default ARCHS), with the HIP headers of
# scripts/fetch-hip-headers and clang-22, then a per-atom table and every failure grouped by the
# compiler's message. The suite compiles a sample (crates/katlas-build/tests/it/build_hipfire.rs,
# which also proves the planned jobs equal the script's); this runs all of them (issue 13.6).
#
# Usage: benches/hipfire-build-matrix.sh [--jobs N] [--out DIR]   (KATLAS_BIN: katlas to run)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
JOBS=$(nproc); OUT=""
while (($#)); do case $1 in --jobs) JOBS=$2; shift 2;; --out) OUT=$2; shift 2;; *) echo "unknown argument $1" >&2; exit 2;; esac; done
K=${KATLAS_BIN:-$ROOT/target/release/katlas}
[[ -x $K ]] || { echo "no katlas at $K: cargo build --release -p katlas, or set KATLAS_BIN" >&2; exit 3; }
command -v clang-22 >/dev/null || { echo "clang-22 is missing: run scripts/fetch-build-tools" >&2; exit 3; }
HDR=${KATLAS_HIP_HEADERS:-$ROOT/.cache/hip-headers}
[[ -d $HDR ]] || { echo "HIP headers are missing at $HDR: run scripts/fetch-hip-headers" >&2; exit 3; }
P=${OUT:-$(mktemp -d)}
mkdir -p "$P"
for sub in kernels scripts crates; do cp -r "$ROOT/fixtures/hipfire-tree/$sub" "$P/"; done
printf '[project]\npreset = "hipfire"\n\n[build]\nhip_compiler = "clang"\n' > "$P/katlas.toml"
start=$(date +%s)
set +e
(cd "$P" && KATLAS_YES=1 KATLAS_HIP_HEADERS="$HDR" "$K" build --jobs "$JOBS" --no-mix --format json > build.json 2> build.err)
rc=$?
set -e
echo "katlas build exit $rc after $(( $(date +%s) - start )) s ($JOBS jobs); report: $P/build.json"
python3 - "$P/build.json" <<'PY'
import collections, json, re, sys
r = json.load(open(sys.argv[1]))
per = collections.defaultdict(collections.Counter)
fails = collections.defaultdict(list)
for j in r["jobs"]:
    per[j["atom"]][j["status"]] += 1
    if j["status"] == "failed":
        m = re.search(r"error: (.*)", j.get("message") or "")
        fails[m.group(1) if m else (j.get("message") or "").splitlines()[0]].append(f'{j["atom"]} {j["file"]}')
statuses = sorted({s for c in per.values() for s in c})
print("| atom | " + " | ".join(statuses) + " |")
print("|---|" + "---:|" * len(statuses))
for a in r["matrix"]:
    print(f"| {a} | " + " | ".join(str(per[a][s]) for s in statuses) + " |")
print("summary:", json.dumps(r["summary"]))
for msg, where in sorted(fails.items(), key=lambda kv: -len(kv[1])):
    print(f"\n{len(where)} failed: {msg}")
    for w in where:
        print("   ", w)
PY
