#!/usr/bin/env bash
# One batched H200 session: the whole lab (check + time every variant, one launch per event
# pair), the 4-bit and bf16 GEMVs again with 20 launches per event pair, the PyTorch peers timed
# both ways, and ncu on chosen kernels. Run from the repo root on the device with the release
# binary in .devbin/. At most 8 files come back, so cubins travel as one tarball.
set -uo pipefail
: "${OUT:=/tmp/out}"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=.devbin/katlas-lab
NCU_VARIANTS="${NCU_VARIANTS:-xp_t8}"
BATCH_VARIANTS="${BATCH_VARIANTS:-r1|r4|r2_sk2_h2|xr|xr_h2|xq|xs|xs_u|xp|xp_t8|xp8|bulk_r2}"
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv; } > "$OUT/env.txt" 2>&1
run() {
  local tag=$1; shift
  echo "== $tag: $*" | tee -a "$OUT/lab.err" >> "$OUT/lab.txt"
  timeout 240 $B --backend cuda "$@" --rows-out "/tmp/rows_$tag.jsonl" --out-dir /tmp/cubins >> "$OUT/lab.txt" 2>> "$OUT/lab.err"
  echo "== $tag exit $?" | tee -a "$OUT/lab.txt" >> "$OUT/lab.err"
}
run all
run batch20 --kernel 'gemv_hfq4g256$|gemv_bf16' --variant "$BATCH_VARIANTS|r2|r2_sk2" --batch 20 --samples 60
run flush --kernel 'gemv_hfq4g256$' --variant 'r1|xq|xp|xp_t8' --shapes 4096x4096,28672x8192 --l2-flush --samples 50
cat /tmp/rows_*.jsonl > "$OUT/rows.jsonl" 2>/dev/null
tar czf "$OUT/cubins.tgz" -C /tmp cubins 2>/dev/null
if [[ "${SKIP_PEERS:-0}" != 1 ]]; then
  PYTHONUNBUFFERED=1 timeout 200 python3 lab/peers/torch_peers.py "$OUT/peers.json" > "$OUT/peers.txt" 2>&1
fi
for v in $NCU_VARIANTS; do
  for sh in 28672x8192 4096x4096; do
    timeout 120 ncu --clock-control none -k "regex:gemv_hfq4g256_" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
      $B --backend cuda --kernel 'gemv_hfq4g256$' --variant "$v" --shapes $sh --samples 3 --warmup 0 --out-dir /tmp/ncu_cubins >> "$OUT/ncu.txt" 2>&1
  done
done
grep -h "^KATLAS_METRIC\|^== " "$OUT/lab.txt" | awk '{print $2,$3,$4,$6,$8,$10,$14,$15}' | sed 's/shape=//;s/variant=//;s/median_us=//;s/copy_pct=//;s/achieved_gbps=//;s/check=//;s/max_rel=//' | grep -E "xs|xp|xq |xr_h2 |^[a-z0-9]+:|r1 " | tail -n 150
grep -h "error\|FAIL\|exit" "$OUT/lab.err" | head -20
head -14 "$OUT/peers.txt" 2>/dev/null
grep -E "^  gemv|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per" "$OUT/ncu.txt" | head -24
