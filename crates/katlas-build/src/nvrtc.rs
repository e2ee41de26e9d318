//! NVRTC through `dlopen` (libloading): CUDA sources compile to SASS cubins without a GPU or a
//! CUDA toolkit, from the `nvidia-cuda-nvrtc` wheel. Loaded by hand rather than through
//! cudarc's dynamic loader because a missing library must be a clear exit-3 error, not a panic.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

type Prog = *mut c_void;
type Res = c_int;

/// The NVRTC entry points we use.
pub struct Nvrtc {
    _lib: libloading::Library,
    _builtins: Vec<libloading::Library>,
    /// The library file, when loaded by path.
    pub path: Option<PathBuf>,
    pub version: (i32, i32),
    create: unsafe extern "C" fn(*mut Prog, *const c_char, *const c_char, c_int, *const *const c_char, *const *const c_char) -> Res,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> Res,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    cubin_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    cubin: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    destroy: unsafe extern "C" fn(*mut Prog) -> Res,
    err: unsafe extern "C" fn(Res) -> *const c_char,
}

// SAFETY: NVRTC documents its API as thread safe for distinct programs; the function pointers
// and library handle are immutable after loading.
unsafe impl Send for Nvrtc {}
unsafe impl Sync for Nvrtc {}

/// Result of one NVRTC compile: the cubin on success, and the log either way.
pub struct NvrtcOutput {
    pub cubin: Option<Vec<u8>>,
    pub log: String,
    pub status: String,
}

/// Places to look for `libnvrtc.so.13`, most explicit first.
pub fn candidates(project_root: &Path, explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = explicit.map(Path::to_path_buf).or_else(|| std::env::var_os("KATLAS_NVRTC").map(PathBuf::from)) {
        v.push(if p.is_dir() { p.join("libnvrtc.so.13") } else { p });
        return v;
    }
    for anc in project_root.ancestors() {
        v.push(anc.join(".cache/nvrtc/x/nvidia/cu13/lib/libnvrtc.so.13"));
        v.push(anc.join(".cache/fixtures/pypi/nvrtc/nvidia/cu13/lib/libnvrtc.so.13"));
    }
    v.push(PathBuf::from("/usr/local/cuda/lib64/libnvrtc.so"));
    v
}

impl Nvrtc {
    /// Load NVRTC: `explicit` (`[build] nvrtc`) or `KATLAS_NVRTC` (file or folder) when set,
    /// else the repo's `.cache/nvrtc` (scripts/fetch-nvrtc), else a CUDA toolkit, else the loader path.
    pub fn load(project_root: &Path, explicit_path: Option<&Path>) -> Result<Nvrtc, String> {
        let explicit = explicit_path.is_some() || std::env::var_os("KATLAS_NVRTC").is_some();
        let mut tried = Vec::new();
        for c in candidates(project_root, explicit_path) {
            if c.is_file() {
                return Self::open(Some(&c));
            }
            tried.push(c.display().to_string());
        }
        if explicit {
            return Err(format!(
                "no NVRTC: [build] nvrtc / KATLAS_NVRTC point at {}, which is not libnvrtc (scripts/fetch-nvrtc fetches one)",
                tried.join(", ")
            ));
        }
        Self::open(None).map_err(|e| format!("no NVRTC: not in {} nor on the loader path ({e}); run scripts/fetch-nvrtc or set KATLAS_NVRTC", tried.join(", ")))
    }

