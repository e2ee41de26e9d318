#!/bin/bash
# Rebuilds fixtures/h200/triton-cache, fixtures/h200/inductor-cache and
# fixtures/h200/triton-occupancy.jsonl on a CUDA machine with torch + Triton (the H200 box:
# torch 2.11 cu130, Triton 3.6.0). Run with OUT=<dir>; copy $OUT/tcache/<hash>/{*.cubin,*.json,*.source},
# $OUT/icache/d4 and $OUT/r/occ.txt into fixtures/. (The part of .devbin/explore16.sh that made them.)
set -u
R=$OUT/r; mkdir -p $R
# Triton matmul cache
export TRITON_CACHE_DIR=/tmp/tcache; rm -rf $TRITON_CACHE_DIR
cat > /tmp/tmm.py <<'PY'
import torch, triton, triton.language as tl
@triton.jit
def matmul_kernel(a_ptr,b_ptr,c_ptr,M,N,K,sam,sak,sbk,sbn,scm,scn,BLOCK_M:tl.constexpr,BLOCK_N:tl.constexpr,BLOCK_K:tl.constexpr):
    pid_m=tl.program_id(0); pid_n=tl.program_id(1)
    rm=pid_m*BLOCK_M+tl.arange(0,BLOCK_M); rn=pid_n*BLOCK_N+tl.arange(0,BLOCK_N); rk=tl.arange(0,BLOCK_K)
    a=a_ptr+rm[:,None]*sam+rk[None,:]*sak; b=b_ptr+rk[:,None]*sbk+rn[None,:]*sbn
    acc=tl.zeros((BLOCK_M,BLOCK_N),dtype=tl.float32)
    for k in range(0,K,BLOCK_K):
        acc+=tl.dot(tl.load(a),tl.load(b)); a+=BLOCK_K*sak; b+=BLOCK_K*sbk
    tl.store(c_ptr+rm[:,None]*scm+rn[None,:]*scn, acc.to(tl.float16))
M=N=K=1024
a=torch.randn(M,K,device='cuda',dtype=torch.float16); b=torch.randn(K,N,device='cuda',dtype=torch.float16); c=torch.empty(M,N,device='cuda',dtype=torch.float16)
k=matmul_kernel[(M//128,N//128)](a,b,c,M,N,K,a.stride(0),a.stride(1),b.stride(0),b.stride(1),c.stride(0),c.stride(1),BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,num_warps=8,num_stages=3)
torch.cuda.synchronize()
print("err", (c-(a@b)).abs().max().item())
print("metadata", k.metadata)
print("n_regs", getattr(k,'n_regs',None), "n_spills", getattr(k,'n_spills',None), "shared", k.metadata.shared)
PY
python3 /tmp/tmm.py > $R/triton.txt 2>&1; cat $R/triton.txt
find $TRITON_CACHE_DIR -type f | xargs ls -la
# occupancy oracle via the driver API for the cached cubin
cat > /tmp/occ.py <<'PY'
import ctypes, glob, json, os, sys
cu=ctypes.CDLL('libcuda.so.1'); chk=lambda r,w: (_ for _ in ()).throw(RuntimeError(f"{w} {r}")) if r else None
chk(cu.cuInit(0),'init'); dev=ctypes.c_int(); chk(cu.cuDeviceGet(ctypes.byref(dev),0),'dev')
ctx=ctypes.c_void_p(); chk(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx),dev),'ctx'); chk(cu.cuCtxSetCurrent(ctx),'set')
for js in glob.glob(os.environ['TRITON_CACHE_DIR']+'/*/*.json'):
    if '__grp__' in js: continue
    m=json.load(open(js)); cub=js[:-5]+'.cubin'
    if not os.path.exists(cub): continue
    data=open(cub,'rb').read(); mod=ctypes.c_void_p(); chk(cu.cuModuleLoadData(ctypes.byref(mod),data),'load')
    f=ctypes.c_void_p(); chk(cu.cuModuleGetFunction(ctypes.byref(f),mod,m['name'].encode()),'fn')
    sh=m['shared']
    if sh>49152: chk(cu.cuFuncSetAttribute(f,8,sh),'attr')  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    n=ctypes.c_int(); bs=32*m['num_warps']; chk(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n),f,bs,sh),'occ')
    attrs={}
    for name,a in [('num_regs',4),('shared_static',1),('local',3),('max_threads',0)]:
        v=ctypes.c_int(); cu.cuFuncGetAttribute(ctypes.byref(v),a,f); attrs[name]=v.value
    print(json.dumps({"kernel":m['name'],"num_warps":m['num_warps'],"block":bs,"dyn_shared":sh,"num_stages":m.get('num_stages'),"target":m.get('target'),"blocks_per_sm":n.value,"warps_per_sm":n.value*m['num_warps'],**attrs}))
PY
python3 /tmp/occ.py | tee $R/occ.txt
# inductor cache for a small compiled fn
export TORCHINDUCTOR_CACHE_DIR=/tmp/icache
python3 -c "
import torch
@torch.compile
def f(x,w): return torch.nn.functional.rms_norm(x,(x.shape[-1],))*w+1
x=torch.randn(8,4096,device='cuda'); w=torch.randn(4096,device='cuda'); f(x,w); torch.cuda.synchronize(); print('ok')
" > $R/inductor.txt 2>&1; tail -3 $R/inductor.txt
find /tmp/icache -type f | head -80 > $R/icache_files.txt; wc -l $R/icache_files.txt
tar czf $OUT/caches.tgz -C /tmp tcache icache 2>/dev/null; ls -la $OUT
# the oracle again, now over every kernel of the cache (the inductor kernels were compiled into it)
python3 /tmp/occ.py | tee $R/occ_all.txt
