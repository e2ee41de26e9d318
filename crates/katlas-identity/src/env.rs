//! The route-affecting environment.

use std::collections::BTreeMap;

/// Prefixes whose variables can change which kernels run or how fast.
pub const DEFAULT_ENV_PREFIXES: &[&str] =
    &["HIPFIRE_", "HIP_", "ROCR_", "HSA_", "AMD_", "CUDA_", "NCCL_", "NVIDIA_TF32", "TORCH_", "PYTORCH_", "KATLAS_"];

/// Names that look like credentials are never recorded, whatever their prefix.
pub fn is_secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"].iter().any(|p| up.contains(p))
}

/// Variables matching any prefix, secrets dropped, sorted by name.
pub fn route_env<I>(prefixes: &[String], vars: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (String, String)>,
{
    vars.into_iter()
        .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p.as_str())) && !is_secret_name(k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_secrets() {
        let prefixes: Vec<String> = DEFAULT_ENV_PREFIXES.iter().map(|s| s.to_string()).collect();
        let vars = [
            ("HIPFIRE_GRAPH", "1"),
            ("HIP_VISIBLE_DEVICES", "0"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("HIPFIRE_API_KEY", "sk-123"),
            ("KATLAS_HF_TOKEN", "hf_abc"),
            ("CUDA_PASSWORD", "x"),
            ("HOME", "/root"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = route_env(&prefixes, vars);
        assert_eq!(env.keys().collect::<Vec<_>>(), ["CUDA_VISIBLE_DEVICES", "HIPFIRE_GRAPH", "HIP_VISIBLE_DEVICES"]);
    }
}
