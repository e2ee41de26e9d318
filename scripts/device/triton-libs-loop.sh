#!/usr/bin/env bash
# Carry .thirdparty (liger-kernel 0.8.5 sdist: src/ and test/; flash-linear-attention v0.5.2: fla/fla, and its tests/ as fla-tests/tests) and
# .devbin (a stripped release katlas). Run from the repository root on the device: scripts/device/triton-libs-loop.sh liger|fla
# The katlas loop on third-party Triton kernels on the H200: collect (trace + Triton launch records),
# fit, provenance --package, suggest, then real candidate patches judged by katlas eval with the
# library's own tests as the correctness route. MODE=liger|fla; CANDS=a,b runs only those candidates.
set -u
MODE=${1:-liger}
R=$PWD; K=${KATLAS:-$R/.devbin/katlas}; W=/tmp/w; P=/tmp/proj
mkdir -p $W
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 KATLAS_YES=1
T0=$(date +%s)
pack() { (cd $W && tar czf $OUT/t30b-$MODE.tar.gz .) ; }
step() { echo "== $(( $(date +%s)-T0 ))s $*" | tee -a $W/steps.txt; }
{ command -v git; git --version; python3 -c "import pytest, xdist; print('pytest', pytest.__version__)"; } > $W/env.txt 2>&1
rm -rf $P && mkdir -p $P/third_party/python $P/scripts $P/workloads
cp -r .thirdparty/fla/fla $P/third_party/python/; [ $MODE = liger ] && cp -r .thirdparty/liger/src/liger_kernel $P/third_party/python/
cp scripts/triton_op_bench.py $P/scripts/; cp workloads/liger-rmsnorm.toml workloads/fla-chunk.toml $P/workloads/
cd $P && printf '.katlas/\n.tc/\n.tc-tests/\n__pycache__/\n' > .gitignore && git init -q && git -c user.email=k@k -c user.name=k add -A && git -c user.email=k@k -c user.name=k commit -qm "liger-kernel 0.8.5 and fla v0.5.2 as vendored copies"
unset PYTHONPATH
if [ $MODE = liger ]; then WL=liger-rmsnorm; KERN=_rms_norm_forward_kernel; PKG=liger_kernel; FILE=third_party/python/liger_kernel/ops/rms_norm.py
  TESTS=$R/.thirdparty/liger/test/transformers/test_rms_norm.py; TARGS="-n 8 -k 'test_correctness and not functional'"
else WL=fla-chunk; KERN=chunk_fwd_kernel_o; PKG=fla; FILE=third_party/python/fla/ops/common/chunk_o.py
  # The tests live apart from any fla/ copy: pytest puts a test's directory on sys.path, and an
  # fla/ beside it would be imported instead of the patched copy under test.
  # test_gdn.py's test_chunk also runs the backward, which fla itself refuses on Hopper with
  # Triton 3.4-3.7.0 (its issue #640): the forward-only kernel test is the check that can pass.
  TESTS=$R/.thirdparty/fla-tests/tests/ops/test_gdn_kernels.py; TARGS="-k test_chunk_fwd_o"; fi
