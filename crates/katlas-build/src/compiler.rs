//! Compiler discovery, identity and invocation. HIP: `hipcc --genco` when present (or asked
//! for), else a bare clang (`clang-22` from Debian): with HIP headers and device bitcode
//! ([`HipHeaders`]) for sources that include `hip/…`, header-less (`-nogpuinc -nogpulib`) for
//! sources that bring their own prelude.
//! CUDA: `nvcc -cubin` when present (or asked for), else NVRTC loaded at run time.
//! The identity (path, version, binary md5) goes into every cache key.

use crate::config::Settings;
use crate::nvrtc::Nvrtc;
use crate::sources::Lang;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Clang,
    Hipcc,
    Nvcc,
    Nvrtc,
}

/// What a cache key and a build report say about a compiler.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
pub struct CompilerId {
    pub lang: String,
    pub kind: String,
    pub path: Option<String>,
    pub version: String,
    /// md5 of the compiler binary (clang/hipcc/nvcc) or libnvrtc.
    pub md5: Option<String>,
}

#[derive(Clone)]
pub struct Compiler {
    pub id: CompilerId,
    pub kind: Kind,
    path: PathBuf,
    nvrtc: Option<Arc<Nvrtc>>,
    /// For a bare clang: the HIP headers found (none: header-less sources only).
    pub hip_headers: Option<HipHeaders>,
    /// For a bare clang with no headers: why (a configured location that holds none).
    pub hip_headers_error: Option<String>,
}

/// The script that fetches HIP headers for a bare clang into `.cache/hip-headers` (katlas's
/// own repository: its tests run without ROCm).
pub const FETCH_HIP_HEADERS: &str = "scripts/fetch-hip-headers";

/// What a user does about missing HIP headers for a bare clang, on their own machine.
pub const HIP_HEADERS_HINT: &str = "install ROCm's HIP SDK, whose hipcc brings its headers (AMD's ROCm repository: \
     `apt install rocm-hip-sdk`; Debian/Ubuntu: `apt install hipcc libamdhip64-dev`), or point `[build] hip_headers` in \
     katlas.toml or the KATLAS_HIP_HEADERS environment variable at a ROCm root holding include/hip/hip_runtime.h and the \
     amdgcn device bitcode (ocml.bc), e.g. /opt/rocm";

/// What a user does about a missing HIP compiler.
pub const HIP_COMPILER_HINT: &str = "install ROCm's hipcc (AMD's ROCm repository: `apt install rocm-hip-sdk`; \
     Debian/Ubuntu: `apt install hipcc`) or clang with lld (`apt install clang-22 lld-22`), or name one with \
     `[build] hip_compiler` in katlas.toml or the KATLAS_CLANG environment variable";

/// HIP headers + amdgcn device bitcode usable by a bare clang: a ROCm install, Debian's
/// packages, or the unpacked packages of katlas's scripts/fetch-hip-headers.
#[derive(Debug, Clone, PartialEq)]
pub struct HipHeaders {
    /// `--rocm-path`: holds `include/hip/hip_runtime.h` and `share/hip/version`.
    pub rocm: PathBuf,
    /// `--rocm-device-lib-path`: holds `ocml.bc`, `ockl.bc`, `oclc_*.bc`.
    pub device_libs: PathBuf,
    /// Package versions and .deb md5s (STAMP), else the HIP version file: part of cache keys.
    pub stamp: String,
}

