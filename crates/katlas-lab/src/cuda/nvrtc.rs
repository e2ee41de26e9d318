//! NVRTC compilation to SASS cubins (`-arch=sm_XX`), keeping the ptxas `-v` report that says
//! registers, shared memory, stack frame and spills per kernel.

use crate::kernels::HEADERS;
use crate::Exit;
use cudarc::nvrtc::sys;
use std::ffi::{c_char, CString};

use crate::case::Resource;

pub struct Compiled {
    pub file: String,
    pub arch: String,
    pub cubin: Vec<u8>,
    pub log: String,
    pub resources: Vec<Resource>,
}

pub fn version() -> Option<(i32, i32)> {
    let (mut a, mut b) = (0, 0);
    // SAFETY: plain out-parameters.
    let r = unsafe { sys::nvrtcVersion(&mut a, &mut b) };
    (r == sys::nvrtcResult::NVRTC_SUCCESS).then_some((a, b))
}

fn ck(r: sys::nvrtcResult, what: &str, file: &str) -> Result<(), Exit> {
    if r == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Exit::fail(format!("NVRTC {what} failed for {file}: {r:?}")))
    }
}

pub fn compile(file: &str, src: &str, arch: &str) -> Result<Compiled, Exit> {
    let csrc = CString::new(src).map_err(|_| Exit::input(format!("{file}: NUL byte in source")))?;
    let cname = CString::new(file).unwrap();
    let hsrc: Vec<CString> = HEADERS.iter().map(|(_, s)| CString::new(*s).unwrap()).collect();
    let hname: Vec<CString> = HEADERS.iter().map(|(n, _)| CString::new(*n).unwrap()).collect();
    let hsrc_p: Vec<*const c_char> = hsrc.iter().map(|c| c.as_ptr()).collect();
    let hname_p: Vec<*const c_char> = hname.iter().map(|c| c.as_ptr()).collect();
    let opts: Vec<CString> =
        [format!("-arch={arch}"), "--ptxas-options=-v".into(), "-std=c++17".into(), "-lineinfo".into()].into_iter().map(|s| CString::new(s).unwrap()).collect();
    let opts_p: Vec<*const c_char> = opts.iter().map(|c| c.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer points into a CString alive for the whole call sequence.
    unsafe {
        ck(sys::nvrtcCreateProgram(&mut prog, csrc.as_ptr(), cname.as_ptr(), HEADERS.len() as i32, hsrc_p.as_ptr(), hname_p.as_ptr()), "create", file)?;
        let rc = sys::nvrtcCompileProgram(prog, opts_p.len() as i32, opts_p.as_ptr());
        let mut log_len = 0usize;
        let mut log = String::new();
        if sys::nvrtcGetProgramLogSize(prog, &mut log_len) == sys::nvrtcResult::NVRTC_SUCCESS && log_len > 1 {
            let mut buf = vec![0u8; log_len];
            if sys::nvrtcGetProgramLog(prog, buf.as_mut_ptr() as *mut c_char) == sys::nvrtcResult::NVRTC_SUCCESS {
                buf.truncate(log_len - 1);
                log = String::from_utf8_lossy(&buf).into_owned();
            }
        }
        if rc != sys::nvrtcResult::NVRTC_SUCCESS {
            let _ = sys::nvrtcDestroyProgram(&mut prog);
            return Err(Exit::fail(format!("NVRTC could not compile {file} for {arch} ({rc:?}):\n{log}")));
        }
        let mut n = 0usize;
        ck(sys::nvrtcGetCUBINSize(prog, &mut n), "cubin size", file)?;
        let mut cubin = vec![0u8; n];
        ck(sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char), "cubin", file)?;
        let _ = sys::nvrtcDestroyProgram(&mut prog);
        let resources = parse_ptxas(&log);
        Ok(Compiled { file: file.to_string(), arch: arch.to_string(), cubin, log, resources })
    }
}

fn num_before(s: &str, unit: &str) -> Option<u64> {
    let i = s.find(unit)?;
    s[..i].trim_end().rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Parse `ptxas -v` lines into one record per kernel.
pub fn parse_ptxas(log: &str) -> Vec<Resource> {
    let mut out: Vec<Resource> = Vec::new();
    let mut cur: Option<usize> = None;
    for line in log.lines() {
        let name = line
            .split_once("Compiling entry function '")
            .or_else(|| line.split_once("Function properties for "))
            .map(|(_, rest)| rest.split('\'').next().unwrap_or(rest).trim().to_string());
        if let Some(name) = name {
            let idx = out.iter().position(|r| r.func == name).unwrap_or_else(|| {
                out.push(Resource { func: name.clone(), ..Default::default() });
                out.len() - 1
            });
            cur = Some(idx);
            continue;
        }
        let Some(i) = cur else { continue };
        if line.contains("stack frame") {
            out[i].stack_bytes = num_before(line, "bytes stack frame");
            out[i].spill_stores = num_before(line, "bytes spill stores");
            out[i].spill_loads = num_before(line, "bytes spill loads");
        } else if line.contains("Used ") && line.contains("registers") {
            out[i].registers = num_before(line, "registers").map(|v| v as u32);
            out[i].smem_bytes = num_before(line, "bytes smem").or(Some(0));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses_ptxas_report() {
        let log = "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'k1' for 'sm_90'\nptxas info    : Function properties for k1\n    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\nptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]\nptxas info    : Compiling entry function 'k2' for 'sm_90'\nptxas info    : Function properties for k2\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 18 registers, used 0 barriers, 368 bytes cmem[0]\n";
        let r = parse_ptxas(log);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            Resource { func: "k1".into(), registers: Some(40), stack_bytes: Some(8), spill_stores: Some(4), spill_loads: Some(12), smem_bytes: Some(2048) }
        );
        assert_eq!(r[1].registers, Some(18));
        assert_eq!(r[1].smem_bytes, Some(0));
    }
}