(cd $P && eval "PYTHONPATH=third_party/python timeout 60 python3 -m pytest -q -p no:cacheprovider --collect-only $TESTS $TARGS" > $W/tests-collect.txt 2>&1; echo "collect-only rc=$?" >> $W/steps.txt)
step collect $WL
TRITON_CACHE_DIR=$P/.tc timeout 240 $K collect $WL --profile --format json > $W/collect.json 2> $W/collect.err; echo "rc=$?" >> $W/steps.txt
cp .katlas/corpus/*.jsonl $W/rows.jsonl 2>/dev/null; RD=$(ls -d .katlas/runs/*/ | tail -1); cp $RD/trace.json.gz $RD/triton-launches.jsonl $RD/stdout $W/ 2>/dev/null
step fit; timeout 60 $K fit $W/rows.jsonl --phase prefill --product "NVIDIA H200" > $W/fit.txt 2>&1
step provenance; PYTHONPATH=$P/third_party/python timeout 60 $K provenance $KERN --package $PKG > $W/provenance.txt 2>&1
step suggest; timeout 60 $K suggest $W/rows.jsonl --phase prefill --product "NVIDIA H200" > $W/suggest.txt 2>&1
step task; PYTHONPATH=$P/third_party/python timeout 60 $K task $W/rows.jsonl --phase prefill --kernel $KERN --package $PKG --tests $TESTS --tests-args "$TARGS" --metric kernel_us --format json > $W/task.json 2> $W/task.err; echo "rc=$?" >> $W/steps.txt
TASK=$(python3 -c "import json;print(json.load(open('$W/task.json'))['id'])" 2>>$W/steps.txt); cp .katlas/tasks/$TASK/TASK.md $W/ 2>/dev/null
pack
cand() { # name lever hypothesis python-edit
  local name=$1 lever=$2 hyp=$3 edit=$4
  if [ -n "${CANDS:-}" ] && [[ ",$CANDS," != *",$name,"* ]]; then return; fi
  if [ $(( $(date +%s)-T0 )) -gt ${BUDGET:-330} ]; then step "skip $name (time)"; return; fi
  step "candidate $name"
  git checkout -q -- . && python3 -c "$edit" && git diff --stat >> $W/steps.txt
  if [ -n "$TASK" ]; then
    timeout 300 $K eval $TASK -n 3 --warmups 1 --lever $lever --hypothesis "$hyp" --format json > $W/eval-$name.json 2> $W/eval-$name.err
  else
    timeout 300 $K eval --baseline HEAD --command "TRITON_CACHE_DIR=\$PWD/.tc PYTHONPATH=third_party/python $(python3 -c "import json;r=json.loads(open('$W/rows.jsonl').readline());print(' '.join(r['command']))")" --metric kernel_us --goal minimize --allowed "$FILE" -n 3 --warmups 1 --lever $lever --kernel $KERN --hypothesis "$hyp" --format json > $W/eval-$name.json 2> $W/eval-$name.err
  fi
  echo "rc=$?" >> $W/steps.txt; git diff > $W/patch-$name.diff; git checkout -q -- .; pack
}
ed() { printf 'import re,sys\np=%s\ns=open(p).read()\nassert %s in s, "anchor missing"\nopen(p,"w").write(s.replace(%s,%s,1))\n' "'$FILE'" "$1" "$1" "$2"; }
if [ $MODE = liger ]; then
  cand warps16 triton_tiles "num_warps 8 -> 16 for 4096-wide rows: more loads in flight per row" \
    "$(ed "'    BLOCK_SIZE, num_warps = calculate_settings(n_cols)\n\n    Y = torch.empty'" "'    BLOCK_SIZE, num_warps = calculate_settings(n_cols)\n    num_warps = 16 if BLOCK_SIZE >= 4096 else num_warps\n\n    Y = torch.empty'")"
  cand evict triton_eviction "stream X past L2 (evict_first) and keep the weight row (evict_last)" \
    "$(ed "'    X_row = tl.load(x_base + col_offsets, mask=mask, other=0)\n    X_row_dtype = X_row.dtype\n    if elementwise_affine:\n        W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)'" "'    X_row = tl.load(x_base + col_offsets, mask=mask, other=0, eviction_policy=\"evict_first\")\n    X_row_dtype = X_row.dtype\n    if elementwise_affine:\n        W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0, eviction_policy=\"evict_last\")'")"
else
  cand configs triton_autotune_space "add BK64/BV128 and BK128/BV64 4-warp configs for K=128, V=256 on sm_90" \
    "$(ed "'        triton.Config({\'BK\': 64, \'BV\': 64}, num_warps=4, num_stages=3),'" "'        triton.Config({\'BK\': 64, \'BV\': 64}, num_warps=4, num_stages=3),\n        triton.Config({\'BK\': 64, \'BV\': 128}, num_warps=4, num_stages=4),\n        triton.Config({\'BK\': 128, \'BV\': 64}, num_warps=4, num_stages=3),'")"
  cand stages2 triton_tiles "num_stages 3 -> 2 for the 128x128 8-warp config (less shared memory, more blocks per SM)" \
    "$(ed "'        triton.Config({\'BK\': 128, \'BV\': 128}, num_warps=8, num_stages=3),'" "'        triton.Config({\'BK\': 128, \'BV\': 128}, num_warps=8, num_stages=2),'")"
fi
step ledger; $K ledger ls > $W/ledger.txt 2>&1; cp .katlas/ledger.jsonl $W/ 2>/dev/null; pack
step done