impl HipHeaders {
    /// Where headers are looked for when none is configured, in order: the project's own
    /// `.cache/hip-headers` (where katlas's scripts/fetch-hip-headers unpacks them), `$ROCM_PATH`,
    /// `/opt/rocm`, `/usr` (Debian's `libamdhip64-dev` + `rocm-device-libs`). Never a folder
    /// above the project: a `.cache/` there is anyone's (`/tmp/.cache`).
    pub fn candidate_dirs(root: &Path, env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf> {
        let mut v = vec![root.join(".cache/hip-headers")];
        v.extend(env("ROCM_PATH").filter(|r| !r.is_empty()).map(PathBuf::from));
        v.extend([PathBuf::from("/opt/rocm"), PathBuf::from("/usr")]);
        v
    }

    /// `[build] hip_headers` / `KATLAS_HIP_HEADERS` when set (it must hold headers), else the
    /// first of [`Self::candidate_dirs`] that holds them; `Ok(None)`: none found.
    pub fn find(s: &Settings) -> Result<Option<HipHeaders>, String> {
        if let Some(p) = &s.hip_headers {
            return Self::at(p)
                .map(Some)
                .map_err(|e| format!("no HIP headers: [build] hip_headers / KATLAS_HIP_HEADERS = {}: {e}; {HIP_HEADERS_HINT}", p.display()));
        }
        let env = |k: &str| std::env::var_os(k);
        Ok(Self::candidate_dirs(&s.root, &env).iter().find_map(|d| Self::at(d).ok()))
    }

    /// Headers under `dir` (a ROCm-like root, or a folder holding one as `usr/`).
    pub fn at(dir: &Path) -> Result<HipHeaders, String> {
        let rocm = [dir.to_path_buf(), dir.join("usr")]
            .into_iter()
            .find(|d| d.join("include/hip/hip_runtime.h").is_file())
            .ok_or_else(|| format!("no include/hip/hip_runtime.h under {} (nor its usr/)", dir.display()))?;
        // fetch-hip-headers links amdgcn/; a ROCm install or Debian's layout keeps the bitcode
        // under lib/llvm*/lib/clang/<v>/[lib/]amdgcn/bitcode.
        let mut cands = vec![rocm.join("amdgcn/bitcode")];
        for base in ["lib", "lib/llvm/lib"] {
            for e in std::fs::read_dir(rocm.join(base)).into_iter().flatten().flatten() {
                cands.push(e.path().join("amdgcn/bitcode"));
                for v in std::fs::read_dir(e.path().join("lib/clang")).into_iter().flatten().flatten() {
                    cands.push(v.path().join("amdgcn/bitcode"));
                    cands.push(v.path().join("lib/amdgcn/bitcode"));
                }
            }
        }
        let device_libs =
            cands.into_iter().find(|d| d.join("ocml.bc").is_file()).ok_or_else(|| format!("no amdgcn device bitcode (ocml.bc) under {}", rocm.display()))?;
        let stamp = [dir.join("STAMP"), rocm.join("share/hip/version")]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        Ok(HipHeaders { rocm, device_libs, stamp })
    }
}

/// Outcome of one compile.
pub struct Outcome {
    pub ok: bool,
    pub exit_code: Option<i32>,
    /// The command line, then everything the compiler printed.
    pub log: String,
}

pub fn which(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|c| c.is_file()))
}

fn version_of(path: &Path) -> Option<String> {
    let o = Command::new(path).arg("--version").stdin(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("InstalledDir")).collect();
    (!lines.is_empty()).then(|| lines.join(" | "))
}

fn digest(path: &Path, cache: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    katlas_identity::file_digest(&real, Some(cache)).md5
}

impl Compiler {
    fn from_binary(lang: Lang, kind: Kind, path: PathBuf, cache: &Path) -> Result<Compiler, String> {
        let version = version_of(&path).ok_or_else(|| format!("{}: `--version` failed", path.display()))?;
        let id = CompilerId {
            lang: lang.as_str().into(),
            kind: format!("{kind:?}").to_lowercase(),
            path: Some(path.display().to_string()),
            version,
            md5: digest(&path, cache),
        };
        Ok(Compiler { id, kind, path, nvrtc: None, hip_headers: None, hip_headers_error: None })
    }

