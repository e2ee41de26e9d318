//! PTX text: only the `.entry` names are listed (PTX is compiled by the driver at load time).

/// The `.entry` names in PTX bytes, without validating the whole text as UTF-8 first. Only lines
/// holding `.entry` are looked at (found with memchr: cuBLASLt's PTX is hundreds of MB).
pub fn entries_in(b: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut last_line = usize::MAX;
    for at in memchr::memmem::find_iter(b, b".entry") {
        let start = memchr::memrchr(b'\n', &b[..at]).map_or(0, |p| p + 1);
        if start == last_line {
            continue;
        }
        last_line = start;
        let end = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |p| at + p);
        let line = String::from_utf8_lossy(&b[start..end]);
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
