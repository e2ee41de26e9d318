"""katlas's Triton launch recorder, loaded through PYTHONPATH when KATLAS_TRITON_LAUNCHES names a file.

For every Triton kernel launched from Python it keeps, per kernel name and argument signature, the
tensor arguments (shape, dtype, bytes of the view), the scalar and constexpr arguments (the block
sizes an autotuner chose among them), num_warps, num_stages and shared memory of the compiled
kernel, and the launch count. At exit it writes one JSON line per signature. Launches made while
torch.profiler records are also numbered per kernel name (`profiled`: [first, count] runs), so
the n-th launch of a kernel joins the n-th kernel event of that name in the trace. This is what a torch
trace cannot say about a kernel launched from an autograd.Function: which tensors it was handed.
Kernels replayed from a CUDA graph never pass through Python and are not seen.

A sitecustomize.py found later on sys.path (the environment's own) is still run.
"""
import atexit
import importlib.util
import json
import os
import sys


def _chain_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        d = os.path.abspath(entry or ".")
        if d == here:
            continue
        cand = os.path.join(d, "sitecustomize.py")
        if os.path.isfile(cand):
            spec = importlib.util.spec_from_file_location("_katlas_next_sitecustomize", cand)
            mod = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(mod)
            except Exception as e:  # the environment's own hook failing is its business
                print(f"katlas triton hook: {cand}: {e}", file=sys.stderr)
            return


def _install(path):
    try:
        from triton.runtime.jit import JITFunction
    except Exception as e:
        print(f"katlas triton hook: triton not importable ({e}); no launches recorded", file=sys.stderr)
        return
    seen = {}
    tuners = []
    state = {"benchmarking": 0}
    try:
        from triton.runtime.autotuner import Autotuner

        orig_init, orig_bench = Autotuner.__init__, getattr(Autotuner, "_bench", None)

        def init(self, *a, **k):
            orig_init(self, *a, **k)
            tuners.append(self)

        Autotuner.__init__ = init
        if orig_bench is not None:
            # The autotuner's timing launches are not the workload's: they are left out.
            def bench(self, *a, **k):
                state["benchmarking"] += 1
                try:
                    return orig_bench(self, *a, **k)
                finally:
                    state["benchmarking"] -= 1

            Autotuner._bench = bench
    except Exception as e:
        print(f"katlas triton hook: autotuner not wrapped ({e})", file=sys.stderr)

    def describe(v):
        if hasattr(v, "data_ptr") and hasattr(v, "element_size") and hasattr(v, "shape"):
            try:
                nbytes = v.numel() * v.element_size()
            except Exception:
                nbytes = None
            return "t", (tuple(int(s) for s in v.shape), str(v.dtype).replace("torch.", ""), nbytes, v.data_ptr())
        if isinstance(v, (bool, int, float, str)) or v is None:
            return "s", v
        return "o", type(v).__name__

    orig_run = JITFunction.run
    try:
        from torch._C._autograd import _profiler_enabled as profiling
    except Exception:
        def profiling():
            return False
    ordinal = {}

    def run(self, *args, **kwargs):
        kernel = orig_run(self, *args, **kwargs)
        if state["benchmarking"]:
            return kernel
        try:
            names = list(getattr(self, "arg_names", []))
            tensors, scalars, ptrs = [], {}, set()
            for i, v in enumerate(args):
                kind, d = describe(v)
                name = names[i] if i < len(names) else f"arg{i}"
                if kind == "t":
                    shape, dtype, nbytes, ptr = d
                    tensors.append((name, shape, dtype, nbytes, ptr in ptrs))
                    ptrs.add(ptr)
                elif kind == "s":
                    scalars[name] = d
            for k, v in kwargs.items():
                if k in ("grid", "warmup"):
                    continue
                kind, d = describe(v)
                if kind == "t":
                    shape, dtype, nbytes, ptr = d
                    tensors.append((k, shape, dtype, nbytes, ptr in ptrs))
                    ptrs.add(ptr)
                elif kind == "s":
                    scalars[k] = d
            md = getattr(kernel, "metadata", None)
            name = getattr(kernel, "name", None) or getattr(md, "name", None) or self.__name__
            facts = {}
            for f in ("num_warps", "num_stages", "num_ctas", "shared", "maxnreg"):
                val = getattr(md, f, None)
                if isinstance(val, (int, float)):
                    facts[f] = val
            key = (name, tuple(t[:4] for t in tensors), json.dumps(scalars, sort_keys=True, default=str), json.dumps(facts, sort_keys=True))
            rec = seen.get(key)
            if rec is None:
                src = getattr(self, "fn", None)
                code = getattr(src, "__code__", None)
                seen[key] = rec = {
                    "kernel": name,
                    "function": getattr(self, "__name__", None),
                    "file": getattr(code, "co_filename", None),
                    "line": getattr(code, "co_firstlineno", None),
                    "launches": 0,
                    "tensors": [{"arg": a, "shape": list(s), "dtype": d, "bytes": b, "alias": al} for a, s, d, b, al in tensors],
                    "scalars": scalars,
                    **facts,
                }
            rec["launches"] += 1
            if profiling():
                n = ordinal.get(name, 0)
                ordinal[name] = n + 1
                runs = rec.setdefault("profiled", [])
                if runs and runs[-1][0] + runs[-1][1] == n:
                    runs[-1][1] += 1
                else:
                    runs.append([n, 1])
        except Exception as e:  # recording must never break the workload
            print(f"katlas triton hook: {e}", file=sys.stderr)
        return kernel

    JITFunction.run = run

    def flush():
        try:
            with open(path, "a") as f:
                for rec in seen.values():
                    f.write(json.dumps({"katlas_triton_launch": 1, **rec}) + "\n")
                for t in tuners:
                    fn = getattr(t, "fn", None)
                    while fn is not None and not hasattr(fn, "__code__") and hasattr(fn, "fn"):
                        fn = fn.fn
                    code = getattr(fn, "__code__", None)
                    for key, cfg in list(getattr(t, "cache", {}).items()):
                        f.write(json.dumps({
                            "katlas_triton_autotune": 1,
                            "function": getattr(code, "co_name", None),
                            "file": getattr(code, "co_filename", None),
                            "line": getattr(code, "co_firstlineno", None),
                            "key_names": list(getattr(t, "keys", []) or []),
                            "key": [k if isinstance(k, (int, float, str, bool)) else str(k) for k in (key if isinstance(key, tuple) else (key,))],
                            "configs": len(getattr(t, "configs", []) or []),
                            "best": {"kwargs": getattr(cfg, "kwargs", {}), "num_warps": getattr(cfg, "num_warps", None), "num_stages": getattr(cfg, "num_stages", None)},
                        }, default=str) + "\n")
        except OSError as e:
            print(f"katlas triton hook: {path}: {e}", file=sys.stderr)

    atexit.register(flush)


_out = os.environ.get("KATLAS_TRITON_LAUNCHES")
if _out:
    _install(_out)
_chain_next_sitecustomize()
