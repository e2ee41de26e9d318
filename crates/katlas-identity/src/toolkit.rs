//! Toolkit versions. Absent tools map to `null`.

use crate::tool_output;
use std::collections::BTreeMap;

pub fn toolkits() -> BTreeMap<String, Option<String>> {
    let mut t = BTreeMap::new();
    t.insert("nvcc".into(), tool_output("nvcc", &["--version"]).and_then(|s| nvcc_release(&s)));
    t.insert(
        "nvidia_driver".into(),
        tool_output("nvidia-smi", &["--query-gpu=driver_version", "--format=csv,noheader"])
            .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
            .filter(|s| !s.is_empty()),
    );
    t.insert("hipcc".into(), tool_output("hipcc", &["--version"]).and_then(|s| hip_version(&s)));
    t.insert("rocm".into(), std::fs::read_to_string("/opt/rocm/.info/version").ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
    t.insert("amdgpu_driver".into(), std::fs::read_to_string("/sys/module/amdgpu/version").ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
    t
}

/// `Cuda compilation tools, release 13.0, V13.0.88` → `13.0.88`.
pub fn nvcc_release(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.contains("release"))?;
    if let Some(v) = line.split(", V").nth(1) {
        return Some(v.trim().to_string());
    }
    line.split("release").nth(1).map(|s| s.trim().trim_end_matches(',').split(',').next().unwrap_or("").trim().to_string())
}

/// `HIP version: 6.4.43482-0f2d60242` → `6.4.43482-0f2d60242`.
pub fn hip_version(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("HIP version:")).map(|v| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        let nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";
        assert_eq!(nvcc_release(nvcc).as_deref(), Some("13.0.88"));
        assert_eq!(hip_version("HIP version: 6.4.43482-0f2d60242\nAMD clang version 19").as_deref(), Some("6.4.43482-0f2d60242"));
    }
}
