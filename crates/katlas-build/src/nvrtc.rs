//! NVRTC through `dlopen` (libloading): CUDA sources compile to SASS cubins without a GPU or a
//! CUDA toolkit, from the `nvidia-cuda-nvrtc` (CUDA 13) or `nvidia-cuda-nvrtc-cu12` wheel.
//! Loaded by hand rather than through cudarc's dynamic loader because a missing library must be
//! a clear missing-toolchain report, not a panic.

use std::ffi::{c_char, c_int, c_void, CStr, CString, OsString};
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

/// NVRTC's file names, newest first: the CUDA 13 wheel (`nvidia-cuda-nvrtc`) ships
/// `libnvrtc.so.13`, the CUDA 12 wheel (`nvidia-cuda-nvrtc-cu12`) `libnvrtc.so.12`, a toolkit
/// also the unversioned link.
pub const LIB_NAMES: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// What a user does about a missing NVRTC, on their own machine.
pub const INSTALL_HINT: &str = "install NVRTC into the active Python environment with `pip install nvidia-cuda-nvrtc-cu12` \
     (CUDA 12; `pip install nvidia-cuda-nvrtc` for CUDA 13), or install the CUDA toolkit (nvcc; /usr/local/cuda), \
     or point `[build] nvrtc` in katlas.toml or the KATLAS_NVRTC environment variable at libnvrtc.so or its folder";

/// Where the wheels put the library inside a site-packages folder.
const WHEEL_DIRS: [&str; 2] = ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"];

/// The NVRTC library in `dir` (any of [`LIB_NAMES`]).
pub fn lib_in(dir: &Path) -> Option<PathBuf> {
    LIB_NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// `prefix/lib/python3*/{site,dist}-packages`, sorted.
fn site_packages(prefix: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(prefix.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python3")))
        .flat_map(|e| [e.path().join("site-packages"), e.path().join("dist-packages")])
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// `/usr/local/cuda-12.4` after `/usr/local/cuda-12.10`: toolkits newest first.
fn cuda_toolkits(base: &Path) -> Vec<PathBuf> {
    let version = |p: &PathBuf| -> Vec<u32> {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.trim_start_matches("cuda").trim_start_matches('-').split('.').map(|x| x.parse().unwrap_or(0)).collect()
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("cuda-")))
        .map(|e| e.path())
        .collect();
    v.sort_by_key(|p| std::cmp::Reverse(version(p)));
    v
}

/// Folders searched for NVRTC when neither `[build] nvrtc` nor `KATLAS_NVRTC` is set, in order:
/// the project's own `.cache/nvrtc/x` (where katlas's scripts/fetch-nvrtc unpacks the wheel),
/// the wheels' folders in the site-packages of the active Python (`$VIRTUAL_ENV`,
/// `$CONDA_PREFIX`, the prefix of `python3` on PATH, the user's
/// `~/.local`, `/usr/local`, `/usr`), then CUDA toolkits (`$CUDA_HOME`, `$CUDA_PATH`,
/// `/usr/local/cuda`, `/usr/local/cuda-*`, newest first). Never a folder above the project: a
/// `.cache/` there is anyone's (`/tmp/.cache`), and NVRTC is loaded into this process.
/// `env` reads environment variables (the process's own outside tests).
pub fn candidate_dirs(project_root: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut prefixes: Vec<PathBuf> = Vec::new();
    prefixes.extend(var("VIRTUAL_ENV"));
    prefixes.extend(var("CONDA_PREFIX"));
    // Never the repository's own `.venv/`: a library found there is loaded into this process,
    // and a cloned repository could ship one. An activated venv is `$VIRTUAL_ENV`.
    if let Some(paths) = env("PATH") {
        if let Some(py) = std::env::split_paths(&paths).map(|d| d.join("python3")).find(|p| p.is_file()) {
            // A venv's python3 links to the base interpreter: the venv is the link's own prefix.
            prefixes.extend(py.parent().and_then(Path::parent).map(Path::to_path_buf));
            if let Ok(real) = std::fs::canonicalize(&py) {
                prefixes.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
            }
        }
    }
    prefixes.extend(var("HOME").map(|h| h.join(".local")));
    prefixes.extend([PathBuf::from("/usr/local"), PathBuf::from("/usr")]);
    let mut sites = vec![project_root.join(".cache/nvrtc/x")];
    for p in &prefixes {
        sites.extend(site_packages(p));
    }
    sites.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    let mut dirs: Vec<PathBuf> = sites.iter().flat_map(|s| WHEEL_DIRS.iter().map(move |w| s.join(w))).collect();
    let mut toolkits: Vec<PathBuf> = [var("CUDA_HOME"), var("CUDA_PATH")].into_iter().flatten().collect();
    toolkits.push(PathBuf::from("/usr/local/cuda"));
    toolkits.extend(cuda_toolkits(Path::new("/usr/local")));
    dirs.extend(toolkits.iter().map(|t| t.join("lib64")));
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The NVRTC [`Nvrtc::load`] would open: `Ok(Some(file))`, `Ok(None)` for the loader path,
/// `Err` when an explicit location (`[build] nvrtc`, else `KATLAS_NVRTC`) holds none.
pub fn locate(project_root: &Path, explicit: Option<&Path>, env: &dyn Fn(&str) -> Option<OsString>) -> Result<Option<PathBuf>, String> {
    let (key, p) = match (explicit, env("KATLAS_NVRTC").filter(|v| !v.is_empty())) {
        (Some(p), _) => ("[build] nvrtc", Some(p.to_path_buf())),
        (None, Some(v)) => ("KATLAS_NVRTC", Some(PathBuf::from(v))),
        (None, None) => ("", None),
    };
    if let Some(p) = p {
        let found = if p.is_dir() { lib_in(&p) } else { Some(p.clone()).filter(|f| f.is_file()) };
        return found.map(Some).ok_or_else(|| {
            format!(
                "no NVRTC: {key} = {} holds no NVRTC library ({}); point it at libnvrtc.so or its folder, or {INSTALL_HINT}",
                p.display(),
                LIB_NAMES.join(", ")
            )
        });
    }
    Ok(candidate_dirs(project_root, env).iter().find_map(|d| lib_in(d)))
}

impl Nvrtc {
    /// Load NVRTC: `explicit` (`[build] nvrtc`) or `KATLAS_NVRTC` (file or folder) when set,
    /// else the first of [`candidate_dirs`] that holds it, else the loader path.
    pub fn load(project_root: &Path, explicit_path: Option<&Path>) -> Result<Nvrtc, String> {
        let env = |k: &str| std::env::var_os(k);
        match locate(project_root, explicit_path, &env)? {
            Some(file) => Self::open(Some(&file)),
            None => Self::open(None).map_err(|e| {
                format!(
                    "no NVRTC: not in the active Python's site-packages (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib; $VIRTUAL_ENV, \
                     $CONDA_PREFIX, python3 on PATH, ~/.local, /usr/local, /usr), a CUDA toolkit's lib64 ($CUDA_HOME, \
                     $CUDA_PATH, /usr/local/cuda*), the project's .cache/nvrtc, nor on the loader path ({e}); {INSTALL_HINT}"
                )
            }),
        }
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
                .ok_or_else(|| "libnvrtc.so.13/.so.12 not found".to_string())?,
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
