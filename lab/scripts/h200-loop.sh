#!/usr/bin/env bash
# The whole katlas loop on the H200, in one device call:
#   collect → isa scan → fit → suggest → task → eval (one lever promoted, one rejected) → ledger → suggest again.
# Run from the repository root with release binaries in .devbin/ (katlas, katlas-lab); writes to $OUT.
set -uo pipefail
ROOT=$PWD
K=$ROOT/.devbin/katlas
L=$ROOT/.devbin/katlas-lab
O=${OUT:-/tmp/katlas-loop-out}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NO_COLOR=1
P=/tmp/katlas-loop
rm -rf "$P" && mkdir -p "$P" && cd "$P"
git init -q -b main && "$K" init >/dev/null && cp -r "$ROOT/workloads" . \
  && git add -A && git -c user.email=lab@katlas -c user.name=lab commit -qm "lab project"
run() { local out=$1; shift; printf '\n$ katlas %s\n' "$*" | tee -a "$O/loop.log"; "$K" "$@" > "$O/$out" 2>&1; local rc=$?; tail -n 40 "$O/$out" >> "$O/loop.log"; echo "[exit $rc]" | tee -a "$O/loop.log"; return 0; }
SHAPE=28672x8192

# 1. collect the baseline variants (fresh process, checked and event-timed, rows into the corpus)
run 01-collect.txt collect lab-decode --set binary="$L" --set "variant=r1|r2" --set shapes=$SHAPE,4096x4096
row_of() { "$K" corpus ls --format json | python3 -c 'import json,sys,subprocess
rows=json.load(sys.stdin)["rows"]
for r in rows:
    if r["shape_bucket"]=="'$SHAPE'" and r["status"]=="ok":
        k=json.loads(subprocess.run(["'"$K"'","corpus","show",r["id"],"--format","json"],capture_output=True,text=True).stdout)["kernels"][0]["name"]
        if k=="'"$1"'": print(r["id"]); break'; }
ID=$(row_of gemv_hfq4g256_r1)
ID2=$(row_of gemv_hfq4g256_r2)
KERNEL=gemv_hfq4g256_r1
echo "rows: r1 $ID, r2 $ID2" | tee -a "$O/loop.log"

# 2. the compiled code objects of that run
CUBINS=$(ls -d .katlas/runs/*/cubins | head -1)
run 02-isa.txt isa scan "$CUBINS" --output "$P/isa.json"
ISA=(); [ -s "$P/isa.json" ] && ISA=(--isa "$P/isa.json")

# 3. fit, suggest, task
run 03-fit.md fit "$ID" "${ISA[@]}" --product "NVIDIA H200" --format markdown
run 04-suggest.md suggest "$ID" "${ISA[@]}" --product "NVIDIA H200" --format markdown
run 05-task.txt task --rank 1
cp .katlas/tasks/*/TASK.md "$O/05-TASK.md" 2>/dev/null

# 4. eval two one-lever candidates against the baseline variant, fresh processes, interleaved
B="$L --backend cuda --kernel gemv_hfq4g256\$ --shapes $SHAPE --samples 50 --format table"
COMMON=(--metric median_us --goal minimize --kernel "$KERNEL" --phase decode --shape "$SHAPE" --quant hfq4g256
        --product "NVIDIA H200" --bytes-key bytes --time-key median_us --max-runs 12 --warmups 1)
run 06-eval-multirow.txt eval --baseline "$B --variant r1" --candidate "$B --variant r4" "${COMMON[@]}" \
  --lever multirow_gemv --hypothesis "4 rows per warp reuse x from registers and amortise the reduction" \
  --mechanism "rows per warp 1 -> 4"
run 07-eval-ksplit.txt eval --baseline "$B --variant r1" --candidate "$B --variant r1_sk4" "${COMMON[@]}" \
  --lever k_split --hypothesis "splitting K 4 ways adds parallelism on a 28672-row GEMV" \
  --mechanism "split-K 4 with atomic partial sums"
# The queue's top lever for the R=2 kernel: 16-byte loads, nothing else changed (f32 dequant both sides).
run 07b-suggest-r2.md suggest "$ID2" "${ISA[@]}" --product "NVIDIA H200" --format markdown
COMMON[5]=gemv_hfq4g256_r2
run 07c-eval-wideloads.txt eval --baseline "$B --variant r2" --candidate "$B --variant r2_v16" "${COMMON[@]}" \
  --lever wide_loads --hypothesis "16-byte loads move four times the bytes per load instruction" \
  --mechanism "4-byte -> 16-byte weight loads over 272-byte group pairs"

# 5. the ledger, and the queue again (the rejected lever must drop and show its verdict)
run 08-ledger.md ledger ls --format markdown
run 09-suggest-after.md suggest "$ID" "${ISA[@]}" --product "NVIDIA H200" --format markdown
run 10-suggest-r2-after.md suggest "$ID2" "${ISA[@]}" --product "NVIDIA H200" --format markdown
run 10-suggest-r2-after.json suggest "$ID2" "${ISA[@]}" --product "NVIDIA H200" --format json
echo done | tee -a "$O/loop.log"
# The device tool returns at most 8 files: everything goes back as one archive, plus the log and ledger.
mkdir -p "$O/project" && cp -r .katlas/corpus .katlas/evals .katlas/tasks isa.json "$O/project/" 2>/dev/null
cp "$O/loop.log" /tmp/loop.log
(cd "$O" && tar czf /tmp/loop.tgz . && find . -mindepth 1 -delete)
mv /tmp/loop.tgz /tmp/loop.log "$O/" && cp .katlas/ledger.jsonl "$O/ledger.jsonl"
