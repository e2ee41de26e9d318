"""katlas's Triton launch recorder, loaded through PYTHONPATH when KATLAS_TRITON_LAUNCHES names a file.

For every Triton kernel launched from Python it keeps, per kernel name and argument signature, the
tensor arguments (shape, dtype, bytes of the view), the scalar and constexpr arguments (the block
sizes an autotuner chose among them), num_warps, num_stages and shared memory of the compiled
kernel, and the launch count. At exit it writes one JSON line per signature. Launches made while
torch.profiler records are also numbered per kernel name (`profiled`: [first, count] runs), so
the n-th launch of a kernel joins the n-th kernel event of that name in the trace.
Kernels replayed from a CUDA graph never pass through Python and are not seen.

Nothing is imported at start-up: Triton is patched when the workload itself first imports
`triton.runtime.jit` (and its autotuner), so a process that never uses Triton pays nothing and a
workload that sets Triton or torch variables before importing them keeps them. A
sitecustomize.py found later on sys.path (the environment's own) is still run.
"""
import atexit
import importlib.abc
import importlib.util
import json
import math
import os
import sys

# Signatures kept per kernel name: a scalar that changes every launch (a seed, a position) would
# otherwise add one record per launch. Launches past the cap are counted in one record.
MAX_SIGNATURES = 256


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


def _scalar(v):
    # JSON has no NaN or infinity: the line would be refused whole.
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


