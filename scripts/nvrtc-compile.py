import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
src = open(sys.argv[2], 'rb').read()
arch = sys.argv[3]; out = sys.argv[4]
prog = ctypes.c_void_p()
def ck(r, what):
    if r != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise SystemExit(f"{what}: {lib.nvrtcGetErrorString(r).decode()}")
ck(lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None), "create")
names = [b"ns::tmpl<3>"]
for n in names: ck(lib.nvrtcAddNameExpression(prog, n), "name")
opts = [f"--gpu-architecture={arch}".encode(), b"-default-device", b"--ptxas-options=-v", b"-lineinfo"]
arr = (ctypes.c_char_p * len(opts))(*opts)
r = lib.nvrtcCompileProgram(prog, len(opts), arr)
n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
open(out + ".log", "wb").write(log.value)
ck(r, "compile: " + log.value.decode(errors="replace"))
lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
buf = ctypes.create_string_buffer(n.value); ck(lib.nvrtcGetCUBIN(prog, buf), "cubin")
open(out, "wb").write(buf.raw)
