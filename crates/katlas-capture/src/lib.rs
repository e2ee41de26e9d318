//! `CUDA_INJECTION64_PATH` library for `katlas collect --capture-modules`.
//!
//! The CUDA driver loads the library named by `CUDA_INJECTION64_PATH` at `cuInit` and calls its
//! `InitializeInjection`. We subscribe to CUPTI's resource domain and, on every
//! `MODULE_LOADED`, write the module's image (the cubin the driver chose) under
//! `$KATLAS_CAPTURE_DIR` as `<sha256/16>.cubin`, appending one line per load to
//! `modules.jsonl`. This is the only way to read cuBLASLt's `nvjet_*` kernels: cuBLASLt
//! assembles them at run time (their names are printf templates in the library), so no file on
//! disk holds them. With lazy loading (CUDA 12.2+ default) only modules the process used are
//! loaded, which is exactly the set fit needs.
//!
//! CUPTI is opened with `dlopen` (never linked), so this library builds and loads anywhere; on a
//! machine without CUPTI it writes one `error` line and the workload runs on untouched. Nothing
//! here may unwind into the driver: every entry point catches panics.

use sha2::{Digest, Sha256};
use std::ffi::c_void;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

// cupti_callbacks.h (CUDA 12/13): CUPTI_CB_DOMAIN_RESOURCE = 3, CUPTI_CBID_RESOURCE_MODULE_LOADED = 6.
const DOMAIN_RESOURCE: u32 = 3;
const CBID_MODULE_LOADED: u32 = 6;

/// `CUpti_ResourceData`: context, a one-pointer union, then the descriptor.
#[repr(C)]
struct ResourceData {
    context: *mut c_void,
    handle: *mut c_void,
    descriptor: *const ModuleResourceData,
}

/// `CUpti_ModuleResourceData`.
#[repr(C)]
struct ModuleResourceData {
    module_id: u32,
    cubin_size: usize,
    cubin: *const u8,
}

type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type Subscribe = unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void) -> u32;
type SubscribeV2 = unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void, *mut SubscriberParams) -> u32;

/// `CUpti_SubscriberParams` (CUPTI 12.6+): asks CUPTI to let other clients subscribe too, so
/// a profiler in the workload (PyTorch's Kineto) keeps working beside us.
#[repr(C)]
struct SubscriberParams {
    struct_size: usize,
    name: *const u8,
    old_name: *mut u8,
    old_name_size: usize,
    allow_multiple: u8,
    padding: [u8; 7],
}
type EnableDomain = unsafe extern "C" fn(u32, *mut c_void, u32) -> u32;

