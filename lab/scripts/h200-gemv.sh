#!/usr/bin/env bash
# The 4-bit GEMV refresh on the H200 (one device call): every 4-bit variant checked and timed
# one launch per event pair and 20 launches per event pair, the read-only ceilings at the same
# byte counts (best of several read kernels, and the driver's memcpy of the same bytes), the
# PyTorch peers timed both ways, and ncu on the best variant. Run from the repo root with the
# release binary in .devbin/; results under $OUT.
set -uo pipefail
: "${OUT:=/tmp/out}"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=.devbin/katlas-lab
BEST="${BEST:-x8_t8_st_b}"
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv; } > "$OUT/env.txt" 2>&1
run() {
  local tag=$1; shift
  echo "== $tag: $*" | tee -a "$OUT/lab.err" >> "$OUT/lab.txt"
  timeout 280 $B --backend cuda "$@" --rows-out "/tmp/rows_$tag.jsonl" --out-dir /tmp/cubins >> "$OUT/lab.txt" 2>> "$OUT/lab.err"
  echo "== $tag exit $?" | tee -a "$OUT/lab.txt" >> "$OUT/lab.err"
}
run all --kernel 'gemv_hfq4g256|gemv_bf16' --read-ceilings
run batch20 --kernel 'gemv_hfq4g256$|gemv_bf16' --variant 'r1|r2|r4|r2_sk2|r2_sk2_h2|xr_h2|xq|xs_u|xp|xp_t8|xp_t8_st|xp_t8_st_b|x8_t8_b|x8_t8_st_b|x8_t4_st_b|x8_t16_st_b' --batch 20 --samples 60 --read-ceilings
cat /tmp/rows_*.jsonl | gzip > "$OUT/rows.jsonl.gz"
PYTHONUNBUFFERED=1 timeout 200 python3 lab/peers/torch_peers.py "$OUT/peers.json" > "$OUT/peers.txt" 2>&1
for sh in 28672x8192 4096x4096; do
  timeout 120 ncu --clock-control none -k "regex:gemv_hfq4g256_" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
    $B --backend cuda --kernel 'gemv_hfq4g256$' --variant "$BEST" --shapes $sh --samples 3 --warmup 0 --out-dir /tmp/ncu_cubins >> "$OUT/ncu.txt" 2>&1
done
grep -h "read ceiling\|copy " "$OUT/lab.err"
grep -h "^KATLAS_METRIC" "$OUT/lab.txt" | grep -E "variant=($BEST|xp_t8) " | awk '{print $2,$3,$4,$6,$13,$14,$15}'
grep -h "error\|FAIL\|exit" "$OUT/lab.err" | head -20
head -14 "$OUT/peers.txt" 2>/dev/null
grep -E "^  gemv|DRAM Throughput|Duration|Achieved Occupancy|Registers Per" "$OUT/ncu.txt" | head -12
