//! PTX text: only the `.entry` names are listed (PTX is compiled by the driver at load time).

pub fn entries(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim_start();
        let rest = if let Some(r) = l.strip_prefix(".visible .entry") {
            r
        } else if let Some(r) = l.strip_prefix(".entry") {
            r
        } else if let Some(r) = l.strip_prefix(".weak .entry") {
            r
        } else {
            continue;
        };
        let name: String = rest.trim_start().chars().take_while(|c| !c.is_whitespace() && *c != '(').collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// PTX produced by NVCC/NVRTC starts with comments and has `.version` and `.target` directives.
pub fn looks_like_ptx(d: &[u8]) -> bool {
    let head = &d[..d.len().min(4096)];
    let t = String::from_utf8_lossy(head);
    t.contains(".version") && t.contains(".target") && (t.trim_start().starts_with("//") || t.trim_start().starts_with(".version"))
}
