#!/usr/bin/env bash
# Carry .thirdparty (liger-kernel 0.8.5 sdist src/ and test/; flash-linear-attention v0.5.2 fla/ and tests/).
# Run from the repository root on the device; everything lands in $OUT/t30a.tar.gz.
# Issue 30 data: liger-kernel and fla on the H200. Traces (record_shapes), Triton caches, launch records,
# ncu DRAM bytes of the same passes, and the libraries' own tests timed.
set -u
W=/tmp/w; mkdir -p $W
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$PWD
LIBS=$R/.thirdparty/liger/src:$R/.thirdparty/fla
NCU=$(command -v ncu || echo /opt/nvidia/nsight-compute/ncu)
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; python3 -c "import torch,triton,transformers;print(torch.__version__,triton.__version__,transformers.__version__)";
  python3 -c "import inspect; from triton.runtime.jit import JITFunction; import triton.runtime.autotuner as a; print(inspect.signature(JITFunction.run)); print(hasattr(a.Autotuner,'_bench'))"; } > $W/env.txt 2>&1
run() { # name, args...
  local n=$1; shift; mkdir -p $W/$n
  local t0=$(date +%s)
  TRITON_CACHE_DIR=$W/$n/triton-cache KATLAS_TRITON_LAUNCHES=$W/$n/launches.jsonl PYTHONPATH=$R/data/python:$LIBS \
    timeout 240 python3 scripts/llama_decode.py "$@" --torch-trace $W/$n/trace.json.gz > $W/$n/stdout.jsonl 2> $W/$n/stderr.txt
  echo "$n trace rc=$? $(( $(date +%s)-t0 ))s" | tee -a $W/steps.txt
  t0=$(date +%s)
  TRITON_CACHE_DIR=$W/$n/triton-cache PYTHONPATH=$LIBS timeout 300 $NCU --csv --page raw --clock-control none --profile-from-start off \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__shared_mem_per_block \
    --log-file $W/$n/ncu.csv python3 scripts/llama_decode.py "$@" --cuda-profiler-range --profile-range all > $W/$n/ncu-stdout.jsonl 2> $W/$n/ncu-stderr.txt
  echo "$n ncu rc=$? $(( $(date +%s)-t0 ))s" | tee -a $W/steps.txt
}
run liger-decode --liger --prompt 64 --new 16
run liger-prefill --liger --prompt 2048 --batch 4 --new 2
run fla-decode --model gated-deltanet --prompt 64 --new 16
run fla-prefill --model gated-deltanet --prompt 2048 --batch 4 --new 2
t0=$(date +%s)
(cd .thirdparty/liger && PYTHONPATH=$R/.thirdparty/liger/src:$R/.thirdparty/liger timeout 150 python3 -m pytest -x -q -p no:cacheprovider test/transformers/test_rms_norm.py test/transformers/test_swiglu.py test/transformers/test_rope.py > $W/liger-tests.txt 2>&1); echo "liger tests rc=$? $(( $(date +%s)-t0 ))s" | tee -a $W/steps.txt
t0=$(date +%s)
(cd .thirdparty/fla && PYTHONPATH=$R/.thirdparty/fla timeout 150 python3 -m pytest -x -q -p no:cacheprovider tests/ops/test_gdn.py -k "fused_recurrent" > $W/fla-tests.txt 2>&1); echo "fla tests rc=$? $(( $(date +%s)-t0 ))s" | tee -a $W/steps.txt
cd $W && tar czf $OUT/t30a.tar.gz . && cp steps.txt env.txt $OUT/
ls -la $OUT
