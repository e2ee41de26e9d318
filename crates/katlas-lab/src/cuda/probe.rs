//! Find the CUDA driver and NVRTC before cudarc touches them: cudarc panics when a library is
//! missing, so the lab dlopens them itself first and turns absence into a clear exit-3 error.

use crate::Exit;
use std::path::{Path, PathBuf};

/// dlopen libcuda.so.1 (the driver's soname, or `KATLAS_CUDA_LIB` when set); the handle stays
/// loaded for cudarc to find.
pub fn driver() -> Result<(), Exit> {
    let name = std::env::var_os("KATLAS_CUDA_LIB").unwrap_or_else(|| "libcuda.so.1".into());
    // SAFETY: loading the system CUDA driver library runs its initialisers, as any CUDA program does.
    match unsafe { libloading::Library::new(&name) } {
        Ok(lib) => {
            std::mem::forget(lib);
            Ok(())
        }
        Err(e) => Err(Exit::env(format!(
            "no CUDA driver: {} could not be loaded ({e}); run on a machine with an NVIDIA driver, or use --backend cpu",
            name.to_string_lossy()
        ))),
    }
}

/// Load NVRTC from `KATLAS_NVRTC` (the library file or its folder, e.g. the `nvidia-cuda-nvrtc`
/// wheel's `nvidia/cu13/lib`) when set, else from the loader's path. Loading by full path first
/// makes cudarc's later dlopen by soname find the same library.
pub fn nvrtc() -> Result<Option<PathBuf>, Exit> {
    let mut chosen = None;
    if let Some(p) = std::env::var_os("KATLAS_NVRTC") {
        let p = PathBuf::from(p);
        let (dir, file) = if p.is_dir() { (p.clone(), p.join("libnvrtc.so.13")) } else { (p.parent().map(Path::to_path_buf).unwrap_or_default(), p.clone()) };
        if !file.is_file() {
            return Err(Exit::env(format!(
                "no NVRTC: KATLAS_NVRTC points at {}, which holds no libnvrtc.so.13 (scripts/fetch-nvrtc fetches one)",
                p.display()
            )));
        }
        // NVRTC dlopens its builtins by soname; load them from the same folder first when present.
        for b in ["libnvrtc-builtins.so.13.0", "libnvrtc-builtins.so.13.1", "libnvrtc-builtins.so.13.2"] {
            let bp = dir.join(b);
            if bp.is_file() {
                // SAFETY: NVIDIA's NVRTC builtins library, a plain shared object.
                if let Ok(l) = unsafe { libloading::Library::new(&bp) } {
                    std::mem::forget(l);
                }
            }
        }
        // SAFETY: as above, NVIDIA's NVRTC library.
        let lib = unsafe { libloading::Library::new(&file) }.map_err(|e| Exit::env(format!("no NVRTC: {} could not be loaded: {e}", file.display())))?;
        std::mem::forget(lib);
        chosen = Some(file);
    }
    // SAFETY: only probes whether cudarc's candidate names load.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Exit::env(
            "no NVRTC: libnvrtc.so.13 is not on the loader path; set KATLAS_NVRTC to its folder (scripts/fetch-nvrtc) or LD_LIBRARY_PATH=/usr/local/cuda/lib64"
                .to_string(),
        ));
    }
    Ok(chosen)
}
