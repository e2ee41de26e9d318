//! A thin, checked layer over the CUDA driver API (cudarc's `driver::sys`): one context, one
//! stream, raw allocations, module loading, launches and events. Raw calls keep launches free
//! of bookkeeping so timing sees only the kernel.

use crate::Exit;
use cudarc::driver::sys::{self, CUresult};
use std::ffi::{c_void, CStr, CString};

pub fn ck(r: CUresult, what: &str) -> Result<(), Exit> {
    if r == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorString writes a pointer to a static string.
    let msg = unsafe {
        if sys::cuGetErrorString(r, &mut p) == CUresult::CUDA_SUCCESS && !p.is_null() {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        } else {
            String::new()
        }
    };
    Err(Exit::fail(format!("CUDA {what} failed: {r:?} {msg}")))
}

pub struct Device {
    pub ctx: sys::CUcontext,
    pub dev: sys::CUdevice,
    pub stream: sys::CUstream,
    pub name: String,
    pub cc: (i32, i32),
    pub sms: i32,
    pub l2_bytes: i64,
    pub mem_bytes: u64,
    pub driver_version: i32,
}

pub struct Buf {
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: ptr came from cuMemAlloc and is freed once.
        unsafe {
            let _ = sys::cuMemFree_v2(self.ptr);
        }
    }
}

pub struct Event(pub sys::CUevent);
impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate.
        unsafe {
            let _ = sys::cuEventDestroy_v2(self.0);
        }
    }
}