    fn open(path: Option<&Path>) -> Result<Nvrtc, String> {
        let mut builtins = Vec::new();
        // NVRTC dlopens its builtins by soname: load the ones beside it first.
        if let Some(dir) = path.and_then(Path::parent) {
            if let Ok(rd) = std::fs::read_dir(dir) {
                let mut names: Vec<PathBuf> = rd
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc-builtins.so")))
                    .collect();
                names.sort();
                for b in names {
                    // SAFETY: NVIDIA's NVRTC builtins, a plain shared object with no initialiser side effects.
                    if let Ok(l) = unsafe { libloading::Library::new(&b) } {
                        builtins.push(l);
                    }
                }
            }
        }
        // SAFETY: loading NVIDIA's NVRTC library.
        let lib = match path {
            Some(p) => unsafe { libloading::Library::new(p) }.map_err(|e| format!("{}: {e}", p.display()))?,
            None => ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
                .iter()
                .find_map(|n| unsafe { libloading::Library::new(*n) }.ok())
                .ok_or_else(|| "libnvrtc.so.13 not found".to_string())?,
        };
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has the C signature of the NVRTC header, matched by the field type.
                *unsafe { lib.get($name) }.map_err(|e| format!("NVRTC lacks {}: {e}", String::from_utf8_lossy($name)))?
            };
        }
        let version_fn: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Res = sym!(b"nvrtcVersion\0");
        let (mut a, mut b) = (0, 0);
        // SAFETY: plain out-parameters.
        let r = unsafe { version_fn(&mut a, &mut b) };
        if r != 0 {
            return Err(format!("nvrtcVersion failed ({r})"));
        }
        Ok(Nvrtc {
            create: sym!(b"nvrtcCreateProgram\0"),
            compile: sym!(b"nvrtcCompileProgram\0"),
            log_size: sym!(b"nvrtcGetProgramLogSize\0"),
            log: sym!(b"nvrtcGetProgramLog\0"),
            cubin_size: sym!(b"nvrtcGetCUBINSize\0"),
            cubin: sym!(b"nvrtcGetCUBIN\0"),
            destroy: sym!(b"nvrtcDestroyProgram\0"),
            err: sym!(b"nvrtcGetErrorString\0"),
            _lib: lib,
            _builtins: builtins,
            path: path.map(Path::to_path_buf),
            version: (a, b),
        })
    }

    fn err_str(&self, r: Res) -> String {
        // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string for any code.
        let p = unsafe { (self.err)(r) };
        if p.is_null() {
            return format!("NVRTC error {r}");
        }
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Compile `src` (named `name` in diagnostics) with `options`; include files are found
    /// through `-I` options.
    pub fn compile(&self, src: &[u8], name: &str, options: &[String]) -> Result<NvrtcOutput, String> {
        let csrc = CString::new(src).map_err(|_| format!("{name}: NUL byte in source"))?;
        let cname = CString::new(name).map_err(|_| format!("{name}: NUL byte in name"))?;
        let opts: Vec<CString> = options.iter().map(|o| CString::new(o.as_str())).collect::<Result<_, _>>().map_err(|_| "NUL in option".to_string())?;
        let opt_p: Vec<*const c_char> = opts.iter().map(|c| c.as_ptr()).collect();
        let mut prog: Prog = std::ptr::null_mut();
        // SAFETY: every pointer points into a CString alive for the whole sequence; the program
        // is destroyed on every path.
        unsafe {
            let r = (self.create)(&mut prog, csrc.as_ptr(), cname.as_ptr(), 0, std::ptr::null(), std::ptr::null());
            if r != 0 {
                return Err(format!("nvrtcCreateProgram: {}", self.err_str(r)));
            }
            let rc = (self.compile)(prog, opt_p.len() as c_int, opt_p.as_ptr());
            let mut n = 0usize;
            let mut log = String::new();
            if (self.log_size)(prog, &mut n) == 0 && n > 1 && n < (1 << 30) {
                let mut buf = vec![0u8; n];
                if (self.log)(prog, buf.as_mut_ptr() as *mut c_char) == 0 {
                    buf.truncate(n - 1);
                    log = String::from_utf8_lossy(&buf).into_owned();
                }
            }
            let mut out = NvrtcOutput { cubin: None, log, status: self.err_str(rc) };
            if rc == 0 {
                let mut n = 0usize;
                let r = (self.cubin_size)(prog, &mut n);
                if r == 0 && n > 0 && n < (1 << 32) {
                    let mut buf = vec![0u8; n];
                    if (self.cubin)(prog, buf.as_mut_ptr() as *mut c_char) == 0 {
                        out.cubin = Some(buf);
                    }
                }
                if out.cubin.is_none() {
                    out.status = format!("no cubin ({}): is -arch a real sm_XX?", self.err_str(r));
                }
            }
            (self.destroy)(&mut prog);
            Ok(out)
        }
    }
}