    /// The HIP compiler per `[build] hip_compiler`.
    pub fn hip(s: &Settings, cache: &Path) -> Result<Compiler, String> {
        let want = s.hip_compiler.as_str();
        let hipcc = || {
            which("hipcc")
                .or_else(|| std::env::var_os("ROCM_PATH").map(|r| PathBuf::from(r).join("bin/hipcc")).filter(|p| p.is_file()))
                .or_else(|| Some(PathBuf::from("/opt/rocm/bin/hipcc")).filter(|p| p.is_file()))
        };
        let clang = || std::env::var_os("KATLAS_CLANG").map(PathBuf::from).or_else(|| which("clang-22")).or_else(|| which("clang"));
        let (kind, path) = match want {
            "auto" => match hipcc() {
                Some(p) => (Kind::Hipcc, p),
                None => (
                    Kind::Clang,
                    clang().ok_or_else(|| {
                        format!("no HIP compiler: neither hipcc (PATH, $ROCM_PATH/bin, /opt/rocm/bin) nor clang-22/clang found; {HIP_COMPILER_HINT}")
                    })?,
                ),
            },
            "hipcc" => (
                Kind::Hipcc,
                hipcc().ok_or_else(|| {
                    format!(
                        "no HIP compiler: build.hip_compiler = \"hipcc\" but hipcc is not on PATH nor in $ROCM_PATH/bin or /opt/rocm/bin; {HIP_COMPILER_HINT}"
                    )
                })?,
            ),
            "clang" => (
                Kind::Clang,
                clang().ok_or_else(|| {
                    format!("no HIP compiler: build.hip_compiler = \"clang\" but clang-22/clang is not on PATH (nor KATLAS_CLANG); {HIP_COMPILER_HINT}")
                })?,
            ),
            p => {
                let path = which(p).ok_or_else(|| format!("no HIP compiler: build.hip_compiler = {p:?} not found; {HIP_COMPILER_HINT}"))?;
                let k = if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains("hipcc")) { Kind::Hipcc } else { Kind::Clang };
                (k, path)
            }
        };
        if kind == Kind::Clang && matches!(want, "auto" | "clang") {
            // clang links the code object with ld.lld from its own directory or PATH (a wrapper
            // given by path is trusted to know its own linker).
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            let beside = real.parent().map(|d| d.join("ld.lld")).filter(|p| p.is_file());
            if beside.is_none() && which("ld.lld").is_none() {
                return Err(format!("no HIP linker: {} needs ld.lld beside it or on PATH (`apt install lld-22`, or the lld of the same LLVM)", path.display()));
            }
        }
        let mut c = Self::from_binary(Lang::Hip, kind, path, cache)?;
        if kind == Kind::Clang {
            // Missing headers only stop the sources that include hip/…: the build decides per job.
            match HipHeaders::find(s) {
                Ok(h) => c.hip_headers = h,
                Err(e) => c.hip_headers_error = Some(e),
            }
        }
        Ok(c)
    }

    /// The CUDA compiler per `[build] cuda_compiler`.
    pub fn cuda(s: &Settings, cache: &Path) -> Result<Compiler, String> {
        let nvcc = || which("nvcc").or_else(|| Some(PathBuf::from("/usr/local/cuda/bin/nvcc")).filter(|p| p.is_file()));
        let nvrtc = || -> Result<Compiler, String> {
            let n = Nvrtc::load(&s.root, s.nvrtc.as_deref())?;
            let id = CompilerId {
                lang: "cuda".into(),
                kind: "nvrtc".into(),
                path: n.path.as_ref().map(|p| p.display().to_string()),
                version: format!("nvrtc {}.{}", n.version.0, n.version.1),
                md5: n.path.as_ref().and_then(|p| digest(p, cache)),
            };
            Ok(Compiler {
                id,
                kind: Kind::Nvrtc,
                path: n.path.clone().unwrap_or_default(),
                nvrtc: Some(Arc::new(n)),
                hip_headers: None,
                hip_headers_error: None,
            })
        };
        match s.cuda_compiler.as_str() {
            "auto" => match nvcc() {
                Some(p) => Self::from_binary(Lang::Cuda, Kind::Nvcc, p, cache),
                None => nvrtc().map_err(|e| format!("no CUDA compiler: nvcc is not on PATH nor in /usr/local/cuda/bin, and {e}")),
            },
            "nvrtc" => nvrtc(),
            "nvcc" => Self::from_binary(
                Lang::Cuda,
                Kind::Nvcc,
                nvcc().ok_or("no CUDA compiler: build.cuda_compiler = \"nvcc\" but nvcc is not on PATH nor in /usr/local/cuda/bin; install the CUDA toolkit, or set build.cuda_compiler = \"nvrtc\"")?,
                cache,
            ),
            p => {
                let path = which(p).ok_or_else(|| format!("no CUDA compiler: build.cuda_compiler = {p:?} not found"))?;
                Self::from_binary(Lang::Cuda, Kind::Nvcc, path, cache)
            }
        }
    }

    /// Output file extension.
    pub fn out_ext(&self) -> &'static str {
        match self.kind {
            Kind::Clang | Kind::Hipcc => "hsaco",
            Kind::Nvcc | Kind::Nvrtc => "cubin",
        }
    }

    /// Flags that decide the output (cache key and command line), without input/output paths.
    /// `with_headers`: the source includes `hip/…` (a bare clang then gets [`HipHeaders`]).
    pub fn flags(&self, s: &Settings, atom: &str, src_dir: &Path, with_headers: bool) -> Vec<String> {
        let mut f: Vec<String> = match (self.kind, self.hip_headers.as_ref().filter(|_| with_headers)) {
            (Kind::Clang, Some(h)) => {
                // clang 22 no longer predefines __AMDGCN_WAVEFRONT_SIZE, which HIP 6.4's
                // headers need (warpSize): the atom's default wave size, as hipcc compiles.
                let wave = s.atom(atom).default_wave_size;
                ["-x", "hip", "--offload-device-only", "--no-gpu-bundle-output"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain([
                        format!("--rocm-path={}", h.rocm.display()),
                        format!("--rocm-device-lib-path={}", h.device_libs.display()),
                        format!("-D__AMDGCN_WAVEFRONT_SIZE={wave}"),
                        format!("--offload-arch={atom}"),
                    ])
                    .collect()
            }
            (Kind::Clang, None) => ["-x", "hip", "--offload-device-only", "--no-gpu-bundle-output", "-nogpuinc", "-nogpulib"]
                .iter()
                .map(|s| s.to_string())
                .chain([format!("--offload-arch={atom}")])
                .collect(),
            (Kind::Hipcc, _) => vec!["--genco".into(), format!("--offload-arch={atom}")],
            (Kind::Nvcc, _) => vec!["-cubin".into(), format!("-arch={atom}"), "-Xptxas".into(), "-v".into()],
            (Kind::Nvrtc, _) => vec![format!("-arch={atom}"), "--ptxas-options=-v".into()],
        };
        f.push(if self.kind == Kind::Nvrtc { "-std=c++17".into() } else { "-O3".into() });
        if self.kind != Kind::Nvrtc {
            f.push("-std=c++17".into());
        }
        for d in std::iter::once(src_dir).chain(s.include_dirs.iter().map(PathBuf::as_path)) {
            f.push(format!("-I{}", d.display()));
        }
        f.extend(match self.kind {
            Kind::Clang | Kind::Hipcc => s.hip_flags.iter().cloned(),
            Kind::Nvcc | Kind::Nvrtc => s.cuda_flags.iter().cloned(),
        });
        f
    }

    /// Compile `src` with `flags` into `out`.
    pub fn compile(&self, src: &Path, shown: &str, flags: &[String], out: &Path, timeout_s: u64) -> Outcome {
        if let Some(n) = &self.nvrtc {
            let mut log = format!("$ nvrtc {} {shown}\n", flags.join(" "));
            let bytes = match std::fs::read(src) {
                Ok(b) => b,
                Err(e) => return Outcome { ok: false, exit_code: None, log: log + &format!("{shown}: {e}\n") },
            };
            return match n.compile(&bytes, shown, flags) {
                Err(e) => Outcome { ok: false, exit_code: None, log: log + &e + "\n" },
                Ok(r) => {
                    log.push_str(&r.log);
                    if !log.ends_with('\n') {
                        log.push('\n');
                    }
                    match r.cubin {
                        Some(c) => match std::fs::write(out, c) {
                            Ok(()) => Outcome { ok: true, exit_code: Some(0), log },
                            Err(e) => Outcome { ok: false, exit_code: None, log: log + &format!("{}: {e}\n", out.display()) },
                        },
                        None => Outcome { ok: false, exit_code: None, log: log + &format!("NVRTC: {}\n", r.status) },
                    }
                }
            };
        }
        let mut args: Vec<String> = flags.to_vec();
        args.push(src.display().to_string());
        args.push("-o".into());
        args.push(out.display().to_string());
        let mut log = format!("$ {} {}\n", self.path.display(), args.join(" "));
        let mut cmd = Command::new(&self.path);
        cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Own process group, so a timeout kills the driver and every subprocess it started
        // (clang -cc1, lld, a wrapper's children) and the output pipes close.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return Outcome { ok: false, exit_code: None, log: log + &format!("cannot run {}: {e}\n", self.path.display()) },
        };
        // Drain both pipes on threads so a chatty compiler never blocks on a full pipe.
        let mut so = child.stdout.take().expect("piped");
        let mut se = child.stderr.take().expect("piped");
        let t1 = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = so.read_to_end(&mut v);
            v
        });
        let t2 = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = se.read_to_end(&mut v);
            v
        });
        let start = Instant::now();
        let limit = Duration::from_secs(timeout_s);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if start.elapsed() > limit => {
                    #[cfg(unix)]
                    // SAFETY: signals the process group we created for this child only.
                    unsafe {
                        libc::kill(-(child.id() as i32), libc::SIGKILL);
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break None,
            }
        };
        let out_b = t1.join().unwrap_or_default();
        let err_b = t2.join().unwrap_or_default();
        log.push_str(&String::from_utf8_lossy(&out_b));
        log.push_str(&String::from_utf8_lossy(&err_b));
        match status {
            None => {
                log.push_str(&format!("killed after {}s (build.timeout_s / KATLAS_BUILD_TIMEOUT)\n", limit.as_secs()));
                Outcome { ok: false, exit_code: None, log }
            }
            Some(st) => {
                let ok = st.success() && out.is_file();
                if st.success() && !ok {
                    log.push_str("compiler exited 0 but wrote no output\n");
                }
                Outcome { ok, exit_code: st.code(), log }
            }
        }
    }
}