/// Kernel arguments: every value sits in its own 8-byte slot; CUDA reads as many bytes as the
/// parameter's type from each pointer.
#[derive(Default)]
pub struct Args {
    slots: Vec<[u8; 8]>,
}
impl Args {
    pub fn ptr(mut self, b: &Buf) -> Self {
        self.slots.push(b.ptr.to_le_bytes());
        self
    }
    pub fn raw_ptr(mut self, p: u64) -> Self {
        self.slots.push(p.to_le_bytes());
        self
    }
    pub fn i32(mut self, v: i32) -> Self {
        let mut s = [0u8; 8];
        s[..4].copy_from_slice(&v.to_le_bytes());
        self.slots.push(s);
        self
    }
    pub fn i64(mut self, v: i64) -> Self {
        self.slots.push(v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.slots.push(v.to_le_bytes());
        self
    }
    pub fn f32(mut self, v: f32) -> Self {
        let mut s = [0u8; 8];
        s[..4].copy_from_slice(&v.to_le_bytes());
        self.slots.push(s);
        self
    }
}

/// A module loaded by [`Device::load_module`] (kept for the process's life).
#[derive(Clone, Copy)]
pub struct Module(sys::CUmodule);

#[derive(Clone, Copy)]
pub struct Func {
    pub f: sys::CUfunction,
}

impl Device {
    pub fn open(ordinal: i32) -> Result<Device, Exit> {
        // SAFETY: standard driver initialisation sequence with out-parameters.
        unsafe {
            let r = sys::cuInit(0);
            if r != CUresult::CUDA_SUCCESS {
                return Err(Exit::env(format!("no usable CUDA device: cuInit returned {r:?}")));
            }
            let mut n = 0;
            ck(sys::cuDeviceGetCount(&mut n), "cuDeviceGetCount")?;
            if n <= ordinal {
                return Err(Exit::env(format!("no CUDA device {ordinal}: the driver sees {n}")));
            }
            let mut dev = 0;
            ck(sys::cuDeviceGet(&mut dev, ordinal), "cuDeviceGet")?;
            let mut ctx = std::ptr::null_mut();
            ck(sys::cuDevicePrimaryCtxRetain(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
            ck(sys::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
            let mut stream = std::ptr::null_mut();
            ck(sys::cuStreamCreate(&mut stream, 1), "cuStreamCreate")?;
            let mut name = [0 as std::ffi::c_char; 256];
            ck(sys::cuDeviceGetName(name.as_mut_ptr(), 255, dev), "cuDeviceGetName")?;
            let name = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            let attr = |a| -> Result<i32, Exit> {
                let mut v = 0;
                ck(sys::cuDeviceGetAttribute(&mut v, a, dev), "cuDeviceGetAttribute")?;
                Ok(v)
            };
            use sys::CUdevice_attribute as A;
            let cc = (attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?, attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?);
            let sms = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
            let l2_bytes = attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as i64;
            let mut mem = 0usize;
            ck(sys::cuDeviceTotalMem_v2(&mut mem, dev), "cuDeviceTotalMem")?;
            let mut dv = 0;
            ck(sys::cuDriverGetVersion(&mut dv), "cuDriverGetVersion")?;
            Ok(Device { ctx, dev, stream, name, cc, sms, l2_bytes, mem_bytes: mem as u64, driver_version: dv })
        }
    }

    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.cc.0, self.cc.1)
    }

    pub fn alloc(&self, bytes: usize) -> Result<Buf, Exit> {
        let mut p = 0;
        // SAFETY: out-parameter; a zero-byte request is rounded up.
        ck(unsafe { sys::cuMemAlloc_v2(&mut p, bytes.max(16)) }, "cuMemAlloc")?;
        Ok(Buf { ptr: p, bytes })
    }

    pub fn upload<T: Copy>(&self, data: &[T]) -> Result<Buf, Exit> {
        let bytes = std::mem::size_of_val(data);
        let b = self.alloc(bytes)?;
        // SAFETY: b holds at least `bytes`; data is plain old data.
        ck(unsafe { sys::cuMemcpyHtoD_v2(b.ptr, data.as_ptr() as *const c_void, bytes) }, "cuMemcpyHtoD")?;
        Ok(b)
    }

    pub fn download_f32(&self, b: &Buf, n: usize) -> Result<Vec<f32>, Exit> {
        self.sync()?;
        let mut v = vec![0f32; n];
        assert!(n * 4 <= b.bytes);
        // SAFETY: the destination has n floats; the source at least as many bytes.
        ck(unsafe { sys::cuMemcpyDtoH_v2(v.as_mut_ptr() as *mut c_void, b.ptr, n * 4) }, "cuMemcpyDtoH")?;
        Ok(v)
    }

    pub fn copy(&self, dst: &Buf, src: &Buf, bytes: usize) -> Result<(), Exit> {
        assert!(bytes <= dst.bytes && bytes <= src.bytes);
        // SAFETY: both buffers hold at least `bytes`.
        ck(unsafe { sys::cuMemcpyDtoDAsync_v2(dst.ptr, src.ptr, bytes, self.stream) }, "cuMemcpyDtoDAsync")
    }

    /// Copy `bytes` inside one buffer, from `src_off` to `dst_off` (regions must not overlap).
    pub fn copy_within(&self, b: &Buf, dst_off: usize, src_off: usize, bytes: usize) -> Result<(), Exit> {
        assert!(dst_off + bytes <= b.bytes && src_off + bytes <= b.bytes);
        assert!(dst_off + bytes <= src_off || src_off + bytes <= dst_off, "overlapping copy");
        // SAFETY: both ranges lie inside the buffer (checked above).
        ck(unsafe { sys::cuMemcpyDtoDAsync_v2(b.ptr + dst_off as u64, b.ptr + src_off as u64, bytes, self.stream) }, "cuMemcpyDtoDAsync")
    }

    pub fn memset(&self, b: &Buf, byte: u8) -> Result<(), Exit> {
        // SAFETY: the whole buffer.
        ck(unsafe { sys::cuMemsetD8Async(b.ptr, byte, b.bytes, self.stream) }, "cuMemsetD8Async")
    }

    pub fn load_module(&self, cubin: &[u8]) -> Result<Module, Exit> {
        let mut m = std::ptr::null_mut();
        // SAFETY: a complete cubin image produced by NVRTC for this device's arch.
        ck(unsafe { sys::cuModuleLoadData(&mut m, cubin.as_ptr() as *const c_void) }, "cuModuleLoadData")?;
        Ok(Module(m))
    }

    pub fn function(&self, m: Module, name: &str) -> Result<Func, Exit> {
        let c = CString::new(name).unwrap();
        let mut f = std::ptr::null_mut();
        // SAFETY: m came from load_module, so it is a loaded module.
        ck(unsafe { sys::cuModuleGetFunction(&mut f, m.0, c.as_ptr()) }, &format!("cuModuleGetFunction({name})"))?;
        Ok(Func { f })
    }

    pub fn launch(&self, f: Func, grid: (u32, u32), block: u32, args: &Args) -> Result<(), Exit> {
        let mut ptrs: Vec<*mut c_void> = args.slots.iter().map(|s| s.as_ptr() as *mut c_void).collect();
        // SAFETY: the argument slots outlive the call; the driver copies them at launch.
        ck(unsafe { sys::cuLaunchKernel(f.f, grid.0, grid.1, 1, block, 1, 1, 0, self.stream, ptrs.as_mut_ptr(), std::ptr::null_mut()) }, "cuLaunchKernel")
    }

    pub fn event(&self) -> Result<Event, Exit> {
        let mut e = std::ptr::null_mut();
        // SAFETY: out-parameter; default flags keep timing enabled.
        ck(unsafe { sys::cuEventCreate(&mut e, 0) }, "cuEventCreate")?;
        Ok(Event(e))
    }

    pub fn record(&self, e: &Event) -> Result<(), Exit> {
        // SAFETY: e is a live event.
        ck(unsafe { sys::cuEventRecord(e.0, self.stream) }, "cuEventRecord")
    }

    pub fn elapsed_us(&self, a: &Event, b: &Event) -> Result<f64, Exit> {
        let mut ms = 0f32;
        // SAFETY: both events were recorded and have completed (the caller synchronised).
        ck(unsafe { sys::cuEventElapsedTime_v2(&mut ms, a.0, b.0) }, "cuEventElapsedTime")?;
        Ok(ms as f64 * 1000.0)
    }

    pub fn sync(&self) -> Result<(), Exit> {
        // SAFETY: our stream.
        ck(unsafe { sys::cuStreamSynchronize(self.stream) }, "cuStreamSynchronize (a kernel may have faulted)")
    }

    /// Blocks of `block` threads that fit on one SM at once.
    pub fn max_blocks_per_sm(&self, f: Func, block: u32) -> Option<i32> {
        let mut n = 0;
        // SAFETY: out-parameter; f is a loaded function.
        (unsafe { sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut n, f.f, block as i32, 0) } == CUresult::CUDA_SUCCESS).then_some(n)
    }

    pub fn func_attr(&self, f: Func, a: sys::CUfunction_attribute) -> Option<i32> {
        let mut v = 0;
        // SAFETY: out-parameter.
        (unsafe { sys::cuFuncGetAttribute(&mut v, a, f.f) } == CUresult::CUDA_SUCCESS).then_some(v)
    }
}
