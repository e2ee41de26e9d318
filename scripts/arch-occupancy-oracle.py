#!/usr/bin/env python3
"""Record the CUDA driver's own occupancy answers for katlas-arch's tests.

Runs on a machine with an NVIDIA GPU and its driver (libcuda) only: no toolkit, no
Python packages. PTX kernels with a controlled number of simultaneously live values
(hence registers) and optional static shared memory are JIT-compiled by the driver;
for each, cuFuncGetAttribute gives the registers and static shared memory the JIT
chose, and cuOccupancyMaxActiveBlocksPerMultiprocessor gives the resident blocks per
SM for a sweep of block sizes and dynamic shared-memory sizes.

Output (JSON, stdout or the file given as argv[1]):
  {"device": name, "cc": "9.0", "driver": int, "attributes": {...},
   "case_fields": [...], "cases": [[regs, static_smem, local_bytes, block, dynamic_smem, blocks], ...]}

The committed copy is crates/katlas-arch/tests/data/cuda_occupancy_<device>.json;
regenerate it with:  python3 scripts/arch-occupancy-oracle.py OUT.json
"""
import ctypes
import json
import sys


def load_cuda():
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    sys.exit("libcuda not found: this script needs an NVIDIA driver")


cu = load_cuda()
CASE_FIELDS = ["regs", "static_smem", "local_bytes", "block", "dynamic_smem", "blocks"]


def check(r, what):
    if r != 0:
        msg = ctypes.c_char_p()
        cu.cuGetErrorString(r, ctypes.byref(msg))
        raise RuntimeError(f"{what}: CUDA error {r} {msg.value}")


def ptx(cc, live, static_smem, maxnreg):
    """A kernel keeping `live` floats live at once; `static_smem` bytes of .shared."""
    sm = cc.replace(".", "")
    lines = [
        ".version 7.8" if int(sm) < 100 else ".version 8.7",
        f".target sm_{sm}",
        ".address_size 64",
    ]
    if static_smem:
        lines.append(f".shared .align 4 .b8 smem[{static_smem}];")
    hdr = ".visible .entry k(.param .u64 p)"
    if maxnreg:
        hdr += f" .maxnreg {maxnreg}"
    lines += [hdr, "{", f".reg .f32 %f<{live + 2}>;", ".reg .u64 %rd<4>;", ".reg .u32 %r<4>;",
              "ld.param.u64 %rd1, [p];", "cvta.to.global.u64 %rd2, %rd1;"]
    for i in range(live):
        lines.append(f"ld.global.f32 %f{i}, [%rd2+{4 * i}];")
    # A sum over every value keeps all of them live until the stores below.
    lines.append(f"mov.f32 %f{live}, 0f00000000;")
    for i in range(live):
        lines.append(f"add.f32 %f{live}, %f{live}, %f{i};")
    for i in range(live):
        lines.append(f"mul.f32 %f{i}, %f{i}, %f{live};")
        lines.append(f"st.global.f32 [%rd2+{4 * i}], %f{i};")
    if static_smem:
        lines += ["mov.u32 %r1, smem;", f"st.shared.f32 [%r1+{static_smem - 4}], %f{live};"]
    lines += ["ret;", "}"]
    return "\n".join(lines).encode() + b"\0"


def main():
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    name = ctypes.create_string_buffer(256)
    check(cu.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    drv = ctypes.c_int()
    check(cu.cuDriverGetVersion(ctypes.byref(drv)), "cuDriverGetVersion")

    def attr(a):
        v = ctypes.c_int()
        check(cu.cuDeviceGetAttribute(ctypes.byref(v), a, dev), f"attr {a}")
        return v.value

    # CUdevice_attribute values from cuda.h
    attrs = {
        "max_threads_per_block": attr(1),
        "max_shared_memory_per_block": attr(8),
        "multiprocessor_count": attr(16),
        "max_threads_per_multiprocessor": attr(39),
        "compute_capability_major": attr(75),
        "compute_capability_minor": attr(76),
        "max_shared_memory_per_multiprocessor": attr(81),
        "max_registers_per_multiprocessor": attr(82),
        "max_shared_memory_per_block_optin": attr(97),
        "max_blocks_per_multiprocessor": attr(106),
        "reserved_shared_memory_per_block": attr(111),
        "max_registers_per_block": attr(12),
    }
    cc = f"{attrs['compute_capability_major']}.{attrs['compute_capability_minor']}"
    optin = attrs["max_shared_memory_per_block_optin"]
    cases = []
    seen = set()
    variants = [(live, 0, 0) for live in (4, 12, 20, 28, 36, 44, 52, 60, 76, 92, 108, 124, 150, 180, 220, 250)]
    variants += [(28, s, 0) for s in (16, 1024, 7184, 20000, 48 * 1024)]
    variants += [(250, 0, m) for m in (32, 40, 64, 96, 128, 168)]
    for live, static_smem, maxnreg in variants:
        mod = ctypes.c_void_p()
        check(cu.cuModuleLoadData(ctypes.byref(mod), ptx(cc, live, static_smem, maxnreg)), "cuModuleLoadData")
        f = ctypes.c_void_p()
        check(cu.cuModuleGetFunction(ctypes.byref(f), mod, b"k"), "cuModuleGetFunction")

        def fattr(a):
            v = ctypes.c_int()
            check(cu.cuFuncGetAttribute(ctypes.byref(v), a, f), f"func attr {a}")
            return v.value

        regs, static_bytes, local, max_threads = fattr(4), fattr(1), fattr(3), fattr(0)
        if (regs, static_bytes) in seen:
            continue
        seen.add((regs, static_bytes))
        dyn_max = optin - static_bytes
        check(cu.cuFuncSetAttribute(f, 8, dyn_max), "set max dynamic shared")
        for block in (32, 64, 96, 128, 160, 192, 256, 288, 384, 512, 640, 768, 1024):
            if block > max_threads:
                continue
            for dyn in (0, 100, 1024, 3000, 8192, 16384, 25600, 40000, 49152, 65536, 100000, 150000, 200000, dyn_max):
                if dyn > dyn_max:
                    continue
                n = ctypes.c_int()
                check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), f, block, ctypes.c_size_t(dyn)), "occupancy")
                cases.append([regs, static_bytes, local, block, dyn, n.value])
    out = {"device": name.value.decode(), "cc": cc, "driver": drv.value, "attributes": attrs,
           "method": "cuOccupancyMaxActiveBlocksPerMultiprocessor on driver-JIT-compiled PTX (scripts/arch-occupancy-oracle.py)",
           "case_fields": CASE_FIELDS, "cases": cases}
    head = json.dumps({k: v for k, v in out.items() if k != "cases"}, indent=1)[:-2]
    text = head + ',\n "cases": [\n' + ",\n".join(json.dumps(c) for c in cases) + "\n ]\n}"
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)
    print(f"{out['device']} cc {cc}: {len(cases)} cases from {len(seen)} kernels", file=sys.stderr)


if __name__ == "__main__":
    main()
