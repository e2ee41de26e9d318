//! Host, OS, kernel and CPU, read from procfs and os-release.

use katlas_model::HostIdentity;

fn read_trim(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

pub fn host_identity() -> HostIdentity {
    let hostname = read_trim("/proc/sys/kernel/hostname").or_else(|| read_trim("/etc/hostname")).or_else(|| std::env::var("HOSTNAME").ok());
    let os = std::fs::read_to_string("/etc/os-release").ok().and_then(|t| os_release_name(&t));
    let kernel = read_trim("/proc/sys/kernel/osrelease");
    let (cpu, cpu_count) = match std::fs::read_to_string("/proc/cpuinfo") {
        Ok(t) => cpu_model(&t),
        Err(_) => (None, None),
    };
    let cpu_count = cpu_count.or_else(|| std::thread::available_parallelism().ok().map(|n| n.get() as u32));
    HostIdentity { hostname, os, kernel, cpu, cpu_count }
}

pub fn os_release_name(text: &str) -> Option<String> {
    let get = |key: &str| text.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('='))).map(|v| v.trim().trim_matches('"').to_string());
    get("PRETTY_NAME").or_else(|| get("NAME"))
}

/// CPU model name and logical CPU count from /proc/cpuinfo (x86 and Arm layouts).
pub fn cpu_model(text: &str) -> (Option<String>, Option<u32>) {
    let model = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "model name" | "Model" | "cpu model").then(|| v.trim().to_string())
        })
        .filter(|s| !s.is_empty());
    let count = text.lines().filter(|l| l.split(':').next().map(str::trim) == Some("processor")).count() as u32;
    (model, (count > 0).then_some(count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_os_release_and_cpuinfo() {
        assert_eq!(
            os_release_name("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n").as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        let (m, n) = cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 9654\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654\n");
        assert_eq!(m.as_deref(), Some("AMD EPYC 9654"));
        assert_eq!(n, Some(2));
    }
}