/// The capture directory and the open CUPTI library (kept loaded for the process's lifetime).
struct State {
    dir: PathBuf,
    _cupti: libloading::Library,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// CUPTI libraries tried in order: `$KATLAS_CUPTI_LIB` alone when set; otherwise the sonames
/// CUDA 13 and 12 ship (already mapped when the framework loaded one, e.g. PyTorch's wheel),
/// then the toolkit's.
fn cupti_candidates() -> Vec<String> {
    match std::env::var("KATLAS_CUPTI_LIB") {
        Ok(one) => vec![one],
        Err(_) => ["libcupti.so.13", "libcupti.so.12", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"]
            .map(String::from)
            .to_vec(),
    }
}

/// One JSON line to `modules.jsonl` (values are numbers and hex, so no escaping is needed
/// except in `error`, which we keep to ASCII letters).
fn log_line(dir: &Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("modules.jsonl")) {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// Writes one loaded image; the file name is its content digest, so the same module loaded by
/// many contexts or processes is stored once.
pub fn record_module(dir: &Path, module_id: u32, image: &[u8]) -> std::io::Result<String> {
    let name = format!("{}.cubin", &hex::encode(Sha256::digest(image))[..16]);
    let path = dir.join(&name);
    if !path.exists() {
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        std::fs::write(&tmp, image)?;
        std::fs::rename(&tmp, &path)?;
    }
    log_line(dir, &format!(r#"{{"module_id":{module_id},"bytes":{},"file":"{name}","pid":{}}}"#, image.len(), std::process::id()));
    Ok(name)
}

unsafe extern "C" fn on_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    let _ = std::panic::catch_unwind(|| {
        if domain != DOMAIN_RESOURCE || cbid != CBID_MODULE_LOADED || data.is_null() {
            return;
        }
        // SAFETY: for RESOURCE/MODULE_LOADED CUPTI passes a CUpti_ResourceData whose descriptor
        // is a CUpti_ModuleResourceData valid for the duration of the callback.
        let rd = unsafe { &*(data as *const ResourceData) };
        if rd.descriptor.is_null() {
            return;
        }
        let md = unsafe { &*rd.descriptor };
        if md.cubin.is_null() || md.cubin_size == 0 {
            return;
        }
        let image = unsafe { std::slice::from_raw_parts(md.cubin, md.cubin_size) };
        let dir = match STATE.lock() {
            Ok(g) => g.as_ref().map(|s| s.dir.clone()),
            Err(_) => None,
        };
        if let Some(dir) = dir {
            let _ = record_module(&dir, md.module_id, image);
        }
    });
}

fn initialize() -> Result<(), String> {
    let dir = PathBuf::from(std::env::var_os("KATLAS_CAPTURE_DIR").ok_or("KATLAS_CAPTURE_DIR is not set")?);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut tried = Vec::new();
    let cupti = cupti_candidates()
        .into_iter()
        .find_map(|name| {
            // SAFETY: loading CUPTI runs its initialisers, which is what CUPTI is for.
            let lib = unsafe { libloading::Library::new(&name) };
            if lib.is_err() {
                tried.push(name);
            }
            lib.ok()
        })
        .ok_or_else(|| {
            log_line(&dir, &format!(r#"{{"error":"no CUPTI library could be opened","tried":"{}"}}"#, tried.join(" ")));
            "no CUPTI library".to_string()
        })?;
    // SAFETY: the symbols have the C signatures of cupti_callbacks.h.
    let how = unsafe {
        let enable: libloading::Symbol<EnableDomain> = cupti.get(b"cuptiEnableDomain\0").map_err(|e| e.to_string())?;
        let mut sub: *mut c_void = std::ptr::null_mut();
        // Prefer the subscription that leaves room for the workload's own profiler; CUPTI before
        // 12.6 has only the exclusive one.
        let mut attempts = Vec::new();
        let mut r = u32::MAX;
        let mut how = "shared";
        if let Ok(subscribe) = cupti.get::<SubscribeV2>(b"cuptiSubscribe_v2\0") {
            // Named first (the profiler then sees who holds CUPTI), then bare: CUPTI builds
            // differ in which fields they accept.
            let mut old = [0u8; 256];
            for named in [true, false] {
                let mut p = SubscriberParams {
                    struct_size: std::mem::size_of::<SubscriberParams>(),
                    name: if named { c"katlas-capture".as_ptr().cast() } else { std::ptr::null() },
                    old_name: if named { old.as_mut_ptr() } else { std::ptr::null_mut() },
                    old_name_size: if named { old.len() } else { 0 },
                    allow_multiple: 1,
                    padding: [0; 7],
                };
                r = subscribe(&mut sub, on_callback, std::ptr::null_mut(), &mut p);
                attempts.push(format!("v2{}={r}", if named { "-named" } else { "" }));
                if r == 0 {
                    break;
                }
            }
        }
        if r != 0 {
            let subscribe: libloading::Symbol<Subscribe> = cupti.get(b"cuptiSubscribe\0").map_err(|e| e.to_string())?;
            r = subscribe(&mut sub, on_callback, std::ptr::null_mut());
            attempts.push(format!("v1={r}"));
            how = "exclusive";
        }
        let how = if attempts.len() > 1 { format!("{how} ({})", attempts.join(" ")) } else { how.to_string() };
        if r != 0 {
            log_line(&dir, &format!(r#"{{"error":"cuptiSubscribe failed","code":{r},"subscription":"{how}"}}"#));
            return Err(format!("cuptiSubscribe: {r}"));
        }
        let r = enable(1, sub, DOMAIN_RESOURCE);
        if r != 0 {
            log_line(&dir, &format!(r#"{{"error":"cuptiEnableDomain failed","code":{r}}}"#));
            return Err(format!("cuptiEnableDomain: {r}"));
        }
        how
    };
    log_line(&dir, &format!(r#"{{"ready":true,"pid":{},"subscription":"{how}"}}"#, std::process::id()));
    if let Ok(mut g) = STATE.lock() {
        *g = Some(State { dir, _cupti: cupti });
    }
    Ok(())
}

/// Called by the CUDA driver at `cuInit` when this library is `CUDA_INJECTION64_PATH`.
/// Returns 1 on success; a failure is logged and never stops the workload.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> i32 {
    match std::panic::catch_unwind(initialize) {
        Ok(Ok(())) => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_per_distinct_image_and_one_line_per_load() {
        let d = tempfile_dir();
        let a = record_module(&d, 7, b"\x7fELF one").unwrap();
        let b = record_module(&d, 8, b"\x7fELF one").unwrap();
        let c = record_module(&d, 9, b"\x7fELF two").unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(std::fs::read(d.join(&a)).unwrap(), b"\x7fELF one");
        let log = std::fs::read_to_string(d.join("modules.jsonl")).unwrap();
        assert_eq!(log.lines().count(), 3, "{log}");
        assert!(log.lines().nth(1).unwrap().contains(r#""module_id":8"#));
        let cubins = std::fs::read_dir(&d).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "cubin")).count();
        assert_eq!(cubins, 2);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn without_cupti_initialisation_fails_softly_and_says_why() {
        let d = tempfile_dir();
        // SAFETY: tests in this module run in one process; no other thread reads these.
        unsafe {
            std::env::set_var("KATLAS_CAPTURE_DIR", &d);
            std::env::set_var("KATLAS_CUPTI_LIB", "/nonexistent/libcupti.so");
        }
        assert_eq!(InitializeInjection(), 0);
        let log = std::fs::read_to_string(d.join("modules.jsonl")).unwrap();
        assert!(log.contains("no CUPTI library could be opened") && log.contains("/nonexistent/libcupti.so"), "{log}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        tempfile::tempdir().unwrap().keep()
    }
}
