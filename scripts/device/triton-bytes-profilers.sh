#!/usr/bin/env bash
# Carry .thirdparty (liger-kernel 0.8.5 sdist src/, flash-linear-attention v0.5.2 fla/, einops in pylib/).
# Run from the repository root on the device: scripts/device/triton-bytes-profilers.sh main|check
# main:  the four model-level workloads (liger and fla, decode- and prefill-shaped): torch trace with
#        katlas's Triton launch records and the Triton cache, then ncu DRAM bytes of the same passes;
#        Proton output (hatchet tree and trace) of two of the same programs.
# check: two workloads of other shapes (never used to set any katlas constant) the same way, and
#        small Nsight Compute reports (.ncu-rep, with source counters) with their --import CSV.
# Everything lands in $OUT/<mode>.tar.gz, re-packed after every step.
set -u
MODE=${1:-main}
W=/tmp/w-$MODE; mkdir -p $W
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$PWD
LIBS=$R/.thirdparty/liger/src:$R/.thirdparty/fla:$R/.thirdparty/pylib
NCU=$(command -v ncu || echo /opt/nvidia/nsight-compute/ncu)
T0=$(date +%s)
pack() { (cd $W && tar czf $OUT/$MODE.tar.gz --exclude='*.llir' --exclude='*.ptx' --exclude='*.ttgir' --exclude='*.cubin' --exclude='*.so' .); }
step() { echo "$(( $(date +%s)-T0 ))s $*" | tee -a $W/steps.txt; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; $NCU --version
  PYTHONPATH=$LIBS python3 -c "import torch,triton,transformers,inspect;print(torch.__version__,triton.__version__,transformers.__version__); import triton.profiler as p; print('proton.start', inspect.signature(p.start))"; } > $W/env.txt 2>&1
METRICS=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__shared_mem_per_block
run() { # name, llama_decode args...
  local n=$1; shift; mkdir -p $W/$n
  TRITON_CACHE_DIR=$W/$n/triton-cache KATLAS_TRITON_LAUNCHES=$W/$n/launches.jsonl PYTHONPATH=$R/data/python:$LIBS \
    timeout 200 python3 scripts/llama_decode.py "$@" --torch-trace $W/$n/trace.json.gz > $W/$n/stdout.jsonl 2> $W/$n/stderr.txt
  step "$n trace rc=$?"
  TRITON_CACHE_DIR=$W/$n/triton-cache PYTHONPATH=$LIBS timeout 240 $NCU --csv --page raw --clock-control none --profile-from-start off \
    --metrics $METRICS --log-file $W/$n/ncu.csv python3 scripts/llama_decode.py "$@" --cuda-profiler-range --profile-range all > $W/$n/ncu-stdout.jsonl 2> $W/$n/ncu-stderr.txt
  step "$n ncu rc=$?"; pack
}
proton() { # name, data, llama_decode args...
  local n=$1 d=$2; shift 2; mkdir -p $W/proton
  TRITON_CACHE_DIR=$W/proton/triton-cache PYTHONPATH=$LIBS timeout 150 python3 scripts/llama_decode.py "$@" --proton $W/proton/$n-$d --proton-data $d > $W/proton/$n-$d.stdout 2> $W/proton/$n-$d.stderr
  step "proton $n $d rc=$?"; pack
}
ncurep() { # name, llama_decode args...
  local n=$1; shift; mkdir -p $W/ncu-rep
  TRITON_CACHE_DIR=$W/ncu-rep/triton-cache PYTHONPATH=$LIBS timeout 150 $NCU -o $W/ncu-rep/$n --clock-control none --profile-from-start off \
    --metrics $METRICS --section SourceCounters --import-source yes python3 scripts/llama_decode.py "$@" --cuda-profiler-range --profile-range all > $W/ncu-rep/$n.stdout 2> $W/ncu-rep/$n.stderr
  step "ncu-rep $n rc=$?"
  $NCU --import $W/ncu-rep/$n.ncu-rep --csv --page raw > $W/ncu-rep/$n.raw.csv 2>> $W/ncu-rep/$n.stderr
  $NCU --import $W/ncu-rep/$n.ncu-rep --csv --page source --print-source sass > $W/ncu-rep/$n.source.csv 2>> $W/ncu-rep/$n.stderr
  step "ncu-rep $n import rc=$?"; pack
}
if [ $MODE = main ]; then
  run liger-decode --liger --prompt 64 --new 8
  run fla-decode --model gated-deltanet --prompt 64 --new 8
  run liger-prefill --liger --prompt 2048 --batch 4 --new 1
  run fla-prefill --model gated-deltanet --prompt 2048 --batch 4 --new 1
  proton fla-decode tree --model gated-deltanet --prompt 64 --new 8
  proton fla-decode trace --model gated-deltanet --prompt 64 --new 8
  proton liger-prefill tree --liger --prompt 2048 --batch 4 --new 1
else
  run liger-wide --liger --hidden 4096 --intermediate 11008 --heads 32 --kv-heads 8 --layers 4 --prompt 1024 --batch 2 --new 4
  run fla-narrow --model gated-deltanet --hidden 1024 --heads 8 --layers 4 --prompt 4096 --batch 2 --new 4
  ncurep fla-small --model gated-deltanet --layers 2 --prompt 64 --new 2
  ncurep liger-small --liger --layers 2 --prompt 256 --new 2
fi
step done; pack
ls -la $OUT
