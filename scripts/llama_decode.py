#!/usr/bin/env python3
"""Llama-style decode with random weights (no downloads): the real workload of
docs/samples/h200-llama-decode.md.

Builds a HF transformers LlamaForCausalLM from a config on the GPU, runs one
unmeasured warmup pass, then a measured prefill (prompt of random token ids)
and greedy decode of --new tokens. Prints katlas json-lines records (marker
key "katlas"): one per phase with its timings, one with versions.

  --torch-trace PATH        profile the measured pass with torch.profiler (CPU+CUDA,
                            record_function ranges "prefill"/"decode"), export a
                            Chrome trace (PATH ending .gz is gzipped)
  --cuda-profiler-range     wrap the measured decode in cudaProfilerStart/Stop so
                            `ncu --profile-from-start off` sees only decode kernels
  --profile-range all       ... around the measured prefill and decode both
  --liger                   patch the model with liger-kernel's Triton kernels (RMSNorm,
                            SwiGLU, RoPE) before it is built
  --model gated-deltanet    flash-linear-attention's GatedDeltaNet instead of Llama
                            (chunked gated delta rule in prefill, fused recurrent in decode)
  --cuda-graph              Llama only: a static KV cache, one decode step captured as a CUDA
                            graph in the warmup pass and replayed once per new token (the host
                            issues one graph launch per token, as serving engines do)
"""
import argparse
import contextlib
import gzip
import json
import os
import shutil
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--new", type=int, default=16)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch-trace")
    p.add_argument("--proton", help="profile with Triton's Proton instead: output path without extension")
    p.add_argument("--proton-data", default="tree", help="Proton's data format: tree (hatchet JSON) or trace (Chrome trace)")
    p.add_argument("--cuda-profiler-range", action="store_true")
    p.add_argument("--profile-range", choices=["decode", "all"], default="decode")
    p.add_argument("--liger", action="store_true")
    p.add_argument("--model", choices=["llama", "gated-deltanet"], default="llama")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--cuda-graph", action="store_true")
    a = p.parse_args()
    if a.cuda_graph and a.model != "llama":
        p.error("--cuda-graph is for --model llama")

    torch.manual_seed(a.seed)
    dtype = getattr(torch, a.dtype)
    versions = {}
    if a.model == "gated-deltanet":
        import fla
        from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM

        versions["fla"] = fla.__version__
        cfg = GatedDeltaNetConfig(
            hidden_size=a.hidden, num_hidden_layers=a.layers, num_heads=a.heads, head_dim=128,
            vocab_size=a.vocab, max_position_embeddings=4096, fuse_cross_entropy=False,
        )
        with torch.device("cuda"):
            model = GatedDeltaNetForCausalLM(cfg).to(dtype).eval()
    else:
        if a.liger:
            import liger_kernel
            from liger_kernel.transformers import apply_liger_kernel_to_llama

            versions["liger_kernel"] = getattr(liger_kernel, "__version__", "?")
            apply_liger_kernel_to_llama(rope=True, rms_norm=True, swiglu=True, cross_entropy=False,
                                        fused_linear_cross_entropy=False)
        cfg = LlamaConfig(
            hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
            num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
            max_position_embeddings=4096,
        )
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg).to(dtype).eval()
    ids = torch.randint(0, a.vocab, (a.batch, a.prompt), device="cuda")
    proton = None
    if a.proton:
        import inspect
        import triton.profiler as proton

    def rf(name):
        # A phase is a torch.profiler range and, under Proton, a Proton scope of the same name.
        stack = contextlib.ExitStack()
        stack.enter_context(torch.profiler.record_function(name))
        if proton is not None and measuring[0]:
            stack.enter_context(proton.scope(name))
        return stack

    measuring = [False]
    graph = GraphDecode(model, cfg, a, dtype) if a.cuda_graph else None

    def generate(measure):
        if graph is not None:
            return graph.generate(measure, rf, ids)
        t = {}
        torch.cuda.synchronize()
        ranged = measure and a.cuda_profiler_range
        if ranged and a.profile_range == "all":
            torch.cuda.profiler.start()
        t0 = time.perf_counter()
        with rf("prefill"):
            out = model(ids, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if ranged and a.profile_range == "decode":
            torch.cuda.profiler.start()
        for _ in range(a.new):
            with rf("decode"):
                out = model(nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        if ranged:
            torch.cuda.profiler.stop()
        t2 = time.perf_counter()
        t["prefill_s"], t["decode_s"] = t1 - t0, t2 - t1
        return t

    with torch.inference_mode():
        generate(False)  # warmup: cuBLAS handles, allocator, lazy init
        measuring[0] = True
        if proton is not None:
            kw = {"name": a.proton, "backend": "cupti", "hook": "triton"}
            if "data" in inspect.signature(proton.start).parameters:
                kw["data"] = a.proton_data
            proton.start(**kw)
            t = generate(True)
            proton.finalize()
            prof = None
        elif a.torch_trace:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            prof = torch.profiler.profile(activities=acts, record_shapes=True)
        else:
            prof = contextlib.nullcontext()
        if prof is not None:
            with prof:
                t = generate(True)
    if a.torch_trace:
        raw = a.torch_trace[:-3] if a.torch_trace.endswith(".gz") else a.torch_trace
        prof.export_chrome_trace(raw)
        if raw != a.torch_trace:
            with open(raw, "rb") as f, gzip.open(a.torch_trace, "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g)
            os.remove(raw)

    params = sum(x.numel() for x in model.parameters())
    rec = lambda **kw: print(json.dumps({"katlas": 1, **kw}), flush=True)
    rec(phase="prefill", prefill_ms=t["prefill_s"] * 1e3, prefill_tok_s=a.batch * a.prompt / t["prefill_s"], prompt_tokens=a.prompt)
    rec(phase="decode", decode_ms=t["decode_s"] * 1e3, decode_tok_s=a.batch * a.new / t["decode_s"],
        decode_ms_per_token=t["decode_s"] * 1e3 / a.new, new_tokens=a.new)
    rec(device=torch.cuda.get_device_name(), torch=torch.__version__, transformers=transformers.__version__,
        params_m=params / 1e6, hidden=a.hidden, layers=a.layers, dtype=a.dtype, model=a.model,
        liger=a.liger, batch=a.batch, cuda_graph=graph.mode if graph else None, **versions,
        profiled=bool(a.torch_trace or a.proton) or a.cuda_profiler_range)


class GraphDecode:
    """Prefill into a static KV cache, then one decode step (forward and argmax) captured as a
    CUDA graph and replayed per token: the token and its cache position live in static tensors
    the graph reads."""

    def __init__(self, model, cfg, a, dtype):
        import inspect
        from transformers import StaticCache

        self.model, self.a = model, a
        want = {"config": cfg, "max_batch_size": a.batch, "max_cache_len": a.prompt + a.new + 4,
                "device": "cuda", "dtype": dtype}
        params = inspect.signature(StaticCache.__init__).parameters
        self.cache = StaticCache(**{k: v for k, v in want.items() if k in params})
        self.tok = torch.zeros((a.batch, 1), dtype=torch.long, device="cuda")
        self.pos = torch.zeros((1,), dtype=torch.long, device="cuda")
        self.graph = None

    def step(self):
        out = self.model(self.tok, past_key_values=self.cache, cache_position=self.pos, use_cache=True)
        return out.logits[:, -1:].argmax(-1)

    def rewind(self):
        # transformers 5 static layers count their own write position on the device (the graph
        # advances it); the capture's warmup steps moved it past the prompt.
        for layer in getattr(self.cache, "layers", []):
            n = getattr(layer, "cumulative_length", None)
            if torch.is_tensor(n):
                n.fill_(self.a.prompt)

    def generate(self, measure, rf, ids):
        a, t = self.a, {}
        self.cache.reset()
        torch.cuda.synchronize()
        ranged = measure and a.cuda_profiler_range
        if ranged and a.profile_range == "all":
            torch.cuda.profiler.start()
        t0 = time.perf_counter()
        with rf("prefill"):
            out = self.model(ids, past_key_values=self.cache, cache_position=torch.arange(a.prompt, device="cuda"), use_cache=True)
            self.tok.copy_(out.logits[:, -1:].argmax(-1))
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if self.graph is None:
            self.pos.fill_(a.prompt)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self.step()
            torch.cuda.current_stream().wait_stream(s)
            try:
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.nxt = self.step()
                self.mode = "torch.cuda.graph"
            except Exception as e:  # a model that syncs inside its forward cannot be captured by hand
                import sys

                print(f"manual capture failed ({e}); torch.compile(mode='reduce-overhead') instead", file=sys.stderr)
                torch.cuda.synchronize()
                self.graph = Compiled(torch.compile(self.step, mode="reduce-overhead"))
                for _ in range(3):
                    self.graph.replay()
                self.nxt = self.graph.out
                self.mode = "torch.compile reduce-overhead"
            torch.cuda.synchronize()
            t1 = time.perf_counter()
        self.rewind()
        if ranged and a.profile_range == "decode":
            torch.cuda.profiler.start()
        for i in range(a.new):
            with rf("decode"):
                self.pos.fill_(a.prompt + i)
                self.graph.replay()
                self.tok.copy_(self.nxt)
        torch.cuda.synchronize()
        if ranged:
            torch.cuda.profiler.stop()
        t2 = time.perf_counter()
        t["prefill_s"], t["decode_s"] = t1 - t0, t2 - t1
        return t


class Compiled:
    """A compiled step under inductor's CUDA graph trees: each call replays its graph; the
    output is copied into one tensor so the caller reads a fixed place."""

    def __init__(self, fn):
        self.fn, self.out = fn, None

    def replay(self):
        r = self.fn()
        if self.out is None:
            self.out = r.clone()
        else:
            self.out.copy_(r)


if __name__ == "__main__":
    main()
