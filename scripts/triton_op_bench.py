#!/usr/bin/env python3
"""Time one third-party Triton op on the GPU, as an eval benchmark.

  triton_op_bench.py --op liger-rms-norm --shape 8192x2048
  triton_op_bench.py --op fla-fused-recurrent --shape 1x1x16x128x256
  triton_op_bench.py --op fla-chunk --shape 4x2048x16x128x256
  triton_op_bench.py ... --torch-trace PATH   # also: --calls eager calls under torch.profiler
                                              # (shapes recorded, one `prefill` range), Chrome trace to PATH

The library is imported from the current directory first (an eval side's worktree holds its
own copy of the package), then from PYTHONPATH. The op is captured `--calls` times into one CUDA
graph and the graph replayed `--reps` times between CUDA events, so the time is the kernels'
own (no Python launch gaps). Prints kv lines: `kernel_us` (median per call over the replays),
`op`, `shape`, `package_file` (where the library came from), and one `code_object=PATH` per
compiled cubin of the op's kernels found in TRITON_CACHE_DIR, which eval hashes: a candidate
whose edit did not change the compiled kernel is caught as stale.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.getcwd())
import torch  # noqa: E402


def liger_rms_norm(shape):
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    import liger_kernel

    rows, cols = shape
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    return (lambda: LigerRMSNormFunction.apply(x, w, 1e-6)), liger_kernel.__file__, ["_rms_norm_forward_kernel", "_block_rms_norm_forward_kernel"]


def fla_inputs(shape):
    b, t, h, k, v = shape
    q = torch.randn(b, t, h, k, device="cuda", dtype=torch.bfloat16)
    kk = torch.nn.functional.normalize(torch.randn(b, t, h, k, device="cuda", dtype=torch.float32), p=2, dim=-1).to(torch.bfloat16)
    vv = torch.randn(b, t, h, v, device="cuda", dtype=torch.bfloat16)
    g = torch.nn.functional.logsigmoid(torch.rand(b, t, h, device="cuda", dtype=torch.float32))
    beta = torch.rand(b, t, h, device="cuda", dtype=torch.bfloat16).sigmoid()
    h0 = torch.randn(b, h, k, v, device="cuda", dtype=torch.float32)
    return q, kk, vv, g, beta, h0


def fla_fused_recurrent(shape):
    import fla
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

    q, k, v, g, beta, h0 = fla_inputs(shape)
    return (lambda: fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True)), fla.__file__, ["fused_recurrent_gated_delta_rule_fwd_kernel"]


def fla_chunk(shape):
    import fla
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    q, k, v, g, beta, h0 = fla_inputs(shape)
    return (lambda: chunk_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True)), fla.__file__, ["chunk_fwd_kernel_o", "chunk_gated_delta_rule_fwd_kernel_h_blockdim64"]


OPS = {"liger-rms-norm": liger_rms_norm, "fla-fused-recurrent": fla_fused_recurrent, "fla-chunk": fla_chunk}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--op", choices=sorted(OPS), required=True)
    p.add_argument("--shape", required=True)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--torch-trace")
    a = p.parse_args()
    shape = tuple(int(s) for s in a.shape.split("x"))
    torch.manual_seed(0)
    with torch.inference_mode():
        fn, where, kernels = OPS[a.op](shape)
        for _ in range(3):  # compile, autotune, allocator
            fn()
        torch.cuda.synchronize()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
            for _ in range(a.calls):
                fn()
        torch.cuda.synchronize()
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3 / a.calls)
        if a.torch_trace:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
                with torch.profiler.record_function("prefill"):
                    for _ in range(a.calls):
                        fn()
                torch.cuda.synchronize()
            raw = a.torch_trace[:-3] if a.torch_trace.endswith(".gz") else a.torch_trace
            prof.export_chrome_trace(raw)
            if raw != a.torch_trace:
                import gzip
                import shutil

                with open(raw, "rb") as f, gzip.open(a.torch_trace, "wb", compresslevel=6) as g:
                    shutil.copyfileobj(f, g)
                os.remove(raw)
    print(f"kernel_us={statistics.median(times):.3f}")
    print(f"op={a.op}")
    print(f"shape={a.shape}")
    print(f"package_file={where}")
    cache = os.environ.get("TRITON_CACHE_DIR")
    if cache and os.path.isdir(cache):
        for d in sorted(os.listdir(cache)):
            for k in kernels:
                f = os.path.join(cache, d, k + ".cubin")
                if os.path.isfile(f):
                    print(f"code_object={f}")


if __name__ == "__main__":
    main()
