#!/usr/bin/env bash
# Carry .thirdparty (liger-kernel 0.8.5 sdist src/, flash-linear-attention v0.5.2 fla/, einops in pylib/).
# Run from the repository root on the device: scripts/device/profiler-formats.sh [graph,proton,ncu-rep]
# Real profiler outputs of small runs, for the parsers' tests:
#  graph/   a Llama decode replayed from a CUDA graph (one graph launch per token), torch trace
#  proton/  Proton's trace format (data="trace") of the fla decode
#  ncu-rep/ small Nsight Compute reports: launch, SOL, occupancy and DRAM bytes of the Triton
#           kernels of a 1-layer liger decode; source counters of liger's RMSNorm kernel; each with its
#           `ncu --import --csv --page raw --print-units base`, and the source page of the second
# Everything lands in $OUT/formats.tar.gz, re-packed after every step.
set -u
W=/tmp/w-formats; mkdir -p $W
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$PWD
LIBS=$R/.thirdparty/liger/src:$R/.thirdparty/fla:$R/.thirdparty/pylib
NCU=$(command -v ncu || echo /opt/nvidia/nsight-compute/ncu)
T0=$(date +%s)
pack() { (cd $W && tar czf $OUT/formats.tar.gz --exclude='*.llir' --exclude='*.ptx' --exclude='*.ttgir' --exclude='*.cubin' --exclude='*.so' .); }
step() { echo "$(( $(date +%s)-T0 ))s $*" | tee -a $W/steps.txt; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv; $NCU --version
  PYTHONPATH=$LIBS python3 -c "import torch,triton,transformers,inspect;print(torch.__version__,triton.__version__,transformers.__version__); import triton.profiler as p; print('proton.start', inspect.signature(p.start))"; } > $W/env.txt 2>&1
mkdir -p $W/graph $W/proton $W/ncu-rep
STEPS=${1:-graph,proton,ncu-rep}
if [[ $STEPS == *graph* ]]; then
PYTHONPATH=$LIBS timeout 200 python3 scripts/llama_decode.py --layers 4 --prompt 64 --new 16 --cuda-graph \
  --torch-trace $W/graph/llama-graph-decode.json.gz > $W/graph/stdout.jsonl 2> $W/graph/stderr.txt
step "graph trace rc=$?"; pack
fi
if [[ $STEPS == *proton* ]]; then
TRITON_CACHE_DIR=$W/proton/triton-cache PYTHONPATH=$LIBS timeout 150 python3 scripts/llama_decode.py --model gated-deltanet --layers 2 --prompt 64 --new 4 \
  --proton $W/proton/fla-decode-trace --proton-data trace > $W/proton/stdout.jsonl 2> $W/proton/stderr.txt
step "proton trace rc=$?"; ls -la $W/proton >> $W/steps.txt; pack
fi
METRICS=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
rep() { # name, extra ncu args (one string), llama_decode args...
  local n=$1 x=$2; shift 2
  TRITON_CACHE_DIR=$W/ncu-rep/triton-cache PYTHONPATH=$LIBS eval timeout 150 $NCU -o $W/ncu-rep/$n --clock-control none --profile-from-start off \
    --metrics $METRICS --section SpeedOfLight --section LaunchStats --section Occupancy $x python3 scripts/llama_decode.py "$@" --cuda-profiler-range \
    > $W/ncu-rep/$n.stdout 2> $W/ncu-rep/$n.stderr
  step "ncu-rep $n rc=$?"
  $NCU --import $W/ncu-rep/$n.ncu-rep --csv --page raw --print-units base > $W/ncu-rep/$n.raw.csv 2>> $W/ncu-rep/$n.stderr
  step "ncu-rep $n import rc=$?"; ls -la $W/ncu-rep >> $W/steps.txt; pack
}
if [[ $STEPS == *ncu-rep* ]]; then
# A launch of a cuBLAS, cuDNN or PyTorch kernel carries its whole code module into the report
# (30 such launches of a 1-layer decode made 49 MB); liger's Triton kernels keep it small enough
# to commit.
rep liger-decode-triton "--kernel-name regex:'^_'" --liger --layers 1 --prompt 16 --new 2
rep rmsnorm-source "--section SourceCounters --kernel-name regex:_rms_norm_forward --launch-count 2" --liger --layers 1 --prompt 16 --new 2
$NCU --import $W/ncu-rep/rmsnorm-source.ncu-rep --csv --page source --print-source sass > $W/ncu-rep/rmsnorm-source.source.csv 2>> $W/ncu-rep/rmsnorm-source.stderr
step "source page rc=$?"
fi
step done; pack
ls -la $OUT