class _Recorder:
    def __init__(self, path):
        self.path = path
        self.seen = {}
        self.per_kernel = {}
        self.ordinal = {}
        self.tuners = []
        self.benchmarking = 0

    @staticmethod
    def profiling():
        torch = sys.modules.get("torch")
        try:
            return bool(torch is not None and torch._C._autograd._profiler_enabled())
        except Exception:
            return False

    def patch_jit(self, module):
        rec = self
        orig_run = module.JITFunction.run

        def run(self, *args, **kwargs):
            kernel = orig_run(self, *args, **kwargs)
            # A warmup compiles without launching; the autotuner's timing launches are its own.
            if kwargs.get("warmup") or rec.benchmarking:
                return kernel
            try:
                rec.record(self, kernel, args, kwargs)
            except Exception as e:  # recording must never break the workload
                print(f"katlas triton hook: {e}", file=sys.stderr)
            return kernel

        module.JITFunction.run = run

    def patch_autotuner(self, module):
        rec = self
        cls = module.Autotuner
        orig_init, orig_bench = cls.__init__, getattr(cls, "_bench", None)

        def init(self, *a, **k):
            orig_init(self, *a, **k)
            rec.tuners.append(self)

        cls.__init__ = init
        if orig_bench is not None:

            def bench(self, *a, **k):
                rec.benchmarking += 1
                try:
                    return orig_bench(self, *a, **k)
                finally:
                    rec.benchmarking -= 1

            cls._bench = bench

    def record(self, fn, kernel, args, kwargs):
        names = getattr(fn, "arg_names", ())
        tensors, scalars, ptrs = [], [], set()
        items = [(names[i] if i < len(names) else f"arg{i}", v) for i, v in enumerate(args)]
        items += [(k, v) for k, v in kwargs.items() if k not in ("grid", "warmup")]
        for name, v in items:
            if hasattr(v, "data_ptr") and hasattr(v, "element_size") and hasattr(v, "shape"):
                ptr = v.data_ptr()
                tensors.append((name, tuple(int(s) for s in v.shape), str(v.dtype).replace("torch.", ""), v.numel() * v.element_size(), ptr in ptrs))
                ptrs.add(ptr)
            elif isinstance(v, (bool, int, float, str)) or v is None:
                scalars.append((name, _scalar(v)))
        md = getattr(kernel, "metadata", None)
        name = getattr(kernel, "name", None) or getattr(md, "name", None) or fn.__name__
        facts = tuple((f, getattr(md, f)) for f in ("num_warps", "num_stages", "num_ctas", "shared", "maxnreg") if isinstance(getattr(md, f, None), (int, float)))
        key = (name, tuple(tensors), tuple(scalars), facts)
        rec = self.seen.get(key)
        if rec is None:
            count = self.per_kernel.get(name, 0)
            self.per_kernel[name] = count + 1
            if count >= MAX_SIGNATURES:
                key = (name, "more signatures")
                rec = self.seen.get(key)
            if rec is None:
                code = getattr(getattr(fn, "fn", None), "__code__", None)
                rec = self.seen[key] = {
                    "kernel": name,
                    "function": getattr(fn, "__name__", None),
                    "file": getattr(code, "co_filename", None),
                    "line": getattr(code, "co_firstlineno", None),
                    "pid": os.getpid(),
                    "launches": 0,
                    **dict(facts),
                }
                if key[1] == "more signatures":
                    rec["note"] = f"launches past {MAX_SIGNATURES} signatures of this kernel, arguments not kept"
                else:
                    rec["tensors"] = [{"arg": a, "shape": list(s), "dtype": d, "bytes": b, "alias": al} for a, s, d, b, al in tensors]
                    rec["scalars"] = dict(scalars)
        rec["launches"] += 1
        if self.profiling():
            n = self.ordinal.get(name, 0)
            self.ordinal[name] = n + 1
            runs = rec.setdefault("profiled", [])
            if runs and runs[-1][0] + runs[-1][1] == n:
                runs[-1][1] += 1
            else:
                runs.append([n, 1])

    def lines(self):
        for rec in self.seen.values():
            yield {"katlas_triton_launch": 1, **rec}
        for t in self.tuners:
            fn = getattr(t, "fn", None)
            while fn is not None and not hasattr(fn, "__code__") and hasattr(fn, "fn"):
                fn = fn.fn
            code = getattr(fn, "__code__", None)
            for key, cfg in list(getattr(t, "cache", {}).items()):
                yield {
                    "katlas_triton_autotune": 1,
                    "function": getattr(code, "co_name", None),
                    "file": getattr(code, "co_filename", None),
                    "line": getattr(code, "co_firstlineno", None),
                    "key_names": list(getattr(t, "keys", []) or []),
                    "key": [_scalar(k) if isinstance(k, (int, float, str, bool)) else str(k) for k in (key if isinstance(key, tuple) else (key,))],
                    "configs": len(getattr(t, "configs", []) or []),
                    "best": {"kwargs": getattr(cfg, "kwargs", {}), "num_warps": getattr(cfg, "num_warps", None), "num_stages": getattr(cfg, "num_stages", None)},
                }

    def flush(self):
        text = "".join(json.dumps(line, default=str) + "\n" for line in self.lines())
        if not text:
            return
        try:
            # One append of the whole text: several processes of one run share the file, and a
            # link in its place is not followed.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                data = text.encode()
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
        except OSError as e:
            print(f"katlas triton hook: {self.path}: {e}", file=sys.stderr)


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Lets `triton.runtime.jit` and `triton.runtime.autotuner` load as usual, then patches them."""

    def __init__(self, recorder):
        self.recorder = recorder
        self.targets = {"triton.runtime.jit": recorder.patch_jit, "triton.runtime.autotuner": recorder.patch_autotuner}

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.targets:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                self.inner = getattr(self, "inner", {})
                self.inner[fullname] = spec.loader
                spec.loader = self
                return spec
        return None

    def create_module(self, spec):
        return self.inner[spec.name].create_module(spec)

    def exec_module(self, module):
        self.inner[module.__name__].exec_module(module)
        patch = self.targets.pop(module.__name__)
        try:
            patch(module)
        except Exception as e:
            print(f"katlas triton hook: {module.__name__} not patched ({e})", file=sys.stderr)


_out = os.environ.get("KATLAS_TRITON_LAUNCHES")
if _out:
    _recorder = _Recorder(_out)
    sys.meta_path.insert(0, _PatchOnImport(_recorder))
    atexit.register(_recorder.flush)
_chain_next_sitecustomize()
