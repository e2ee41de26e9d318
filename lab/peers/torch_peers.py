"""PyTorch peers for the lab, timed like katlas-lab times its own kernels.

Each sample is one call between two CUDA events; torch.cuda._sleep holds the stream while Python
queues all samples, so host overhead stays out; inputs rotate over sets spanning >= 4x L2.
Also reports batch20 (20 calls between one event pair, the mean) and the anchor-style number (events around each call, no queueing ahead), which is
what fixtures/h200/anchors.json recorded. Output: a table and JSON (argv[1] or stdout).
"""
import json, math, sys, statistics
import torch
import torch.nn.functional as F

dev = "cuda"
props = torch.cuda.get_device_properties(0)
L2 = getattr(props, "L2_cache_size", 50 << 20)
WARM, SAMPLES = 10, 100


def sets_for(set_bytes):
    return max(2, min(64, math.ceil(4 * L2 / set_bytes)))


def bench(calls, queued=True, batch=1):
    n = len(calls)
    for i in range(WARM):
        calls[i % n]()
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(SAMPLES)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(SAMPLES)]
    if queued:
        torch.cuda._sleep(int(4e6 + SAMPLES * batch * 1e5))  # cycles: several ms at any clock
    for i in range(SAMPLES):
        st[i].record()
        for j in range(batch):
            calls[(WARM + i * batch + j) % n]()
        en[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 / batch for s, e in zip(st, en))


def copy_gbps():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev).fill_(7)
    b = torch.empty_like(a)
    us = bench([lambda: b.copy_(a)])
    return 2 * n / (us * 1e3)


def bf16_case(N, K):
    sb = N * K * 2
    ns = sets_for(sb)
    ws = [torch.randn(N, K, dtype=torch.bfloat16, device=dev) * 0.02 for _ in range(ns)]
    x = torch.randn(1, K, dtype=torch.bfloat16, device=dev)
    calls = [(lambda w=w: F.linear(x, w)) for w in ws]
    return calls, N * K * 2 + K * 2 + N * 2


def int4_case(N, K, group=128, inner_k_tiles=8):
    w = torch.randint(0, 16, (N, K), dtype=torch.int32, device=dev)
    w_u8 = ((w[:, ::2] << 4) | w[:, 1::2]).to(torch.uint8)
    packed = torch.ops.aten._convert_weight_to_int4pack(w_u8, inner_k_tiles)
    sz = (torch.rand(K // group, N, 2, device=dev) * 0.01).to(torch.bfloat16)
    sb = packed.numel() * packed.element_size() + sz.numel() * 2
    ns = sets_for(sb)
    ps = [packed.clone() for _ in range(ns)]
    szs = [sz.clone() for _ in range(ns)]
    x = torch.randn(1, K, dtype=torch.bfloat16, device=dev)
    calls = [(lambda p=p, s=s: torch.ops.aten._weight_int4pack_mm(x, p, group, s)) for p, s in zip(ps, szs)]
    return calls, N * K / 2 + (K // group) * N * 2 * 2 + K * 2 + N * 2


def main():
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda, "l2_bytes": L2,
           "warmup": WARM, "samples": SAMPLES, "cases": []}
    cp = copy_gbps()
    out["copy_gbps"] = cp
    shapes = [(4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192), (28672, 8192)]
    for kind, mk in (("bf16_linear", bf16_case), ("int4pack_mm_g128", int4_case)):
        for N, K in shapes:
            try:
                calls, nbytes = mk(N, K)
                us = bench(calls)
                us_anchor = bench(calls, queued=False)
                us_b20 = bench(calls, batch=20)
                out["cases"].append({"peer": kind, "shape": f"{N}x{K}", "median_us": us, "anchor_style_us": us_anchor, "batch20_us": us_b20,
                                     "bytes": nbytes, "gbps": nbytes / (us * 1e3), "copy_pct": 100 * nbytes / (us * 1e3) / cp})
                del calls
                torch.cuda.empty_cache()
            except Exception as e:  # keep the other cases
                out["cases"].append({"peer": kind, "shape": f"{N}x{K}", "error": repr(e)})
    print(f"torch {out['torch']} on {out['device']}, copy {cp:.0f} GB/s")
    for c in out["cases"]:
        if "error" in c:
            print(f"{c['peer']:18} {c['shape']:>11}  ERROR {c['error']}")
        else:
            print(f"{c['peer']:18} {c['shape']:>11}  {c['median_us']:9.2f} us  (anchor-style {c['anchor_style_us']:8.2f}, batch20 {c['batch20_us']:8.2f})  {c['gbps']:7.0f} GB/s  {c['copy_pct']:5.1f}% copy")
    s = json.dumps(out, indent=1)
    if len(sys.argv) > 1:
        open(sys.argv[1], "w").write(s)
    else:
        print(s)


if __name__ == "__main__":
    main()
